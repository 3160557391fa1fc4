package prefetch

import (
	"sync/atomic"

	"github.com/aifs/aifs/backend"
	"github.com/aifs/aifs/layout"
)

// Pushing samples into the kernel's page cache (Options.Push): the samples read ahead
// (pushAhead), the other samples of a chunk a slow source returned (Arrived), and the rest of a
// sample whose first READ asks for its head only (readHead). A sample pushed is read by its
// reader from the page cache, with no request at all.

// pageSize is the kernel's page: a sample of one page costs one READ either way, so it is not
// pushed.
const pageSize = 4096

// pushAhead pushes the samples of one read ahead (nil for those not fetched), which hold
// their references until their block goes, and lets go of those the kernel took; it takes the
// planner's mutex twice, not once per sample. It reuses samples. Call it after their flights
// are resolved: a reader may hold a file's pages locked while its READ waits for a flight,
// and the kernel locks those pages to push into them. chunk says they came from a cold miss's
// chunk (chunks.go), which only a plan's beacons skip.
func (l *Loader) pushAhead(samples []*Sample, chunk bool) {
	// Beacons (Planner.IsBeacon) still come as a READ, so that the planner sees how far the
	// readers have got and keeps reading ahead of them. A sample that the page cache's policy
	// refuses (Residency.Push: the window is full) is let go, not held for its READ: its
	// memory would count against the same memory cgroup as the page cache, past the budget.
	var letGo []layout.ID
	var held []*Sample // left in the cache for their READ
	l.lockPlanner()
	for i, s := range samples {
		if s == nil {
			continue
		}
		beacon := l.planner.IsBeacon(s.id)
		if chunk {
			beacon = l.planner.IsPlanBeacon(s.id)
		}
		switch {
		case len(s.data) <= pageSize || beacon:
			held = append(held, s)
			samples[i] = nil
		case !l.mayPush(s.id):
			letGo = append(letGo, s.id)
			samples[i] = nil
		}
	}
	l.unlockPlanner()
	for _, id := range letGo {
		l.cache.Del(uint32(id))
	}
	pushed := samples[:0]
	var refused []layout.ID
	for _, s := range samples {
		if s == nil {
			continue
		}
		if l.opt.Push(s.id, 0, s.data) {
			pushed = append(pushed, s)
		} else {
			refused = append(refused, s.id)
		}
	}
	counter := &l.stats.pushedAhead
	if chunk {
		counter = &l.stats.chunkSamples
	}
	l.markPushed(counter, len(pushed), func(i int) layout.ID { return pushed[i].id }, refused)
	for _, s := range pushed {
		l.consumed(s, int64(len(s.data)))
	}
	if l.res != nil && !l.resFits.Load() {
		// The kernel refused them (ENOENT: under memory pressure it has reclaimed the inode of
		// a file with no pages); they are let go for the reason above.
		for _, id := range refused {
			l.cache.Del(uint32(id))
		}
	}
	for _, s := range held {
		l.detach(s)
	}
}

// detach replaces read-ahead sample s, held in the cache for a READ that comes later or
// never, by an exact copy of its own (cacheCopy), so that it does not keep the buffer of the
// read it shared with its neighbours (up to 4 MiB for a beacon of 100 KB). Its READ may never
// come: a beacon that the kernel's page cache serves. Such buffers, 17 of 4 MiB and 8 of 1 MiB
// lent and not given back after 20 epochs in a memory cgroup of half the set, 8 readers, grew
// the daemon's anonymous memory from 37 to 82 MB, and the page cache's budget, which leaves it
// out, fell by as much (docs/bench/README.md, run 10).
func (l *Loader) detach(s *Sample) {
	if s.ahead.Swap(false) { // else read to its end meanwhile, or evicted
		l.cacheCopy(s, false)
	}
}

// mayPush asks the page cache's policy, if any, whether sample id may be pushed, and counts
// it there if so; mu is held.
func (l *Loader) mayPush(id layout.ID) bool { return l.res == nil || l.res.Push(id) }

