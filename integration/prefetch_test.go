//go:build integration

package integration

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aifs/aifs/layout"
	aifsplan "github.com/aifs/aifs/plan"
)

// datasetBytes returns the bytes of sample data in the shard set at set.
func datasetBytes(t testing.TB, set string) int64 {
	var n int64
	for _, s := range loadSet(t, set).Shards() {
		n += int64(s.Size)
	}
	return n
}

// TestPrefetchNextEpochHitRate mounts with kernel_cache=off (aifs's memory cache is the only
// one) and a cache of a fraction c of the dataset, reads two shuffled epochs with aifs bench,
// and checks through the stats file that the second hits at least 0.9·c of its reads, where
// LRU would hit about c²/2.
func TestPrefetchNextEpochHitRate(t *testing.T) {
	_, set := jpegSet(t)
	total := datasetBytes(t, set)
	for _, c := range []float64{0.25, 0.5, 1.0} {
		t.Run(fmt.Sprint(c), func(t *testing.T) {
			size := int64(c * float64(total))
			mnt := mountSet(t, set, "-o", "kernel_cache=off,mem_cache="+strconv.FormatInt(size, 10))
			mustAifs(t, "bench", "--seed", "1", "-j", "4", mnt)
			before := readStats(t, mnt)
			mustAifs(t, "bench", "--seed", "2", "-j", "4", mnt)
			after := readStats(t, mnt)
			hits := after.Cache.Hits - before.Cache.Hits
			misses := after.Cache.Misses - before.Cache.Misses
			rate := float64(hits) / float64(hits+misses)
			t.Logf("c=%.2f: next-epoch hit rate %.3f (LRU expectation %.3f); %d bytes kept of a %d-byte budget, epoch %d",
				c, rate, c*c/2, after.Cache.KeptBytes, size, after.Epoch.Number)
			if hits+misses != jpegFiles {
				t.Errorf("%d sample reads in the second epoch, want %d", hits+misses, jpegFiles)
			}
			if rate < 0.9*c {
				t.Errorf("c=%.2f: hit rate %.3f, want at least %.3f", c, rate, 0.9*c)
			}
			if after.Epoch.Number != 2 {
				t.Errorf("stats say epoch %d after two epochs", after.Epoch.Number)
			}
			if held := after.Cache.KeptBytes + after.Prefetch.HeldBytes; held > size {
				t.Errorf("%d bytes held, over the %d-byte budget", held, size)
			}
		})
	}
}

// TestPrefetchBudget64Readers writes a plan and reads it with 64 parallel readers through a
// mount with a small budget: the bytes held (sampled from the stats file throughout) never
// exceed the budget, the daemon's RSS stays bounded, and every sample is right.
func TestPrefetchBudget64Readers(t *testing.T) {
	src, set := jpegSet(t)
	const budget = 2 << 20
	mnt := mountSet(t, set, "-o", "kernel_cache=off,mem_cache="+strconv.Itoa(budget))
	pid := daemonPID(t, mnt)
	x := loadSet(t, set)
	var plan bytes.Buffer
	plan.WriteString("aifs-plan 1 paths\n")
	var paths []string
	for id := range x.Len() {
		if e := x.Entry(layout.ID(id)); !e.IsDir() {
			p := x.Path(layout.ID(id))
			paths = append(paths, p)
			plan.WriteString(p + "\n")
		}
	}
	rss0 := rssKiB(t, pid)

	var over atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan int)
	go func() {
		n := 0
		defer func() { sampled <- n }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			st := readStats(t, mnt)
			n++
			if held := st.Cache.KeptBytes + st.Prefetch.HeldBytes; held > budget {
				over.Store(held)
			}
		}
	}()
	// Four epochs, each after writing the plan, so that the sampler sees the budget under load
	// many times.
	for range 4 {
		if err := aifsplan.Send(mnt, bytes.NewReader(plan.Bytes())); err != nil {
			t.Fatalf("sending the plan: %v", err)
		}
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1) - 1)
					if i >= len(paths) {
						return
					}
					got, err := os.ReadFile(filepath.Join(mnt, paths[i]))
					want, werr := os.ReadFile(filepath.Join(src, paths[i]))
					if err != nil || werr != nil || !bytes.Equal(got, want) {
						t.Errorf("%s: read %v, source %v, equal %v", paths[i], err, werr, bytes.Equal(got, want))
					}
				}
			}()
		}
		wg.Wait()
	}
	close(stop)
	n := <-sampled
	st := readStats(t, mnt)
	rss1 := rssKiB(t, pid)
	t.Logf("%d stats samples; cache %+v; prefetch %+v; RSS %d -> %d KiB", n, st.Cache, st.Prefetch, rss0, rss1)
	if o := over.Load(); o > 0 {
		t.Errorf("%d bytes held at one point, over the %d-byte budget", o, budget)
	}
	// A writer is a thread, and Go may write each epoch's plan from another one.
	for _, p := range st.Plans {
		if p.Samples != len(paths) || p.Read != len(paths) {
			t.Errorf("plan %+v, want %d samples, all read", p, len(paths))
		}
	}
	if len(st.Plans) == 0 {
		t.Error("no plan in the stats")
	}
	// 64 readers each hold one sample while it is written to the kernel, and buffers are
	// pooled: RSS may grow by the budget and the pools, not by the data read (24 MB).
	if grow := rss1 - rss0; grow > 16<<10 {
		t.Errorf("daemon RSS grew by %d KiB reading the dataset with a %d-byte budget", grow, budget)
	}
}

