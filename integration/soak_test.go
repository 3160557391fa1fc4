//go:build integration

package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestSoak reads a mounted set hard for several epochs: 64 readers, each epoch a random half of
// the files in a random order, and one more reading files of 2 to 40 MiB in pack order (as
// md5sum of a tree does: those over 16 MiB are read range by range), while 4 goroutines stat
// and list the tree without pause and reads by other processes are killed mid-read (a signal
// interrupts their FUSE request). Every read must return the source's bytes; the daemon's live
// Go heap must return after each epoch to within a few MB of its level after the first, no
// goroutine may outlive the requests, and its open file descriptors must not grow. The figures are logged (and quoted in
// docs/reliability.md). scripts/test.sh runs it twice, the second time with GOMAXPROCS=1 in the
// daemon too.
func TestSoak(t *testing.T) {
	const (
		files   = 3000
		readers = 64
		epochs  = 7
	)
	src := t.TempDir()
	sums := map[string]uint32{}
	for i := range files {
		rel := fmt.Sprintf("class-%02d/img-%05d.bin", i%40, i)
		data := randomBytes(uint64(i)+7000, 1000+(i*7919)%60000)
		writeFile(t, filepath.Join(src, rel), data)
		sums[rel] = crc32.ChecksumIEEE(data)
	}
	big := randomBytes(99, 24<<20) // for the interrupted reads: long enough to be caught mid-read
	writeFile(t, filepath.Join(src, "big", "blob.bin"), big)
	var sized []string // every size class of the read path: pooled buffers, whole, range by range
	for i, n := range []int{2 << 20, 5 << 20, 12 << 20, 20 << 20, 40 << 20} {
		rel := fmt.Sprintf("sizes/%d-%dMiB.bin", i, n>>20)
		data := randomBytes(uint64(i)+500, n)
		writeFile(t, filepath.Join(src, rel), data)
		sums[rel] = crc32.ChecksumIEEE(data)
		sized = append(sized, rel)
	}
	set := filepath.Join(t.TempDir(), "set")
	mustAifs(t, "pack", "--quiet", "--shard-size", "16M", src, set)
	// A small memory budget, and no kernel page cache: every read reaches the daemon. GOGC=20
	// keeps the daemon's heap near what is live (by default Go lets it reach twice that before
	// collecting, so RSS climbs for ten epochs before it levels off, leak or not: 27 -> 53 MB,
	// measured); with it RSS levels off by the fifth epoch (26 -> 35 MB, flat through 30).
	t.Setenv("GOGC", "20")
	mnt := mountSet(t, set, "-o", "mem_cache=8M,kernel_cache=off")
	pid := daemonPID(t, mnt)
	rels := make([]string, 0, files)
	for rel := range sums {
		if !strings.HasPrefix(rel, "sizes/") {
			rels = append(rels, rel)
		}
	}

	var reads, bytesRead atomic.Int64
	check := func(e int, rel string) bool {
		b, err := os.ReadFile(filepath.Join(mnt, rel))
		if err != nil || crc32.ChecksumIEEE(b) != sums[rel] {
			t.Errorf("epoch %d: %s: %v, or wrong bytes", e, rel, err)
			return false
		}
		reads.Add(1)
		bytesRead.Add(int64(len(b)))
		return true
	}
	epoch := func(e int) {
		order := rand.New(rand.NewPCG(uint64(e), 1)).Perm(len(rels))[:len(rels)/2]
		var next atomic.Int64
		var wg sync.WaitGroup
		wg.Go(func() {
			for _, rel := range sized {
				if !check(e, rel) {
					return
				}
			}
		})
		for range readers {
			wg.Go(func() {
				for k := next.Add(1) - 1; k < int64(len(order)); k = next.Add(1) - 1 {
					if !check(e, rels[order[k]]) {
						return
					}
				}
			})
		}
		wg.Wait()
	}

	// The storms and the interruptions run through every epoch but the first.
	ctx, stop := context.WithCancel(t.Context())
	var bg sync.WaitGroup
	var stats, lists, killed atomic.Int64
	for g := range 4 {
		bg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 2))
			for ctx.Err() == nil {
				if g%2 == 0 {
					if _, err := os.Stat(filepath.Join(mnt, rels[rng.IntN(len(rels))])); err != nil {
						t.Errorf("stat storm: %v", err)
						return
					}
					stats.Add(1)
				} else {
					if _, err := os.ReadDir(filepath.Join(mnt, fmt.Sprintf("class-%02d", rng.IntN(40)))); err != nil {
						t.Errorf("readdir storm: %v", err)
						return
					}
					lists.Add(1)
				}
			}
		})
	}
	bg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			cmd := exec.Command("dd", "if="+filepath.Join(mnt, "big", "blob.bin"), "of=/dev/null", "bs=64k", "iflag=direct")
			if err := cmd.Start(); err != nil {
				t.Errorf("dd: %v", err)
				return
			}
			time.Sleep(time.Duration(1+i%7) * time.Millisecond)
			cmd.Process.Signal([]os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGKILL}[i%3])
			cmd.Wait()
			killed.Add(1)
		}
	})

	// The first two epochs warm the pools and the heap up; RSS is measured from there. The
	// settled live heap (less the samples kept) after each epoch is compared with its level after
	// the first two.
	epoch(0)
	heap0 := settledHeap(t, mnt)
	epoch(1)
	rss0, fds0, d0 := rssKiB(t, pid), openFDs(t, pid), readStats(t, mnt).Daemon
	heap1 := settledHeap(t, mnt)
	peak, heapMax, heapEnd := rss0, heap1, heap1
	for e := 2; e < epochs; e++ {
		epoch(e)
		peak = max(peak, rssKiB(t, pid))
		heapEnd = settledHeap(t, mnt)
		heapMax = max(heapMax, heapEnd)
	}
	d1 := readStats(t, mnt).Daemon // with the storms still running, as d0
	stop()
	bg.Wait()
	rss1, fds1 := rssKiB(t, pid), openFDs(t, pid)
	// The goroutines of a burst of requests end as their requests do; give the last ones (and
	// the kernel's queued FORGETs) up to 5 seconds.
	idle := readStats(t, mnt).Daemon.Goroutines
	for start := time.Now(); idle > 200 && time.Since(start) < 5*time.Second; idle = readStats(t, mnt).Daemon.Goroutines {
		time.Sleep(50 * time.Millisecond)
	}
	if b, err := os.ReadFile(filepath.Join(mnt, "big", "blob.bin")); err != nil || !bytes.Equal(b, big) {
		t.Errorf("reading the file of the interrupted reads whole after them: %v, or wrong bytes", err)
	}
	t.Logf("GOMAXPROCS=%q: %d epochs, %d reads verified (%d MB), %d stats, %d listings, %d reads killed; daemon RSS %d KiB after the second epoch, %d at the end (peak %d); settled live Go heap less kept %d KiB after the first epoch, %d after the second, at most %d after a later one and %d after the last; %d collections; goroutines %d -> %d, %d idle; fds %d -> %d",
		os.Getenv("GOMAXPROCS"), epochs, reads.Load(), bytesRead.Load()>>20, stats.Load(), lists.Load(), killed.Load(), rss0, rss1, peak,
		heap0>>10, heap1>>10, heapMax>>10, heapEnd>>10, d1.GCCycles-d0.GCCycles, d0.Goroutines, d1.Goroutines, idle, fds0, fds1)
	if killed.Load() < 5 || stats.Load() == 0 || lists.Load() == 0 {
		t.Errorf("the storms ran %d stats and %d listings and %d killed reads; want some of each", stats.Load(), lists.Load(), killed.Load())
	}
	if d0.HeapLiveBytes == 0 || d1.GCCycles <= d0.GCCycles || idle == 0 {
		t.Errorf("the stats file reports a live heap of %d bytes, %d -> %d collections and %d goroutines: not read", d0.HeapLiveBytes, d0.GCCycles, d1.GCCycles, idle)
	}
	// Buffers and caches are pooled and bounded (mem_cache=8M): what the later epochs read must
	// not accumulate. The settled live Go heap is the measure. Not the heap as of whatever
	// collection came last: that may have run mid-epoch, and read 9-38 MB after an epoch in four
	// runs under GOMAXPROCS=1 (2026-11-28; CI failed on a difference of 14 MB between two such
	// readings). Not RSS either: it also holds the stacks of bursts of goroutines, one per request
	// in flight (2,450 at once seen under GOMAXPROCS=1), which stay mapped after the burst, and it
	// jumped by 22 MB in one run of four; its bound is only for a leak outside the heap, which
	// aifs does not allocate.
	if grow := int64(heapEnd) - int64(heap1); grow > 12<<20 {
		t.Errorf("the daemon's settled live Go heap less the samples kept grew by %d KiB from the second epoch to the last", grow>>10)
	}
	// Files over 16 MiB are read range by range and never whole (issue 28: read ahead whole,
	// they left hundreds of MB live after md5sum of a tree): the heap after every epoch that read
	// them stays near its level after the first. Settled after two collections, it read 4.6-7.1
	// MB after every epoch of six runs (2026-11-28: four under GOMAXPROCS=1, one with the race
	// detector, one plain), at most 1.4 MiB above the first epoch's. Settled by time alone (2 s),
	// it had been up to 14.2 MiB above with the race detector; the bounds kept their margin from
	// then. 32 MiB still catches the regression, which was hundreds of MB.
	if grow := int64(heapMax) - int64(heap0); grow > 32<<20 {
		t.Errorf("the daemon's settled live Go heap less the samples kept was %d KiB after the first epoch and up to %d KiB after a later one", heap0>>10, heapMax>>10)
	}
	if idle > 200 { // 35-40 measured: the fixed ones (loader workers, go-fuse readers, ristretto)
		t.Errorf("%d goroutines in the idle daemon after the soak: some are left over from requests", idle)
	}
	if grow := rss1 - rss0; grow > 64<<10 {
		t.Errorf("daemon RSS grew by %d KiB over %d epochs", grow, epochs-2)
	}
	if fds1 > fds0+4 {
		t.Errorf("daemon open file descriptors went from %d to %d", fds0, fds1)
	}
}

