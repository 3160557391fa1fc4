package prefetch

import (
	"sync"
	"sync/atomic"

	"github.com/aifs/aifs/layout"
)

// The planner's lock. The planner is told of every sample's first READ (observe), and the
// readers of many samples at once must not queue on its mutex: a reader that finds it taken
// (TryLock) leaves its sample in pendingReads, in a lock stripe, and goes on. Whoever holds the mutex tells the planner of the pending reads when it takes
// it (lockPlanner) and again after it lets go if readers came meanwhile (unlockPlanner): a
// reader checks the mutex after leaving its read, the holder checks the reads after letting
// go, so one of them always sees the other and no read waits past the next unlock.
//
// Measured with BenchmarkLoaderRead and its mutex profile (docs/bench/README.md, "Loader hot
// path"): readers queued 1.88 s on this mutex in one round when they all took it, 8.6 ms with
// the pending list; a miss went from 1.02-1.26 µs to 0.88-0.93 µs at 8 and 32 readers.

const (
	pendingStripes = 16
	pendingCap     = 32 // reads a stripe holds; a reader that finds it full takes the mutex
)

// pendingReads are first READs not yet told to the planner.
type pendingReads struct {
	n     atomic.Int32 // reads held in all stripes, changed under a stripe's lock
	parts [pendingStripes]struct {
		mu    sync.Mutex // guards reads, len
		reads [pendingCap]firstRead
		len   atomic.Int32 // written under mu; read without it to skip an empty stripe
		_     [52]byte
	}
}

// firstRead is a sample's first READ and the reader (pid) that sent it.
type firstRead struct {
	id     layout.ID
	reader uint32
}

// add leaves r for the planner, or reports that its stripe is full.
func (p *pendingReads) add(r firstRead) bool {
	s := &p.parts[r.id%pendingStripes]
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.len.Load()
	if n == pendingCap {
		return false
	}
	s.reads[n] = r
	s.len.Store(n + 1)
	p.n.Add(1)
	return true
}

// observe tells the planner of a sample's first READ, now or through pendingReads, and queues
// what it asks for.
func (l *Loader) observe(r firstRead) {
	if l.mu.TryLock() {
		l.drainLocked()
		l.readLocked(r)
		l.unlockPlannerNext(true)
		return
	}
	if !l.pending.add(r) {
		l.lockPlanner()
		l.readLocked(r)
		l.unlockPlannerNext(true)
		return
	}
	if l.mu.TryLock() { // the holder may have let go before our read was left
		l.unlockPlannerNext(l.drainLocked())
	}
}

// readLocked tells the planner, and the page cache's policy, of a sample's first READ; mu is
// held.
func (l *Loader) readLocked(r firstRead) {
	l.planner.Read(r.id, r.reader)
	if l.res != nil {
		l.res.Read(r.id)
	}
}

// lockPlanner takes mu and tells the planner of the pending reads. Release it with
// unlockPlanner.
func (l *Loader) lockPlanner() {
	l.mu.Lock()
	if l.drainLocked() {
		// Rare (readers came while mu was held): the fetches these reads call for are asked
		// for at once, as their readers would have.
		l.unlockPlannerNext(true)
		l.mu.Lock()
	}
}

// unlockPlanner lets go of mu (see unlockPlannerNext).
func (l *Loader) unlockPlanner() { l.unlockPlannerNext(false) }

// unlockPlannerNext lets go of mu, after asking the planner, if next, for the fetches that fit
// the read-ahead budget, which it then queues; and takes mu again, if it is free, to tell the
// planner of the reads left meanwhile.
func (l *Loader) unlockPlannerNext(next bool) {
	for {
		var fetches []Fetch
		if next {
			if room := l.aheadBudget - l.aheadBytes.Load(); room > 0 {
				fetches = l.planner.Next(room, l.haveAhead)
			}
		}
		l.mu.Unlock()
		l.queueFetches(fetches)
		if l.pending.n.Load() == 0 || !l.mu.TryLock() {
			return
		}
		next = l.drainLocked()
	}
}

// drainLocked tells the planner, under mu, of the pending reads, and reports whether there
// were any.
func (l *Loader) drainLocked() bool {
	if l.pending.n.Load() == 0 {
		return false
	}
	for i := range l.pending.parts {
		s := &l.pending.parts[i]
		if s.len.Load() == 0 {
			continue
		}
		s.mu.Lock()
		n := s.len.Load()
		for _, r := range s.reads[:n] {
			l.readLocked(r)
		}
		l.pending.n.Add(-n)
		s.len.Store(0)
		s.mu.Unlock()
	}
	return true
}
