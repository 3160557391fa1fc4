package prefetch

import (
	"fmt"

	"github.com/aifs/aifs/internal/flight"
	"github.com/aifs/aifs/layout"
)

// Read-ahead: the fetches the Policy asks for go through a bounded queue to Workers
// goroutines (worker); one that does not fit in the queue or the budget is shed, never
// waited for.

// queueFetches reserves each fetch's bytes and queues it; what does not fit in the budget or
// the queue is shed (and its reservation returned).
func (l *Loader) queueFetches(fetches []Fetch) {
	for _, f := range fetches {
		var n int64
		for _, id := range f.IDs {
			n += int64(l.x.Entry(id).Size)
		}
		if !l.mem.reserveAhead(n) {
			l.stats.aheadShed.Add(uint64(len(f.IDs)))
			if f.Chunk {
				l.chunkFlights.Add(-1)
			}
			continue
		}
		if l.queue.offer(f) {
			l.stats.aheadIssued.Add(uint64(len(f.IDs)))
		} else {
			l.mem.aheadBytes.Add(-n)
			l.stats.aheadShed.Add(uint64(len(f.IDs)))
			if f.Chunk {
				l.chunkFlights.Add(-1)
			}
		}
	}
}

// fetchQueue takes the reads ahead that queueFetches has reserved, without blocking: the
// Loader's is workQueue, drained by its Workers goroutines; tests run each read in the caller
// instead, so that replays are deterministic (loader_test.go).
type fetchQueue interface {
	offer(f Fetch) bool // starts or queues f; false: the queue is full
	depth() int         // the reads queued
}

// workQueue is the bounded queue of the Workers goroutines (worker).
type workQueue chan Fetch

func (q workQueue) offer(f Fetch) bool {
	select {
	case q <- f:
		return true
	default:
		return false
	}
}

func (q workQueue) depth() int { return len(q) }

func (l *Loader) worker() {
	defer l.wg.Done()
	for {
		select {
		case <-l.ctx.Done():
			return
		case f := <-l.work:
			l.prefetch(f)
		}
	}
}

// prefetch runs one read the Policy asked for, whose bytes were reserved in aheadBytes:
// samples that another fetch took meanwhile are skipped, the rest become cached read-ahead
// (and, with Options.Push, are pushed into the page cache).
func (l *Loader) prefetch(f Fetch) {
	if f.Chunk {
		defer l.chunkDone()
	}
	if l.opt.WillNeed != nil {
		l.willNeed(f)
		return
	}
	type claim struct {
		id layout.ID
		f  *flight.Flight[*Sample]
	}
	claims := make([]claim, 0, len(f.IDs))
	var unclaimed int64
	late := l.d.late(f)
	for i, id := range f.IDs {
		var fl *flight.Flight[*Sample]
		if !late[i] { // else the readers got there first
			fl = l.flights.Start(id)
		}
		if fl == nil {
			unclaimed += int64(l.x.Entry(id).Size)
			continue
		}
		claims = append(claims, claim{id, fl})
	}
	l.mem.aheadBytes.Add(-unclaimed)
	if len(claims) == 0 {
		return
	}
	view, data, err := l.readShard(f.Shard, f.Off, nil, f.Len)
	if err != nil {
		for _, c := range claims {
			l.mem.aheadBytes.Add(-int64(l.x.Entry(c.id).Size))
			l.resolve(c.id, c.f, nil, fmt.Errorf("read ahead: %w", err))
		}
		return
	}
	blk := &block{view: view}
	blk.refs.Store(1) // ours, while we hand out samples
	samples := make([]*Sample, len(claims))
	for i, c := range claims {
		e := l.x.Entry(c.id)
		lo := int64(e.Offset) - f.Off
		if err := l.verify(c.id, e, data[lo:lo+int64(e.Size)]); err != nil {
			l.mem.aheadBytes.Add(-int64(e.Size))
			l.resolve(c.id, c.f, nil, fmt.Errorf("read ahead: %w", err))
			claims[i].f = nil // resolved
			continue
		}
		s := &Sample{data: data[lo : lo+int64(e.Size) : lo+int64(e.Size)], blk: blk, id: c.id}
		s.ahead.Store(true)
		s.blk.refs.Add(1) // the cache's
		if !l.mem.cache.Set(uint32(c.id), s, int64(e.Size)) {
			l.mem.onExit(s)
		}
		samples[i] = s
	}
	// ristretto applies Sets asynchronously: the flights stay until the cache shows the
	// samples, so that a reader never finds neither and fetches again.
	l.mem.cache.Wait()
	for i, c := range claims {
		if c.f != nil {
			l.resolve(c.id, c.f, samples[i], nil)
		}
	}
	if l.opt.Push != nil {
		l.pushAhead(samples, f.Chunk)
	}
	blk.release()
}

// willNeed runs one read ahead on another serving path (Options.WillNeed): each sample of f
// that the readers have not read yet and that the page cache's policy lets in is asked for
// there, in f's order (the shard's), and counted pushed if it came. Nothing is held in memory:
// the reservation goes at once.
func (l *Loader) willNeed(f Fetch) {
	late := l.d.late(f)
	ids := make([]layout.ID, 0, len(f.IDs))
	var n int64
	for i, id := range f.IDs {
		n += int64(l.x.Entry(id).Size)
		if !late[i] {
			ids = append(ids, id)
		}
	}
	l.mem.aheadBytes.Add(-n)
	acts := l.d.pushAhead(ids, f.Chunk, make([]Push, 0, len(ids)))
	var pushed, refused []layout.ID
	for i, id := range ids {
		if acts[i] != PushIt {
			continue
		}
		if l.opt.WillNeed(id, f.Chunk) {
			pushed = append(pushed, id)
		} else {
			refused = append(refused, id)
		}
	}
	counter := &l.stats.pushedAhead // as pushAhead counts them
	if f.Chunk {
		counter = &l.stats.chunkSamples
	}
	counter.Add(uint64(len(pushed)))
	l.d.pushed(pushed, refused)
}
