package prefetch

import (
	"slices"
	"time"

	"github.com/aifs/aifs/layout"
)

// The page cache's policy at run time (Options.PageCache, Options.Drop): one goroutine ticks
// the Residency every tickEvery, drops what it lets go, and asks for the budget every
// budgetEvery ticks. Drops never happen on a READ's path: the kernel locks a file's pages to
// drop them, and a READ may be holding them.

// tickEvery is a variable so that tests can tick by hand (Loader.tick) and nothing else.
var tickEvery = 10 * time.Millisecond

const budgetEvery = 100 // ticks: the budget is asked for every second

// noteReader records the pid of a process that sent a READ (ReadRange's reader): the page
// cache's pages are charged to the reader's memory cgroup, so its limit bounds the budget
// (Options.PageCache). One atomic store; the same pid lands in the same slot.
func (l *Loader) noteReader(pid uint32) {
	if l.res != nil && pid != 0 {
		if s := &l.readers[pid%uint32(len(l.readers))]; s.Load() != pid {
			s.Store(pid)
		}
	}
}

// recentReaders returns the pids noteReader recorded since the last call, and forgets them.
func (l *Loader) recentReaders() []uint32 {
	var pids []uint32
	for i := range l.readers {
		if pid := l.readers[i].Swap(0); pid != 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}

// refreshBudget asks Options.PageCache for the budget and gives it to the Residency, dropping
// what a smaller budget leaves out.
func (l *Loader) refreshBudget() {
	b, src := int64(1<<62), "none (no page_cache budget)"
	if l.opt.PageCache != nil {
		b, src = l.opt.PageCache(l.recentReaders())
	}
	l.lockPlanner()
	drop := l.res.SetBudget(b, nil)
	drop = l.res.SetScope(l.planScope(), drop)
	l.resSource = src
	l.resFits.Store(l.res.Fits())
	l.unlockPlanner()
	l.drop(drop)
}

// scopeSpan is how many budget refreshes (seconds) the scope is the largest of: a trainer
// replaces its plan each epoch, and the plans of a node's ranks come over a second or more,
// so the plans held dip at an epoch's start; the scope must not follow the dip.
const scopeSpan = 10

// planScope returns the largest bytes the plans held named at the last scopeSpan refreshes
// (Residency.SetScope), with l.mu held.
func (l *Loader) planScope() int64 {
	l.scopes[l.scopeAt%scopeSpan] = l.planner.PlannedBytes()
	l.scopeAt++
	return slices.Max(l.scopes[:])
}

func (l *Loader) residencyLoop(every time.Duration) {
	defer l.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	var drop []layout.ID
	for n := 1; ; n++ {
		select {
		case <-l.ctx.Done():
			return
		case <-t.C:
		}
		if n%budgetEvery == 0 {
			l.refreshBudget()
		}
		drop = l.tick(drop[:0])
	}
}

// tick ticks the Residency and drops what it lets go, opens or closes chunk reads
// (chunkGate) and tops up the sweep's reads (sweep); drop is reused.
func (l *Loader) tick(drop []layout.ID) []layout.ID {
	open := l.gate.tick(l.stats.misses.Load())
	l.lockPlanner()
	if open && !l.chunksOpen.Load() {
		l.sweepPos = 0 // the gate opens: the sweep starts again
	}
	l.chunksOpen.Store(open)
	drop = l.res.Tick(l.planner.Passed, l.flights.Busy, drop)
	l.unlockPlanner()
	l.drop(drop)
	l.sweep()
	return drop
}

// drop drops the samples ids from the page cache.
func (l *Loader) drop(ids []layout.ID) {
	for _, id := range ids {
		l.opt.Drop(id)
	}
}
