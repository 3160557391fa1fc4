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
	if l.chunkFlights.Load() >= maxChunkFlights || !l.mu.TryLock() {
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
