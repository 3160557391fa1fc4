//go:build integration

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// These tests read a mount with real torchvision (Debian's python3-torch, python3-torchvision and
// python3-pil under /usr/bin/python3) through torchcheck/check.py. They never skip: a machine
// without those packages fails them.

const (
	torchPython   = "/usr/bin/python3"
	pythonTimeout = 3 * time.Minute

	// The shared JPEG tree: decodable images of about 40 KB in a few classes, written by
	// gendata in a couple of seconds.
	jpegFiles   = 600
	jpegClasses = 6
)

// The JPEG tree and its shard set are built once and shared by the torch tests.
var jpegData struct {
	once     sync.Once
	src, set string
	err      error
}

// jpegSet returns the shared JPEG source tree and its packed shard set.
func jpegSet(t testing.TB) (src, set string) {
	t.Helper()
	jpegData.once.Do(func() {
		gendata, err := buildGendata()
		if err != nil {
			jpegData.err = err
			return
		}
		src, set := filepath.Join(workDir, "jpeg-source"), filepath.Join(workDir, "jpeg-set")
		gen := exec.Command(gendata, "--jpeg", "--files", strconv.Itoa(jpegFiles), "--classes", strconv.Itoa(jpegClasses),
			"--mean-size", "40000", "--seed", "7", src)
		if out, err := gen.CombinedOutput(); err != nil {
			jpegData.err = fmt.Errorf("gendata: %w\n%s", err, out)
			return
		}
		if out, err := exec.Command(aifsBin, "pack", "--quiet", src, set).CombinedOutput(); err != nil {
			jpegData.err = fmt.Errorf("aifs pack: %w\n%s", err, out)
			return
		}
		jpegData.src, jpegData.set = src, set
	})
	if jpegData.err != nil {
		t.Fatalf("building the JPEG data set: %v", jpegData.err)
	}
	return jpegData.src, jpegData.set
}

// buildGendata builds integration/gendata into the work directory and returns its path.
func buildGendata() (string, error) {
	gendata := filepath.Join(workDir, "gendata")
	if out, err := exec.Command("go", "build", "-o", gendata, "github.com/aifs/aifs/integration/gendata").CombinedOutput(); err != nil {
		return "", fmt.Errorf("building gendata: %w\n%s", err, out)
	}
	return gendata, nil
}

// torchCheck runs torchcheck/check.py with args under /usr/bin/python3 and returns its stdout,
// failing the test with its output unless it exits 0.
func torchCheck(t testing.TB, args ...string) string {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("torchcheck", "check.py"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), pythonTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, torchPython, append([]string{script}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (timed out after %v)", err, pythonTimeout)
		}
		t.Fatalf("%s check.py %s: %v\nstdout:\n%s\nstderr:\n%s\n(the torch tests need %s with torch, "+
			"torchvision and PIL: apt-get install python3-torch python3-torchvision python3-pil)",
			torchPython, strings.Join(args, " "), err, clip(stdout.String()), clip(stderr.String()), torchPython)
	}
	return strings.TrimSpace(stdout.String())
}

// TestTorchImageFolder checks that torchvision's ImageFolder finds the same classes and samples
// on the mount as on the source tree.
func TestTorchImageFolder(t *testing.T) {
	src, set := jpegSet(t)
	mnt := mountSet(t, set)
	t.Log(torchCheck(t, "imagefolder", src, mnt))
}

// TestTorchDataLoader decodes every image through a shuffled two-worker DataLoader on both the
// source and the mount and checks that each sample's decoded tensor and label are the same.
func TestTorchDataLoader(t *testing.T) {
	src, set := jpegSet(t)
	mnt := mountSet(t, set)
	t.Log(torchCheck(t, "loader", src, mnt, "--workers", "2"))
}

// TestTorchPlanLoader runs the shuffled DataLoader of TestTorchDataLoader through the mount with
// python/aifs_plan.plan() wrapped around it: the decoded samples are the same as the source's,
// the daemon received the epoch's order as a plan, and read ahead from it, so that most samples
// were either in the kernel's page cache before they were opened (NOTIFY_STORE: no READ at all)
// or in aifs's memory when their READ came.
func TestTorchPlanLoader(t *testing.T) {
	src, set := jpegSet(t)
	mnt := mountSet(t, set)
	out := torchCheck(t, "loader", src, mnt, "--workers", "2", "--plan")
	t.Log(out)
	var res struct {
		Samples   int
		Cache     struct{ Hits, Misses int }
		Prefetch  struct{ Stored int }
		PageCache struct {
			ChunkSamples int `json:"chunk_samples"`
		} `json:"page_cache"`
		Plans []struct{ Writer, Samples, Read int }
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("check.py output: %v", err)
	}
	// The plan's cursor moves with the READs of the samples not stored (one in 8 or more), so
	// it ends within the last few samples.
	if len(res.Plans) != 1 || res.Plans[0].Samples != jpegFiles || res.Plans[0].Read < jpegFiles-16 {
		t.Errorf("plans %+v, want one plan of %d samples, read to its end", res.Plans, jpegFiles)
	}
	// A miss before the plan arrives reads its chunk (chunk_reads), whose samples reach the page
	// cache ahead of their readers just as the plan's do.
	if ahead := res.Cache.Hits + res.Prefetch.Stored + res.PageCache.ChunkSamples; ahead < jpegFiles*8/10 {
		t.Errorf("%d of %d samples were read ahead (%d stored in the page cache by the plan, %d by chunk reads, %d in memory; %d misses), want at least 80%%",
			ahead, jpegFiles, res.Prefetch.Stored, res.PageCache.ChunkSamples, res.Cache.Hits, res.Cache.Misses)
	}
	if res.Prefetch.Stored == 0 {
		t.Error("no sample was stored in the kernel's page cache ahead of its reader")
	}
}

