package prefetch

import "github.com/aifs/aifs/layout"

// Chunk reads (Options.ChunkReads): while READs miss fast (chunkGate), the Loader reads in the
// background the samples that this epoch has not read and that the page cache will keep (all
// of them when the set fits the budget, the subset's otherwise), and pushes them into the page
// cache as read-ahead is (pushAhead): the samples after a cold miss first (Policy.Miss), then
// the shards in order (Policy.Sweep). A shuffled epoch then reads each byte of the shards
// once, in large reads, instead of one random read per sample: a read ends at a sample the
// epoch has read or is reading, so that no byte is read twice. Bounds, so that foreground
// misses come first: at most chunkFlightBytes of chunk reads queued, reading or pushing; no
// miss's read while the decisions' lock is busy; no read whose samples to keep fill less than
// half of its bytes; and none while a sequential run is read (Planner.Streaming): its
// read-ahead reads the same samples in the same order, and the sweep beside it read a sorted
// pass twice and pushed the run's beacons, whose READs tell the planner where the next pass
// begins (TestLoaderSortedPasses). The Policy decides what to read; the Loader bounds the
// reads in flight and runs them. Why these figures (ChunkBytes, reads in flight, the gate's
// rates): docs/bench/prefetch-notes.md, "Chunk reads".

// chunkFlightBytes bounds the bytes of the chunk reads queued, reading or pushing (each holds
// a buffer until its samples are pushed, chunkDone): 16 reads of DefaultChunkBytes, 4 of 4 MiB
// over S3 without cache_dir.
const chunkFlightBytes = 16 << 20

// maxChunkFlights is how many chunk reads of chunkBytes chunkFlightBytes allows, 2 at least.
func maxChunkFlights(chunkBytes int64) int32 {
	return int32(max(2, chunkFlightBytes/chunkBytes))
}

// DefaultChunkBytes is Options.ChunkBytes when not set: 8 KiB under 1 MiB so that a read,
// widened to 4 KiB at both ends for O_DIRECT, fits the local backend's 1 MiB buffers.
const DefaultChunkBytes = 1<<20 - 8<<10

// Miss observes a READ of sample id (entry e) that missed, and returns the chunk read of the
// samples after it, up to ChunkBytes, if chunk reads are open and it is worth one. When the set
// does not fit, a miss outside the subset asks for none: it is the steady state (the subset
// around it is resident); in a cold epoch the sweep reads the subset around it.
func (p *Policy) Miss(id layout.ID, e layout.Entry, have func(layout.ID) bool) (Fetch, bool) {
	if !p.ChunksOpen() || !p.res.Fits() && !p.res.Keeps(id) || p.planner.Streaming() {
		return Fetch{}, false
	}
	end := e.Offset + e.Size
	f, want, _ := p.chunkFetchFrom(e.Shard, p.cat.ExtentPos(e.Shard, end), end+uint64(p.cfg.ChunkBytes), have)
	return f, p.worthReading(f, want)
}

// chunkFetchFrom returns the read of the samples to push among those of shard from extent
// position pos on that end by end, their bytes, and the position after the last it looked at.
// The read ends before a sample that this epoch has read or is reading (a READ, or held by the
// serving path: have), as its bytes would be read twice.
func (p *Policy) chunkFetchFrom(shard uint32, pos int, end uint64, have func(layout.ID) bool) (f Fetch, want int64, next int) {
	f = Fetch{Shard: shard, Chunk: true}
	for ; pos < p.cat.Files(); pos++ {
		c := p.cat.ByExtent(pos)
		ce := p.cat.Entry(c)
		if ce.Shard != shard || ce.Offset+ce.Size > end {
			break
		}
		if p.planner.ReadThisEpoch(c) || p.skip(c, have) {
			if len(f.IDs) > 0 {
				break
			}
			continue
		}
		size := int64(ce.Size)
		// When the set fits, a sample believed resident but not read this epoch is read all the
		// same (inPageCache), and a warm epoch has no misses. Otherwise the resident subset is
		// left alone.
		if size <= pageSize || !p.res.Keeps(c) || p.inPageCache(c) {
			continue
		}
		if len(f.IDs) == 0 {
			f.Off = int64(ce.Offset)
		}
		f.IDs = append(f.IDs, c)
		f.Len = int64(ce.Offset+ce.Size) - f.Off
		want += size
	}
	return f, want, pos
}

// worthReading reports whether chunk read f, of want bytes of samples to push, is worth
// making: its samples fill half of the bytes it reads at least (the subset of a set that does
// not fit, once resident: reading around it would cost more than it brings), and it holds two
// samples at least unless the set fits. A lone sample between two that the epoch has read is
// worth a read when the set fits: left to its READ, it is a miss after the sweep has passed.
func (p *Policy) worthReading(f Fetch, want int64) bool {
	return (len(f.IDs) >= 2 || len(f.IDs) == 1 && p.res.Fits()) && 2*want >= f.Len
}

