package fs

import (
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/aifs/aifs/backend/faulty"
	"github.com/aifs/aifs/backend/memory"
)

// TestStallMatchesInjectedLatency: a reader whose every backend read takes a known extra time
// (backend/faulty) finds the stats file's stall figure within 10% of what that latency implies:
// the backend reads it waited for (misses not sharing a fetch) times the delay. The reader
// pauses between files so that reads ahead complete and never half-overlap a READ.
func TestStallMatchesInjectedLatency(t *testing.T) {
	s := packTree(t, writeSourceTree)
	fb := faulty.New(memory.New(s.shards))
	f := s.serve(t, fb, Options{Logger: zap.NewNop()})
	// The delay is long against the CPU each request costs (under -race, on a loaded 2-core
	// machine, some milliseconds), which the stall figure rightly includes.
	const delay = 200 * time.Millisecond
	fb.Set(faulty.Rule{Op: faulty.Read, Delay: delay})
	before := f.stats.Snapshot()
	for _, p := range s.paths {
		if s.want[p].isDir() {
			continue
		}
		time.Sleep(delay + 10*time.Millisecond) // reads ahead land first: each miss then waits for its own fetch
		lookupPath(t, f, p)
		if _, st := readFile(t, f, s.inoOf(t, p), 0, 1<<20); st != 0 {
			t.Fatalf("read %s: %v", p, st)
		}
	}
	after := f.stats.Snapshot()
	// misses that waited for a fetch of their own: the reads the reader waited for
	reads := (after.Cache.Misses - after.Cache.Shared) - (before.Cache.Misses - before.Cache.Shared)
	if reads < 1 {
		t.Fatalf("%d backend reads, want some", reads)
	}
	blocked := after.Stall.BlockedSeconds - before.Stall.BlockedSeconds
	implied := float64(reads) * delay.Seconds()
	t.Logf("%d foreground backend reads of +%v: implied %.3fs, blocked %.3fs", reads, delay, implied, blocked)
	if blocked < implied || blocked > 1.1*implied { // never less than the readers waited
		t.Errorf("blocked %.3fs, want within 10%% of the injected %.3fs", blocked, implied)
	}
}