// Arrived is told that bytes data of shard, from offset off, have just come from a slow source
// (a chunk the disk cache fetched from S3 for a reader). With Options.Push it pushes into the
// kernel's page cache each sample lying wholly inside them that this epoch has not read and
// that is neither cached nor being fetched: a shuffled epoch reads every sample once, so the
// other samples of a chunk fetched for one of them are read later in the same epoch, and from
// the page cache they cost no request, no read of the disk cache and no wait. Samples of one
// page or less, and the beacons of a plan (Planner.IsPlanBeacon), are left to their READ, as
// in read-ahead. Call it after the readers waiting for these bytes were woken: the kernel
// locks a file's pages to push into them, and a READ holding them must be able to finish. It
// runs on the caller's goroutine; data is not kept.
func (l *Loader) Arrived(shard uint32, off int64, data []byte) {
	if l.opt.Push == nil || off < 0 || len(data) == 0 {
		return
	}
	end := uint64(off) + uint64(len(data))
	var ids []layout.ID
	l.lockPlanner()
	for pos := l.x.ExtentPos(shard, uint64(off)); pos < l.x.Files(); pos++ {
		id := l.x.ByExtent(pos)
		e := l.x.Entry(id)
		if e.Shard != shard || e.Offset+e.Size > end {
			break
		}
		if e.Size > pageSize && !l.planner.ReadThisEpoch(id) && !l.planner.IsPlanBeacon(id) && !l.have(id) && l.mayPush(id) {
			ids = append(ids, id)
		}
	}
	l.unlockPlanner()
	pushed := ids[:0:0]
	var refused []layout.ID
	for _, id := range ids {
		e := l.x.Entry(id)
		b := data[e.Offset-uint64(off) : e.Offset-uint64(off)+e.Size]
		if l.verify(id, e, b) == nil && l.opt.Push(id, 0, b) { // else its READ fetches it, and reports a corrupt one
			pushed = append(pushed, id)
		} else {
			refused = append(refused, id)
		}
	}
	l.markPushed(&l.stats.pushedArrived, len(pushed), func(i int) layout.ID { return pushed[i] }, refused)
}

// markPushed counts n samples pushed in counter and tells the planner of them, id(i) for
// i < n, and the page cache's policy of them (landed: they may be dropped now) and of the
// refused ones it had counted in (mayPush), under one lock.
func (l *Loader) markPushed(counter *atomic.Uint64, n int, id func(i int) layout.ID, refused []layout.ID) {
	if n == 0 && len(refused) == 0 {
		return
	}
	counter.Add(uint64(n))
	l.lockPlanner()
	for i := range n {
		l.planner.Pushed(id(i))
		if l.res != nil {
			l.res.Landed(id(i))
		}
	}
	if l.res != nil {
		for _, id := range refused {
			l.res.Unpush(id)
		}
	}
	l.unlockPlanner()
}

// readHead serves the first READ of sample id when it asks for [0, end) only, end short of the
// sample's end: the kernel reads a file 128 KiB at a time (its read-ahead window), so a sample
// of 500 KiB would take four READs. The sample is read whole, as always, and the rest of it,
// [end, size), is pushed into the page cache before the READ is answered: the reader then finds
// it there, and the sample costs one READ. The reader holds the pages of [0, end) locked while
// it waits, not those pushed, and asks for the next ones only after this answer. If the kernel
// refuses the rest, the sample is kept as read ahead for the READs that will come for it.
func (l *Loader) readHead(cancel <-chan struct{}, reader uint32, id layout.ID, e layout.Entry, end int64) ([]byte, backend.View, error) {
	size := int64(e.Size)
	s, err := l.Read(cancel, reader, id, e, 0, size) // taken whole: not kept for READs that will not come
	if err != nil {
		return nil, nil, err
	}
	if !l.opt.Push(id, end, s.data[end:]) && l.reserveAhead(size) {
		l.admit(s, true)
		l.cache.Wait() // the next READ comes at once: the cache must show the sample by then
	}
	return s.data[:end], s, nil
}
