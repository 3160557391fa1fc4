//go:build integration

package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aifs/aifs/plan"
)

// stallJobScript is a training job's loader: it reads every third file from argv[3] to argv[4]
// (in the DatasetFolder order of the mount at argv[2], which is pack order: no two adjacent,
// so that no read starts a sequential run read ahead) once, shuffled, through a torch
// DataLoader of argv[5] workers, each sample read whole, and measures its data stall with
// aifs.stall (argv[1] is python/) per job kind. After the epoch it lets the daemon fold its
// workers, which have exited (two sweeps a second apart: it reads the stats twice), and prints
// the blocked seconds each kind grew by, the lap's share, its wall time and the readers the
// daemon folded meanwhile, as JSON.
const stallJobScript = `
import json, sys, time
sys.path.insert(0, sys.argv[1])
import torch
from torchvision import datasets
import aifs

mnt, lo, hi, workers = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
paths = [p for p, _ in datasets.DatasetFolder(mnt, loader=len, extensions=(".jpeg",)).samples][lo:hi:3]

class Files(torch.utils.data.Dataset):
    def __len__(self):
        return len(paths)
    def __getitem__(self, i):
        with open(paths[i], "rb") as f:
            return len(f.read())

kinds = ("tree", "cgroup", "mount")
stalls = {k: aifs.stall(mnt, readers=workers, job=k) for k in kinds}
before = {k: s.blocked_seconds() for k, s in stalls.items()}
exited = aifs._read_stats(mnt)["stall"]["readers_exited"]
t0 = time.monotonic()
n = sum(int(b.sum()) > 0 for b in torch.utils.data.DataLoader(Files(), batch_size=1, shuffle=True, num_workers=workers))
wall = time.monotonic() - t0
for _ in range(2):  # the workers have exited: a sweep finds them gone, the next folds them
    time.sleep(1.2)
    folded = aifs._read_stats(mnt)["stall"]["readers_exited"] - exited
share = stalls["tree"].lap()
print(json.dumps({"files": n, "wall": wall, "share": share, "source": stalls["tree"].source, "cgroup": aifs.cgroup(),
                  "folded": folded, "blocked": {k: s.blocked_seconds() - before[k] for k, s in stalls.items()}}))
`

// stallOtherScript is another job: it reads the files argv[2].. of the mount at argv[1], one at a
// time, printing "ready" after the first, until its stdin closes, then prints how many it read.
const stallOtherScript = `
import os, sys, threading
root = sys.argv[1]
paths = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)[int(sys.argv[2]):]
done = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
n = 0
for p in paths:
    with open(p, "rb") as f:
        f.read()
    n += 1
    if n == 1:
        print("ready", flush=True)
    if done.is_set():
        break
print(n, flush=True)
`

// jobCgroup makes a cgroup for a test's job under this process's memory cgroup (cgroup v1), or
// under the root of the v2 hierarchy, removed at the end of the test, and returns its directory
// and the path aifs names it by (aifs.cgroup()).
func jobCgroup(t *testing.T, name string) (dir, path string) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	root, base := "", ""
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && strings.Contains(","+parts[1]+",", ",memory,") {
			root, base = "/sys/fs/cgroup/memory", parts[2]
		}
	}
	if root == "" {
		root, base = "/sys/fs/cgroup", "/"
	}
	path = filepath.Join(base, fmt.Sprintf("aifs-stall-%s-%d", name, os.Getpid()))
	dir = filepath.Join(root, path)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("making a cgroup for a job: %v", err)
	}
	t.Cleanup(func() {
		for i := 0; i < 50 && os.Remove(dir) != nil; i++ { // its processes may take a moment to leave
			time.Sleep(100 * time.Millisecond)
		}
	})
	return dir, path
}

