package prefetch

import (
	"time"

	"github.com/aifs/aifs/layout"
)

// The page cache's policy at run time (Options.PageCache, Options.Drop): one goroutine ticks
// the Residency every tickEvery, drops what it lets go, and asks for the budget every
// budgetEvery ticks. Drops never happen on a READ's path: the kernel locks a file's pages to
// drop them, and a READ may be holding them.

// tickEvery is how often the page cache's policy ticks.
const tickEvery = 10 * time.Millisecond

const budgetEvery = 100 // ticks: the budget is asked for every second

// noteReader records the pid of a process that sent a READ (ReadRange's reader): the page
// cache's pages are charged to the reader's memory cgroup, so its limit bounds the budget
// (Options.PageCache). One atomic store; the same pid lands in the same slot.
func (l *Loader) noteReader(pid uint32) {
	if l.pageCache && pid != 0 {
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

// refreshBudget asks Options.PageCache for the budget and gives it to the Policy, dropping
// what a smaller budget leaves out.
func (l *Loader) refreshBudget() {
	b, src := int64(1<<62), "none (no page_cache budget)"
	if l.opt.PageCache != nil {
		b, src = l.opt.PageCache(l.recentReaders())
	}
	l.drop(l.d.budget(b, src))
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

// tick tells the Policy of a tick (Policy.Tick), drops what it lets go and tops up the
// sweep's reads (sweep); drop is reused.
func (l *Loader) tick(drop []layout.ID) []layout.ID {
	drop, settled := l.d.tick(l.stats.misses.Load()+l.pathMissesTick(), drop)
	l.drop(drop)
	l.sweep()
	l.quietTick(settled)
	return drop
}

// quietTicks is how long the policy stays settled before the Loader quiets the serving path
// (Options.Quiet): a second.
const quietTicks = 100

// quietTick quiets the serving path once the policy has been settled for quietTicks, and wakes
// it once the policy is not settled or the storage under the shards was read since the last
// tick: at least a mean sample's bytes (a miss of a sample evicted from the page cache, a cold
// reader). Other programs reading that storage wake it too; it goes quiet again a second after,
// the policy still settled.
// Called by the ticking goroutine alone.
func (l *Loader) quietTick(settled bool) {
	if l.opt.Quiet == nil {
		return
	}
	reads := l.opt.StorageReads()
	stirred := reads-min(reads, l.lastStorage) >= max(pageSize, l.x.FileBytes()/uint64(max(1, l.x.Files())))
	l.lastStorage = reads
	switch {
	case l.quiet.Load():
		if !settled || stirred {
			l.quiet.Store(false)
			l.wakes.Add(1)
			l.settledTicks = 0
			l.opt.Quiet(false)
		}
	case !settled:
		l.settledTicks = 0
	default:
		if l.settledTicks++; l.settledTicks >= quietTicks {
			l.quiet.Store(true)
			l.quiets.Add(1)
			l.opt.Quiet(true)
		}
	}
}

// pathMissesTick returns the misses of another serving path so far (Options.Misses), each tick
// counting no more than the reads Seen had since the last: the estimate counts whatever else
// the readers read from storage, and what the plane's readers did not read did not miss. Called
// by the ticking goroutine alone.
func (l *Loader) pathMissesTick() uint64 {
	if l.opt.Misses == nil {
		return 0
	}
	path, seen := l.opt.Misses(), l.seen.Load()
	l.pathMisses += min(path-min(path, l.lastPath), seen-l.lastSeen)
	l.lastPath, l.lastSeen = path, seen
	return l.pathMisses
}

// drop drops the samples ids from the page cache.
func (l *Loader) drop(ids []layout.ID) {
	for _, id := range ids {
		l.opt.Drop(id)
	}
}
