//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	aifsfs "github.com/aifs/aifs/fs"
)

// The page cache's policy (-o page_cache, prefetch.Residency) on a live mount: the stable
// subset stays in the page cache across epochs, the other samples are dropped after their
// read, and in a memory cgroup the daemon and its readers never get OOM-killed.

// benchEpoch reads every file of dir once with `aifs bench` (jobs readers, shuffled by seed),
// run by wrap (nil: directly), and returns the digest of what it read.
func benchEpoch(t testing.TB, wrap []string, dir string, seed, jobs int) string {
	t.Helper()
	args := append(wrap, aifsBin, "bench", "--json", "--seed", strconv.Itoa(seed), "-j", strconv.Itoa(jobs), dir)
	out, err := exec.Command(args[0], args[1:]...).Output()
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(args, " "), err)
	}
	var r struct {
		Passes []struct {
			Digest string `json:"digest"`
		} `json:"passes"`
	}
	if err := json.Unmarshal(out, &r); err != nil || len(r.Passes) != 1 {
		t.Fatalf("aifs bench --json: %v\n%s", err, out)
	}
	return r.Passes[0].Digest
}

// subsetEpochs reads epochs shuffled epochs of mnt (readers run by wrap) and checks that each
// serves the source's bytes (digest want) and, if subset, that from the second epoch on the
// samples of the subset no longer reach aifs: an epoch's READs are at most the files outside
// the subset and a fifth of those inside it (the kernel may drop some itself). It returns the
// last stats.
func subsetEpochs(t *testing.T, wrap []string, mnt, want string, epochs, jobs int, subset bool) aifsfs.Snapshot {
	t.Helper()
	var st aifsfs.Snapshot
	var reads uint64
	for e := 1; e <= epochs; e++ {
		if got := benchEpoch(t, wrap, mnt, e, jobs); got != want {
			t.Fatalf("epoch %d: digest %s, the source's is %s", e, got, want)
		}
		st = readStats(t, mnt)
		pc := st.PageCache
		if pc == nil {
			t.Fatalf("no page_cache in the stats")
		}
		n := st.Ops["read"].Count - reads
		reads = st.Ops["read"].Count
		t.Logf("epoch %d: %d READs for %d files; budget %d (%s), subset %.3f, resident %d, drops %d, refused %d, kernel dropped %d; previous epoch found %d in the page cache",
			e, n, st.Files, pc.BudgetBytes, pc.Source, pc.SubsetFraction, pc.ResidentBytes, pc.Drops, pc.PushesRefused, pc.KernelEvicted, st.Epoch.PreviousUnseen)
		if subset && st.Epoch.Number != e {
			t.Errorf("epoch %d: the stats say epoch %d", e, st.Epoch.Number)
		}
		if limit := (1 - 0.8*pc.SubsetFraction) * float64(st.Files); subset && e >= 2 && float64(n) > limit {
			t.Errorf("epoch %d: %d READs, want at most %.0f: the subset (%.3f of the files) should stay in the page cache", e, n, limit, pc.SubsetFraction)
		}
	}
	// Between two ticks (10 ms) the reads since the last take the estimate past the budget; the
	// next tick drops them.
	time.Sleep(100 * time.Millisecond)
	st = readStats(t, mnt)
	if pc := st.PageCache; subset && (pc.Fits || pc.Drops == 0 || pc.SubsetFraction < 0.1 || pc.ResidentBytes > pc.BudgetBytes) {
		t.Errorf("page cache stats %+v: want a subset of the set, drops, and no more resident than the budget", *pc)
	}
	return st
}

// TestPageCacheFixedBudget mounts with page_cache at half the set: from the second epoch on,
// the subset's samples never reach aifs, the others do, and every epoch reads the right bytes.
func TestPageCacheFixedBudget(t *testing.T) {
	src, set := jpegSet(t)
	want := benchEpoch(t, nil, src, 1, 4)
	budget := datasetBytes(t, set) / 2
	mnt := mountSet(t, set, "-o", "page_cache="+strconv.FormatInt(budget, 10))
	st := subsetEpochs(t, nil, mnt, want, 4, 4, true)
	if pc := st.PageCache; pc.BudgetBytes != budget || !strings.HasPrefix(pc.Source, "page_cache=") {
		t.Errorf("budget %d from %q, want %d from page_cache=", pc.BudgetBytes, pc.Source, budget)
	}
}

// The large set for the memory cgroup test: 10,000 files of ~110 KB (1.1 GB, the harness's
// size), so that a quarter of it leaves room for 64 readers and the daemon besides the page
// cache. Built once.
var largeData struct {
	once     sync.Once
	src, set string
	err      error
}