// rssKiB returns the resident set size of process pid.
func rssKiB(t testing.TB, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// TestPlanFileErrors checks the plan file's answers through a mount: a plan sent by ioctl
// (plan.Send) is taken, garbage gets EINVAL, writing the file is EROFS, a mount with
// -o plans=off refuses plans with EPERM, and the file is never listed and reads as empty.
func TestPlanFileErrors(t *testing.T) {
	src, set := jpegSet(t)
	mnt := mountSet(t, set)
	plan := filepath.Join(mnt, ".aifs", "plan")
	for name, content := range map[string]string{
		"no header": "x\n",
		"unknown":   "aifs-plan 1 paths\nno/such/file\n",
		"bad index": "aifs-plan 1 indices\n99999999\n",
	} {
		if err := aifsplan.Send(mnt, strings.NewReader(content)); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("%s: %v, want EINVAL", name, err)
		}
	}
	// A plan of more than one ioctl's worth: every path twice (a plan may repeat samples).
	big := "aifs-plan 1 paths\n"
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			big += strings.TrimPrefix(p, src+"/") + "\n"
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if big += big[len("aifs-plan 1 paths\n"):]; len(big) <= aifsplan.PieceBytes {
		t.Fatalf("the plan has %d bytes, want more than one piece", len(big))
	}
	if err := aifsplan.Send(mnt, strings.NewReader(big)); err != nil {
		t.Errorf("a valid plan: %v", err)
	}
	if err := os.WriteFile(plan, []byte("aifs-plan 1 indices\n0\n"), 0); !errors.Is(err, syscall.EROFS) {
		t.Errorf("writing the plan file: %v, want EROFS (plans come by ioctl)", err)
	}
	st := readStats(t, mnt)
	if want := strings.Count(big, "\n") - 1; st.Prefetch.PlanErrors != 3 || len(st.Plans) != 1 || st.Plans[0].Samples != want {
		t.Errorf("after 3 bad plans and 1 of %d samples: plan errors %d, plans %+v", want, st.Prefetch.PlanErrors, st.Plans)
	}
	if got, err := os.ReadFile(plan); err != nil || len(got) != 0 {
		t.Errorf("reading the plan file: %q, %v; want it empty", got, err)
	}
	for _, n := range names(t, mnt) {
		if n == ".aifs" {
			t.Error(".aifs is listed in the mount root")
		}
	}
	off := mountSet(t, set, "-o", "plans=off")
	if err := aifsplan.Send(off, strings.NewReader("aifs-plan 1 indices\n0\n")); !errors.Is(err, syscall.EPERM) {
		t.Errorf("plans=off: %v, want EPERM", err)
	}
}