// Sweep returns up to room chunk reads (the flights free) while the gate is open and no plan
// reads ahead (plans read ahead in their own order; with the plan gate closed, plangate.go,
// none does): from a cursor that starts again at each epoch
// and each time the gate opens (Tick), the samples worth reading in the order of the shards,
// up to ChunkBytes at a time, so that no sample is left out as one across a chunk boundary is
// by aligned chunks. A miss's own read (Miss) goes first; the sweep fills the flights it
// leaves, so that the device never idles between misses. It looks at no more than sweepLook
// reads a call.
func (p *Policy) Sweep(room int, have func(layout.ID) bool) []Fetch {
	if !p.ChunksOpen() || room <= 0 || p.planner.PlannedBytes() != 0 && p.plansReadAhead() || p.planner.Streaming() {
		return nil
	}
	if epoch, _, _ := p.planner.Epoch(); epoch != p.sweepEpoch {
		p.sweepEpoch, p.sweepPos = epoch, 0
	}
	var fetches []Fetch
	for n := 0; n < sweepLook && len(fetches) < room && p.sweepPos < p.cat.Files(); n++ {
		first := p.cat.Entry(p.cat.ByExtent(p.sweepPos))
		f, want, pos := p.chunkFetchFrom(first.Shard, p.sweepPos, first.Offset+uint64(p.cfg.ChunkBytes), have)
		if p.worthReading(f, want) {
			fetches = append(fetches, f)
		}
		p.sweepPos = max(pos, p.sweepPos+1)
	}
	return fetches
}

// sweepLook bounds the reads one sweep looks at, so that it holds the decisions' lock briefly
// (each is tens of samples to look up).
const sweepLook = 8

// readChunk starts the chunk read that a miss of sample id (entry e) calls for, if any and if
// a flight is free; it does not wait for the decisions' lock.
func (l *Loader) readChunk(id layout.ID, e layout.Entry) {
	if !l.d.chunksOpen.Load() || l.chunkFlights.Load() >= l.maxFlights {
		return
	}
	if f, ok := l.d.miss(id, e); ok {
		l.chunkFlights.Add(1)
		l.stats.chunkReads.Add(1)
		l.queueFetches([]Fetch{f})
	}
}

// sweep keeps maxFlights chunk reads going (Policy.Sweep). It runs at each tick and each time
// a chunk read ends, never on a READ's path, and waits for the decisions' lock (only READs may
// not).
func (l *Loader) sweep() {
	if !l.d.chunksOpen.Load() || l.chunkFlights.Load() >= l.maxFlights {
		return
	}
	fetches := l.d.sweep(int(l.maxFlights - l.chunkFlights.Load()))
	l.chunkFlights.Add(int32(len(fetches)))
	l.stats.chunkReads.Add(uint64(len(fetches)))
	l.queueFetches(fetches)
}

// chunkDone is told that a chunk read is done, its samples pushed: the next may start. A read
// holds its flight until then, so that the flights bound the buffers held too.
func (l *Loader) chunkDone() {
	l.chunkFlights.Add(-1)
	l.sweep()
}

// chunkGate opens chunk reads while READs miss fast and closes them when they slow down, from
// the misses counted at each tick (10 ms). It opens at gateOpenMisses in the last
// gateOpenTicks (1,000 a second over 20 ms) and closes below gateCloseMisses in the last
// gateSpan (250 a second over 1 s); it starts closed. The gap keeps it from flapping: once
// chunk reads have put most of an epoch in the page cache, misses fall, but a reader that
// comes at 300 a second does not reopen it.
type chunkGate struct {
	misses [gateSpan]uint64 // misses in each of the last gateSpan ticks, a ring
	at     int              // the ring's next slot
	last   uint64           // the misses counter at the last tick
	open   bool
	ticks  int // ticks since it opened, up to gateSpan
}

const (
	gateSpan        = 100 // ticks (1 s)
	gateOpenTicks   = 2   // ticks (20 ms)
	gateOpenMisses  = 20  // in gateOpenTicks: 1,000 a second
	gateCloseMisses = 250 // in gateSpan: 250 a second
)

// tick takes the misses counter at a tick and returns whether chunk reads are open. Once
// open, the gate stays open for gateSpan at least: chunk reads slow the misses down and make
// them fewer, so the misses of the first ticks after it opens would close it at once, and a
// whole span with no ticks before the epoch's first misses would too.
func (g *chunkGate) tick(misses uint64) bool {
	g.misses[g.at] = misses - g.last
	g.last = misses
	g.at = (g.at + 1) % gateSpan
	g.ticks = min(g.ticks+1, gateSpan)
	var recent, all uint64
	for i := range gateSpan {
		n := g.misses[(g.at+gateSpan-1-i)%gateSpan] // the last tick's first
		if i < gateOpenTicks {
			recent += n
		}
		all += n
	}
	switch {
	case !g.open && recent >= gateOpenMisses:
		g.open, g.ticks = true, 0
	case g.open && g.ticks == gateSpan && all < gateCloseMisses:
		g.open = false
	}
	return g.open
}