func largeSet(t testing.TB) (src, set string) {
	t.Helper()
	largeData.once.Do(func() {
		src, set := filepath.Join(workDir, "large-source"), filepath.Join(workDir, "large-set")
		gen := exec.Command("go", "run", "github.com/aifs/aifs/integration/gendata", "--files", "10000", "--classes", "100", "--seed", "11", src)
		if out, err := gen.CombinedOutput(); err != nil {
			largeData.err = fmt.Errorf("gendata: %w\n%s", err, out)
			return
		}
		if out, err := exec.Command(aifsBin, "pack", "--quiet", src, set).CombinedOutput(); err != nil {
			largeData.err = fmt.Errorf("pack: %w\n%s", err, out)
			return
		}
		largeData.src, largeData.set = src, set
	})
	if largeData.err != nil {
		t.Fatal(largeData.err)
	}
	return largeData.src, largeData.set
}

// memoryCgroup makes a memory cgroup (v2 if mounted, else v1) limited to limit bytes and
// returns its directory; it is removed at cleanup, after the cleanups registered later (the
// unmount) have ended the processes in it.
func memoryCgroup(t *testing.T, limit int64) string {
	t.Helper()
	root, file := "/sys/fs/cgroup/memory", "memory.limit_in_bytes"
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		root, file = "/sys/fs/cgroup", "memory.max"
	}
	dir, err := os.MkdirTemp(root, "aifs-test-")
	if err != nil {
		t.Fatalf("a memory cgroup: %v", err)
	}
	t.Cleanup(func() {
		// A process that has exited may hold the cgroup a moment longer, until its parent
		// (init, for the daemon) reaps it: EBUSY then, for a few milliseconds.
		err := syscall.Rmdir(dir)
		for end := time.Now().Add(10 * time.Second); err == syscall.EBUSY && time.Now().Before(end); err = syscall.Rmdir(dir) {
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			t.Errorf("removing cgroup %s: %v", dir, err)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, file), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		t.Fatalf("limiting cgroup %s: %v", dir, err)
	}
	return dir
}

// oomKills returns the OOM kills in cgroup dir (v1 memory.oom_control, v2 memory.events).
func oomKills(t *testing.T, dir string) int {
	t.Helper()
	for _, f := range []string{"memory.events", "memory.oom_control"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, " "); ok && k == "oom_kill" {
				n, _ := strconv.Atoi(v)
				return n
			}
		}
	}
	t.Fatalf("no oom_kill count in cgroup %s", dir)
	return 0
}

// cgroupEpochs mounts the large set in a memory cgroup of 1/part of it, with the defaults, and
// reads four shuffled epochs with jobs readers in the same cgroup (subsetEpochs, which checks
// the bytes and, if subset, the subset); nothing in the cgroup may be OOM-killed. It returns the
// last stats and the mountpoint; the mount is undone at cleanup.
func cgroupEpochs(t *testing.T, part int64, jobs int, subset bool) (aifsfs.Snapshot, string) {
	t.Helper()
	src, set := largeSet(t)
	want := benchEpoch(t, nil, src, 1, 8)
	limit := datasetBytes(t, set) / part
	cg := memoryCgroup(t, limit)
	wrap := []string{"sh", "-c", `echo $$ >"$0/cgroup.procs" && exec "$@"`, cg}
	mnt := filepath.Join(t.TempDir(), "mnt")
	mkdir(t, mnt)
	if out, err := exec.Command(wrap[0], append(wrap[1:], aifsBin, "mount", set, mnt)...).CombinedOutput(); err != nil {
		t.Fatalf("aifs mount in the cgroup: %v\n%s", err, out)
	}
	pid := daemonPID(t, mnt)
	t.Cleanup(func() { unmount(t, mnt, pid) })
	st := subsetEpochs(t, wrap, mnt, want, 4, jobs, subset)
	if n := oomKills(t, cg); n != 0 {
		t.Errorf("%d OOM kills in the cgroup of %d bytes", n, limit)
	}
	t.Logf("daemon RSS %d KiB in a cgroup of %d MiB", rssKiB(t, pid), limit>>20)
	return st, mnt
}

// TestPageCacheMemoryCgroup mounts in a memory cgroup of half the set, with the default
// page_cache=auto, and reads four shuffled epochs with 8 readers in the same cgroup: the budget
// comes from the cgroup, every epoch reads the right bytes, the subset stays in the page cache
// from the second epoch on, and nothing in the cgroup is OOM-killed.
func TestPageCacheMemoryCgroup(t *testing.T) {
	st, _ := cgroupEpochs(t, 2, 8, true)
	if !strings.Contains(st.PageCache.Source, "memory cgroup") {
		t.Errorf("the budget came from %q, not the memory cgroup", st.PageCache.Source)
	}
}

// TestPageCache64Readers: 64 readers and the daemon in a memory cgroup of a quarter of the set
// read four shuffled epochs, each of the right bytes, and nothing is OOM-killed.
func TestPageCache64Readers(t *testing.T) {
	cgroupEpochs(t, 4, 64, false)
}
