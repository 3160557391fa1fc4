package fs

import (
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/aifs/aifs/backend/faulty"
	"github.com/aifs/aifs/backend/memory"
)

// TestStallMatchesInjectedLatency: a reader whose every backend read takes a known extra time
// (backend/faulty) finds the stats file's stall figure, over the requests of the files whose
// READ waited for a fetch, at least what that latency implies (the backend reads it waited for,
// misses not sharing a fetch, times the delay) and well under twice it. The reader pauses between files so that
// reads ahead complete and never half-overlap a READ.
func TestStallMatchesInjectedLatency(t *testing.T) {
	s := packTree(t, writeSourceTree)
	fb := faulty.New(memory.New(s.shards))
	f := s.serve(t, fb, Options{Logger: zap.NewNop()})
	// The delay is long against the CPU each request costs (under -race, on a loaded 2-core
	// machine, some milliseconds), which the stall figure rightly includes.
	const delay = 200 * time.Millisecond
	fb.Set(faulty.Rule{Op: faulty.Read, Delay: delay})
	// Each file's requests are timed apart: those of a file whose READ waited for a fetch of its
	// own (a miss not sharing one) must add up to the fetches' delay at least; the others (hits,
	// lookups) cost the CPU they take, which the figure rightly counts but no delay implies.
	var reads uint64
	var implied, blocked, total float64
	for _, p := range s.paths {
		if s.want[p].isDir() {
			continue
		}
		time.Sleep(2 * delay) // reads ahead land first: each miss then waits for its own fetch
		b := f.stats.Snapshot()
		lookupPath(t, f, p)
		if _, st := readFile(t, f, s.inoOf(t, p), 0, 1<<20); st != 0 {
			t.Fatalf("read %s: %v", p, st)
		}
		a := f.stats.Snapshot()
		own := (a.Cache.Misses - a.Cache.Shared) - (b.Cache.Misses - b.Cache.Shared)
		d := a.Stall.BlockedSeconds - b.Stall.BlockedSeconds
		total += d
		if own > 0 && a.Cache.Shared == b.Cache.Shared {
			reads += own
			implied += float64(own) * delay.Seconds()
			blocked += d
		}
	}
	if reads < 1 {
		t.Fatalf("%d backend reads, want some", reads)
	}
	t.Logf("%d foreground backend reads of +%v: implied %.3fs, blocked %.3fs in their files' requests, %.3fs in all", reads, delay, implied, blocked, total)
	// Never less than the readers waited; more by what the requests' CPU and their wakeups take on
	// a loaded machine (32 ms a read was seen in a full run), but far from twice the delay, what a
	// figure that counted a fetch's wait twice (its READ's and its own) would show.
	if blocked < implied || blocked > 1.5*implied {
		t.Errorf("blocked %.3fs in the requests of files that waited for a fetch, want from the injected %.3fs to 1.5 times it", blocked, implied)
	}
	if total < blocked {
		t.Errorf("blocked %.3fs in all, less than the %.3fs of some files", total, blocked)
	}
}