// settledHeap returns the daemon's live Go heap, less the samples its cache keeps (which grow
// to mem_cache over the first epochs), once the reads of an epoch are done: the least reading,
// 100 ms apart, until two collections have ended since the first reading (or 20 s have passed).
// Each reading is as of the last collection, which may have run mid-epoch; the buffers of the
// epoch's reads (pooled, and whole samples) are garbage by the first collection after it, and
// sync.Pool's by the second. The stat and list storms make the garbage that brings them (0.5-1
// s apart, measured). Settled by time alone (2 s), the heap read 35 MB in one run where it was 5
// at the other epochs' ends.
func settledHeap(t testing.TB, mnt string) uint64 {
	least := uint64(1<<63 - 1)
	var since uint64 // the collections at the first reading
	for i, start := 0, time.Now(); time.Since(start) < 20*time.Second; i++ {
		if i > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		s := readStats(t, mnt)
		least = min(least, s.Daemon.HeapLiveBytes-uint64(s.Cache.KeptBytes))
		if i == 0 {
			since = s.Daemon.GCCycles
		} else if s.Daemon.GCCycles >= since+2 {
			return least
		}
	}
	t.Logf("two collections did not come in 20 s after an epoch; the live heap is as of an earlier one")
	return least
}

// openFDs counts the open file descriptors of process pid.
func openFDs(t testing.TB, pid int) int {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return len(ents)
}
