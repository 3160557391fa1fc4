package prefetch

import "github.com/aifs/aifs/layout"

// Chunk reads (Options.ChunkReads): a cold miss also asks, in the background, for the other
// samples of the 4 MiB-aligned chunk of its shard around it that this epoch has not read and
// that the page cache will keep (all of them when the set fits the budget, the subset's
// otherwise), and pushes them into the page cache as read-ahead is (pushAhead). A shuffled
// epoch then reads each byte of the shards about once, in large reads, instead of one random
// read per sample. Bounds, so that foreground misses come first: at most maxChunkFlights chunk
// reads queued or running, none started while the planner's lock is busy, and none for a
// chunk whose samples to keep fill less than half of the bytes it would read (the subset of a
// set that does not fit, once resident: reading around it would cost more than it brings).
//
// maxChunkFlights was measured on the 2-core VM (loop-mounted ext4 image with direct I/O,
// 4,000 files, cold epochs, aifs/ext4 of the same pass): 1 or 2 chunk reads in flight left 8
// readers at 0.6-0.9× ext4 (the device idles between them); 8 gave 1.0-1.3× at 8 readers and
// 2.5-2.9× at 1; 16 was slower at 8 and 32 readers (foreground misses queue behind 64 MiB).

const (
	chunkSize       = 4 << 20 // the local backend's largest pooled buffer
	maxChunkFlights = 8       // 32 MiB in flight, a sequential run's largest window
)

// readChunk queues the chunk read around sample id (entry e), whose READ missed, if it is
// worth one.
func (l *Loader) readChunk(id layout.ID, e layout.Entry) {
	if !l.chunksOpen.Load() || l.chunkFlights.Load() >= maxChunkFlights || !l.mu.TryLock() {
		return
	}
	next := l.drainLocked()
	f, ok := l.chunkFetch(id, e)
	l.unlockPlannerNext(next)
	if ok {
		l.chunkFlights.Add(1)
		l.stats.chunkReads.Add(1)
		l.queueFetches([]Fetch{f})
	}
}

// chunkFetch returns the read of the samples of the chunk around sample id (entry e) to push,
// and whether there is one worth making; mu is held.
func (l *Loader) chunkFetch(id layout.ID, e layout.Entry) (Fetch, bool) {
	start := e.Offset &^ (chunkSize - 1)
	end := start + chunkSize
	f := Fetch{Shard: e.Shard, Chunk: true}
	var want int64
	for pos := l.x.ExtentPos(e.Shard, start); pos < l.x.Files(); pos++ {
		c := l.x.ByExtent(pos)
		ce := l.x.Entry(c)
		if ce.Shard != e.Shard || ce.Offset+ce.Size > end {
			break
		}
		size := int64(ce.Size)
		// When the set fits, a sample believed resident but not read this epoch is read all the
		// same: the belief is stale after drop_caches (a miss says the epoch is cold), and a
		// warm epoch has no misses. Otherwise the resident subset is left alone.
		if c == id || size <= pageSize || size > l.opt.MaxWhole || !l.res.Keeps(c) ||
			!l.res.Fits() && l.res.Resident(c) || l.planner.ReadThisEpoch(c) || l.have(c) {
			continue
		}
		if len(f.IDs) == 0 {
			f.Off = int64(ce.Offset)
		}
		f.IDs = append(f.IDs, c)
		f.Len = int64(ce.Offset+ce.Size) - f.Off
		want += size
	}
	return f, len(f.IDs) >= 2 && 2*want >= f.Len
}

// chunkGate opens chunk reads while READs miss fast and closes them when they slow down, from
// the misses counted at each of the page cache's ticks (10 ms). It opens at gateOpenMisses in
// the last gateOpenTicks (1,000 a second over 20 ms) and closes below gateCloseMisses in the
// last gateSpan (250 a second over 1 s); it starts closed. The gap keeps it from flapping: once
// chunk reads have put most of an epoch in the page cache, misses fall, but a reader that
// comes at 300 a second does not reopen it.
//
// Measured on the 2-core VMs (loop-mounted ext4 image, 10,000 JPEGs of ~110 KB): the
// benchmark's readers ask for 5,000-11,000 samples a second in a cold epoch (1 to 32 readers,
// docs/bench/compare.md), each one a miss until chunk reads put it in the page cache; PyTorch's
// ImageFolder + DataLoader with 2 workers decoding reads 200-420 samples a second, and with
// chunk reads open its pass of 1,500 samples ran at 0.84-0.89x ext4 against 0.90-0.96x with
// them off, the whole set pushed in its first second.
type chunkGate struct {
	misses [gateSpan]uint64 // misses in each of the last gateSpan ticks, a ring
	at     int              // the ring's next slot
	last   uint64           // the misses counter at the last tick
	open   bool
}

const (
	gateSpan        = 100 // ticks (1 s)
	gateOpenTicks   = 2   // ticks (20 ms)
	gateOpenMisses  = 20  // in gateOpenTicks: 1,000 a second
	gateCloseMisses = 250 // in gateSpan: 250 a second
)

// tick takes the Loader's misses counter at a tick and returns whether chunk reads are open.
func (g *chunkGate) tick(misses uint64) bool {
	g.misses[g.at] = misses - g.last
	g.last = misses
	g.at = (g.at + 1) % gateSpan
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
		g.open = true
	case g.open && all < gateCloseMisses:
		g.open = false
	}
	return g.open
}
