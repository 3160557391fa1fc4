//go:build integration

package integration

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"
)

// resumeScript runs one part of an epoch over the mount in argv[1] with
// aifs.plan.ResumableSampler (seed 3, epoch 1, 2 workers, batches of 10): from the position in
// argv[2], for argv[3] batches (-1: to the end); argv[4] is python/. It prints the indices read, the sampler's state
// after, and the epoch's global order, as JSON.
const resumeScript = `
import json, sys
sys.path.insert(0, sys.argv[4])
import torch
from torchvision import datasets
from aifs import plan

class Indexed(torch.utils.data.Dataset):
    """The folder's samples, each read whole; an item is its index (samples and root name the
    files for the plan, as ImageFolder's do)."""
    def __init__(self, folder):
        self.samples, self.root = folder.samples, folder.root
    def __len__(self):
        return len(self.samples)
    def __getitem__(self, i):
        with open(self.samples[i][0], "rb") as f:
            f.read()
        return i

ds = Indexed(datasets.DatasetFolder(sys.argv[1], loader=len, extensions=(".jpeg",)))
s = plan.ResumableSampler(ds, seed=3)
s.load_state_dict({"epoch": 1, "seed": 3, "position": int(sys.argv[2])})
read, steps = [], int(sys.argv[3])
for k, batch in enumerate(torch.utils.data.DataLoader(ds, sampler=s, batch_size=10, num_workers=2)):
    if k == steps:
        break
    read += batch.tolist()
state = {"epoch": 1, "seed": 3, "position": int(sys.argv[2]) + len(read)}
print(json.dumps({"read": read, "state": state, "order": s.global_order(1)}))
`

// TestResumePlan: a DataLoader stopped after 20 batches and restarted from its saved state
// continues with sample 200 of the same order, every sample is read once over the two runs, and
// the plan the daemon received on resuming names the 400 remaining samples (its cursor in the
// stats file then reaches their end), not the whole epoch.
func TestResumePlan(t *testing.T) {
	_, set := jpegSet(t)
	mnt := mountSet(t, set)
	pkg, err := filepath.Abs(filepath.Join("..", "python"))
	if err != nil {
		t.Fatal(err)
	}
	type run struct {
		Read  []int
		State struct{ Position int }
		Order []int
	}
	var first, second run
	if err := json.Unmarshal([]byte(python(t, resumeScript, mnt, "0", "20", pkg)), &first); err != nil {
		t.Fatal(err)
	}
	if first.State.Position != 200 {
		t.Fatalf("stopped at position %d, want 200", first.State.Position)
	}
	if err := json.Unmarshal([]byte(python(t, resumeScript, mnt, "200", "-1", pkg)), &second); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(first.Order, second.Order) {
		t.Fatal("the two runs saw different orders of the epoch")
	}
	if !slices.Equal(second.Read, second.Order[200:]) {
		t.Errorf("the resumed run read %v..., want the order from sample 200: %v...", second.Read[:min(5, len(second.Read))], second.Order[200:205])
	}
	all := slices.Sorted(slices.Values(append(slices.Clone(first.Read), second.Read...)))
	if len(all) != jpegFiles || all[0] != 0 || all[len(all)-1] != jpegFiles-1 || len(slices.Compact(all)) != jpegFiles {
		t.Errorf("the two runs read %d samples, want each of %d once", len(all), jpegFiles)
	}
	st := readStats(t, mnt)
	var resumed bool
	for _, p := range st.Plans {
		if p.Samples == jpegFiles-200 && p.Read >= jpegFiles-200-16 {
			resumed = true
		}
	}
	if !resumed {
		t.Errorf("plans %+v: want one of the %d samples left after the resume, read to its end", st.Plans, jpegFiles-200)
	}
}
