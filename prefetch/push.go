package prefetch

import (
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
// their references until their block goes, as the Policy decides (Policy.PushAhead), and lets
// go of those the kernel took; it takes the decisions' lock twice, not once per sample. It
// reuses samples. Call it after their flights are resolved: a reader may hold a file's pages
// locked while its READ waits for a flight, and the kernel locks those pages to push into
// them. chunk says they came from a chunk read (chunks.go).
func (l *Loader) pushAhead(samples []*Sample, chunk bool) {
	ids := make([]layout.ID, 0, len(samples))
	for _, s := range samples {
		if s != nil {
			ids = append(ids, s.id)
		}
	}
	acts := l.d.pushAhead(ids, chunk, make([]Push, 0, len(ids)))
	var held []*Sample // left in the cache for their READ
	pushed, refused := ids[:0], []layout.ID(nil)
	var took []*Sample
	i := 0
	for _, s := range samples {
		if s == nil {
			continue
		}
		switch acts[i] {
		case HoldForRead:
			held = append(held, s)
		case LetGo:
			l.mem.cache.Del(uint32(s.id))
		case PushIt:
			if l.opt.Push(s.id, 0, s.data) {
				pushed = append(pushed, s.id)
				took = append(took, s)
			} else {
				refused = append(refused, s.id)
			}
		}
		i++
	}
	counter := &l.stats.pushedAhead
	if chunk {
		counter = &l.stats.chunkSamples
	}
	counter.Add(uint64(len(pushed)))
	letGo := l.d.pushed(pushed, refused)
	for _, s := range took {
		l.mem.consumed(s, int64(len(s.data)))
	}
	for _, id := range letGo {
		l.mem.cache.Del(uint32(id))
	}
	for _, s := range held {
		l.detach(s)
	}
}

// detach replaces read-ahead sample s, held in the cache for a READ that comes later or
// never, by an exact copy of its own (cacheCopy), so that it does not keep the buffer of the
// read it shared with its neighbours (up to 4 MiB for a beacon of 100 KB). Its READ may never
// come: a beacon that the kernel's page cache serves. Why: docs/bench/prefetch-notes.md,
// "Buffers held for READs that never come".
func (l *Loader) detach(s *Sample) {
	if s.ahead.Swap(false) { // else read to its end meanwhile, or evicted
		l.mem.cacheCopy(s, false)
	}
}

// Arrived is told that bytes data of the shard named shard (not one of x's: ignored), from
// offset off, have just come from a slow source
// (a chunk the disk cache fetched from S3 for a reader). With Options.Push it pushes into the
// kernel's page cache the samples lying wholly inside them that the Policy picks
// (Policy.Arrived): a shuffled epoch reads every sample once, so the other samples of a chunk
// fetched for one of them are read later in the same epoch, and from the page cache they cost
// no request, no read of the disk cache and no wait. Call it after the readers waiting for
// these bytes were woken: the kernel locks a file's pages to push into them, and a READ holding
// them must be able to finish. It runs on the caller's goroutine; data is not kept.
func (l *Loader) Arrived(shard string, off int64, data []byte) {
	n, ok := l.shardN[shard]
	if l.opt.Push == nil || !ok || off < 0 || len(data) == 0 {
		return
	}
	ids := l.d.arrived(n, uint64(off), uint64(off)+uint64(len(data)))
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
	l.stats.pushedArrived.Add(uint64(len(pushed)))
	l.d.pushed(pushed, refused) // none of them is in memory: nothing to let go of
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
	if !l.opt.Push(id, end, s.data[end:]) && l.mem.reserveAhead(size) {
		l.mem.admit(s, true)
		l.mem.cache.Wait() // the next READ comes at once: the cache must show the sample by then
	}
	return s.data[:end], s, nil
}