// inCgroup returns a command that runs python with args in the cgroup at dir from its start.
func inCgroup(dir string, args ...string) *exec.Cmd {
	return exec.Command("sh", append([]string{"-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, dir, torchPython}, args...)...)
}

// TestStallPerJob: a torch DataLoader (2 workers) reads 40 samples through a mount over S3 whose
// every request the delay proxy holds for 200 ms, while another job, in another cgroup and
// process tree, reads other samples of the same mount. The data stall aifs.stall reports for the
// loader's job, by its process tree and by its cgroup, is within 10% of what the injected latency
// implies, 40 × 200 ms (each sample one S3 GET, no read ahead in a shuffled order with plans off),
// and never less; the other job's reads, which the mount's figure counts, are in neither. The
// workers had exited when the figure was read: their time stayed with the job.
func TestStallPerJob(t *testing.T) {
	const (
		delay   = 200 * time.Millisecond
		files   = 40
		workers = 2
	)
	srv := s3Server(t)
	_, url := s3JPEGSet(t, srv, "stall")
	ep := startThrottler(t, srv.Endpoint, "--delay", delay.String())
	mnt := mountSet(t, url, "--s3-endpoint", ep, "-o", "kernel_cache=off,plans=off,mem_cache=1M")
	pkg, err := filepath.Abs(filepath.Join("..", "python"))
	if err != nil {
		t.Fatal(err)
	}
	dirA, cgA := jobCgroup(t, "a")
	dirB, cgB := jobCgroup(t, "b")

	other := inCgroup(dirB, "-c", stallOtherScript, mnt, "300")
	stdin, _ := other.StdinPipe()
	stdout, _ := other.StdoutPipe()
	other.Stderr = os.Stderr
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("the other job did not start reading: %q", lines.Text())
	}
	requests := storageStat(t, mnt, "s3", "requests")

	out, err := inCgroup(dirA, "-c", stallJobScript, pkg, mnt, "0", fmt.Sprint(3*files), fmt.Sprint(workers)).Output()
	if err != nil {
		t.Fatalf("the loader's job: %v\n%s", err, out)
	}
	stdin.Close()
	var otherFiles int
	if !lines.Scan() {
		t.Fatal("the other job printed no count")
	}
	fmt.Sscan(lines.Text(), &otherFiles)
	other.Wait()

	var job struct {
		Files, Folded  int
		Wall, Share    float64
		Source, Cgroup string
		Blocked        map[string]float64
	}
	if err := json.Unmarshal(out, &job); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	implied := float64(files) * delay.Seconds()
	t.Logf("loader: %d files in %.2fs, stall %.1f%%; blocked %v, implied %.2fs; the other job read %d files meanwhile; %d S3 requests",
		job.Files, job.Wall, 100*job.Share, job.Blocked, implied, otherFiles, storageStat(t, mnt, "s3", "requests")-requests)
	if job.Files != files || job.Source != "fuse" || job.Cgroup != cgA {
		t.Fatalf("the loader read %d files, source %q, in cgroup %q; want %d, fuse, %s", job.Files, job.Source, job.Cgroup, files, cgA)
	}
	for _, kind := range []string{"tree", "cgroup"} {
		if b := job.Blocked[kind]; b < implied || b > 1.1*implied {
			t.Errorf("the job's stall by %s: %.3fs blocked, want within 10%% of the injected %.2fs", kind, b, implied)
		}
	}
	// The mount's figure has the other job's reads made during the loader's epoch.
	if m := job.Blocked["mount"]; m < job.Blocked["tree"]+5*delay.Seconds() {
		t.Errorf("the mount's stall %.3fs, the job's %.3fs: the other job's reads (%d files) are not in the mount's", m, job.Blocked["tree"], otherFiles)
	}
	if want := job.Blocked["tree"] / (job.Wall * workers); job.Share <= 0 || job.Share > want*1.01 {
		t.Errorf("lap share %.4f, want at most the blocked time over the epoch's %d×%.2fs (%.4f)", job.Share, workers, job.Wall, want)
	}
	if job.Folded < workers {
		t.Errorf("%d readers folded after the epoch, want the %d workers at least: the figures above were not of exited workers", job.Folded, workers)
	}
	// The other job's reads are its cgroup's (read ahead in its sequential run, not each a GET).
	st := readStats(t, mnt)
	var seenB bool
	for _, c := range st.Stall.Cgroups {
		seenB = seenB || c.Cgroup == cgB && c.BlockedSeconds >= 5*delay.Seconds()
	}
	if !seenB {
		t.Errorf("stats: cgroups %+v, want %s with the other job's stall", st.Stall.Cgroups, cgB)
	}
}

// stallKernelScript reads files of the kernel plane at argv[2] (python/ is argv[1]) in argv[3]
// child processes, each the files i ≡ k (mod argv[3]) of the first argv[4], cold, and
// measures the job's stall with aifs.stall by process tree. Each child first reads one file and
// waits until the daemon lists it as a reader (so its delay is counted from before its reads),
// then reads, and reports the growth of its own block-I/O delay (/proc/self/stat field 42,
// clock ticks) over its reads. The parent reads the job's figure while the children live and
// again after they exited and were folded, and prints the three as JSON.
const stallKernelScript = `
import json, multiprocessing as mp, os, sys, time
sys.path.insert(0, sys.argv[1])
import aifs

mnt, n, count = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
paths = sorted(os.path.join(d, f) for d, _, fs in os.walk(mnt) for f in fs)[:count]

def ticks():
    with open("/proc/self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[39])

def child(k, out, release):
    with open(paths[k], "rb") as f:
        f.read()
    while not any(r["pid"] == os.getpid() for r in aifs._read_stats(mnt)["stall"]["readers"]):
        time.sleep(0.05)
    t = ticks()
    for p in paths[n + k::n]:
        with open(p, "rb") as f:
            f.read()
    out.put(ticks() - t)
    release.wait()

s = aifs.stall(mnt, readers=n)
before = s.blocked_seconds()
out, release = mp.Queue(), mp.Event()
kids = [mp.Process(target=child, args=(k, out, release)) for k in range(n)]
for c in kids:
    c.start()
own = sum(out.get() for _ in kids) / 100
live = s.blocked_seconds() - before
release.set()
for c in kids:
    c.join()
for _ in range(2):
    time.sleep(1.2)
    aifs._read_stats(mnt)
print(json.dumps({"own": own, "live": live, "exited": s.blocked_seconds() - before, "source": s.source}))
`

// TestStallKernelPlane: on the kernel plane with delay accounting on (the test turns
// kernel.task_delayacct on and restores it), the stall of a job of two reader processes reading
// cold files is their block-I/O delay as they measure it themselves, while they live and after
// they exited; another job reading at the same time, in another cgroup and process tree, is not
// in it but in its own cgroup's figure.
func TestStallKernelPlane(t *testing.T) {
	needKernelPlane(t)
	const sysctl = "/proc/sys/kernel/task_delayacct"
	old, err := os.ReadFile(sysctl)
	if err != nil {
		t.Fatalf("no delay accounting in this kernel: %v", err)
	}
	if err := os.WriteFile(sysctl, []byte("1"), 0); err != nil {
		t.Fatalf("turning delay accounting on: %v", err)
	}
	t.Cleanup(func() { os.WriteFile(sysctl, old, 0) })

	src := t.TempDir()
	const files = 400
	for i := range files {
		writeFile(t, filepath.Join(src, fmt.Sprintf("c%d/s-%03d.bin", i%4, i)), randomBytes(uint64(i)+900, 256<<10))
	}
	set := filepath.Join(t.TempDir(), "set")
	mustAifs(t, "pack", "--quiet", src, set)
	mnt := mountKernel(t, set)
	// Cold: the plane's pages and the shards' are dropped (written back first: dirty pages stay).
	unix.Sync()
	for _, dir := range []string{mnt, set} {
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if f, err := os.Open(p); err == nil {
					unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
					f.Close()
				}
			}
			return nil
		})
	}
	pkg, err := filepath.Abs(filepath.Join("..", "python"))
	if err != nil {
		t.Fatal(err)
	}
	dirA, _ := jobCgroup(t, "ka")
	dirB, cgB := jobCgroup(t, "kb")
	other := inCgroup(dirB, "-c", stallOtherScript, mnt, "200") // the files after the job's
	stdin, _ := other.StdinPipe()
	stdout, _ := other.StdoutPipe()
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("the other job did not start reading: %q", lines.Text())
	}
	out, err := inCgroup(dirA, "-c", stallKernelScript, pkg, mnt, "2", "200").Output()
	stdin.Close()
	other.Wait()
	if err != nil {
		t.Fatalf("the job: %v\n%s", err, out)
	}
	var job struct {
		Own, Live, Exited float64
		Source            string
	}
	if err := json.Unmarshal(out, &job); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Logf("kernel plane: the job's readers measured %.2fs of block-I/O delay; aifs.stall %.2fs while they lived, %.2fs after they exited", job.Own, job.Live, job.Exited)
	if job.Source != "delayacct" {
		t.Fatalf("stall source %q, want delayacct", job.Source)
	}
	if job.Own <= 0 {
		t.Fatalf("the readers measured no block-I/O delay reading %d cold files: nothing to compare", files/2)
	}
	// The readers' own figure and the daemon's are the same counters: a clock tick (10 ms) apart
	// per reader at most.
	for what, got := range map[string]float64{"while they lived": job.Live, "after they exited": job.Exited} {
		if got < job.Own-0.02 || got > job.Own+0.02 {
			t.Errorf("the job's stall %s: %.2fs, want the readers' own %.2fs", what, got, job.Own)
		}
	}
	st := readStats(t, filepath.Dir(plan.Control(mnt)))
	for _, c := range st.Stall.Cgroups {
		if c.Cgroup == cgB && c.Requests == 0 {
			t.Errorf("the other job's cgroup %s: %+v, want its files", cgB, c)
		}
	}
}