// requestCount is the output of check.py requests.
type requestCount struct {
	Samples     int            `json:"samples"`
	Requests    int            `json:"requests"`
	PerOp       map[string]int `json:"per_op"`
	KernelCache string         `json:"kernel_cache"`
}

// statsAllowance is the number of requests in the delta that are not the samples'. Reading the
// stats file costs requests of its own after the "before" snapshot is taken: two LOOKUPs (the
// stats entry is never cached), and for the first read, before the mount is in no-open mode,
// OPEN (control files are opened with FOPEN_DIRECT_IO), the TCGETS ioctl, two READs (the data,
// then EOF), FLUSH (answered ENOSYS once) and RELEASE. The first sample's OPEN, answered ENOSYS
// to enter no-open mode, adds one more. That measured 9 with kernel_cache=on and 8 with off;
// the allowance is 10. FORGETs are not counted at all (see countRequests).
const statsAllowance = 10

// countRequests mounts set with the mount args, decodes the first n samples with PIL and returns
// the FUSE requests that took. FORGET is left out of Requests: the kernel sends it, with no
// reply, whenever it gets round to dropping an inode (here the stats file's superseded
// snapshots), so how many fall inside the window varies from run to run.
func countRequests(t *testing.T, set string, n int, args ...string) requestCount {
	t.Helper()
	mnt := mountSet(t, set, args...)
	out := torchCheck(t, "requests", mnt, "--limit", strconv.Itoa(n))
	var rc requestCount
	if err := json.Unmarshal([]byte(out), &rc); err != nil {
		t.Fatalf("check.py requests: %v\n%s", err, out)
	}
	if rc.Samples != n {
		t.Fatalf("check.py requests decoded %d samples, want %d", rc.Samples, n)
	}
	rc.Requests -= rc.PerOp["forget"]
	t.Logf("kernel_cache=%s: %d requests (FORGET left out) for %d samples (%.2f per sample, %.2f less the allowance): %v",
		rc.KernelCache, rc.Requests, n, float64(rc.Requests)/float64(n), float64(rc.Requests-statsAllowance)/float64(n), rc.PerOp)
	return rc
}

// TestRequestsPerSample counts the FUSE requests that opening and decoding a sample with PIL
// costs after a directory walk: with the kernel cache on, at most two (the TCGETS ioctl Python
// sends on open, and one READ; the walk's READDIRPLUS already gave the kernel every entry and
// no-open mode drops OPEN, FLUSH and RELEASE). With kernel_cache=off each open also costs OPEN
// and RELEASE, and direct I/O turns every read(2) into a READ, so the count must be higher:
// that shows the bound can fail.
func TestRequestsPerSample(t *testing.T) {
	_, set := jpegSet(t)
	const n = 300

	on := countRequests(t, set, n)
	if on.KernelCache != "on" {
		t.Errorf("the default mount of a small set has kernel_cache=%q, want on", on.KernelCache)
	}
	if on.Requests > 2*n+statsAllowance {
		t.Errorf("kernel_cache=on: %d requests for %d samples, want at most %d (2 per sample + %d): %v",
			on.Requests, n, 2*n+statsAllowance, statsAllowance, on.PerOp)
	}
	if reads := on.PerOp["read"]; reads > n+5 {
		t.Errorf("kernel_cache=on: %d READs for %d samples, want at most %d (one per sample)", reads, n, n+5)
	}

	off := countRequests(t, set, n, "-o", "kernel_cache=off")
	if off.KernelCache != "off" {
		t.Errorf("kernel_cache=off mount reports kernel_cache=%q", off.KernelCache)
	}
	if off.Requests <= 2*n+statsAllowance {
		t.Errorf("kernel_cache=off: %d requests for %d samples, want more than %d: OPEN and RELEASE should reach aifs: %v",
			off.Requests, n, 2*n+statsAllowance, off.PerOp)
	}
	if off.PerOp["open"] < n || off.PerOp["release"] < n {
		t.Errorf("kernel_cache=off: %d OPENs and %d RELEASEs for %d samples, want at least one each per sample",
			off.PerOp["open"], off.PerOp["release"], n)
	}
}
