package prefetch

import "github.com/aifs/aifs/layout"

// Chunk reads (Options.ChunkReads): while READs miss fast (chunkGate), the Loader reads in the
// background the samples that this epoch has not read and that the page cache will keep (all
// of them when the set fits the budget, the subset's otherwise), and pushes them into the page
// cache as read-ahead is (pushAhead): the samples after a cold miss first (readChunk), then
// the shards in order (sweep). A shuffled epoch then reads each byte of the shards once, in
// large reads, instead of one random read per sample: a read ends at a sample the epoch has
// read or is reading, so that no byte is read twice. Bounds, so that foreground misses come
// first: at most chunkFlightBytes of chunk reads queued, reading or pushing; no miss's read while
// the planner's lock is busy; and no read whose samples to keep fill less than half of its
// bytes (the subset of a set that does not fit, once resident: reading around it would cost
// more than it brings); and none while a sequential run is read (Planner.Streaming): its
// read-ahead reads the same samples in the same order, and the sweep beside it read a sorted
// pass twice and pushed the run's beacons, whose READs tell the planner where the next pass
// begins (TestLoaderSortedPasses).
//
// ChunkBytes and the reads in flight were measured on the 2-core VM (loop-mounted ext4 image with
// direct I/O, 10,000 JPEGs, cold epochs, by hand, files/s against ext4 in the same pass).
// Before the sweep, with chunk reads started by misses alone, 1 or 2 reads of 4 MiB in flight
// left 8 readers at 0.6-0.9× ext4 (the device idled between misses) and 8 did best; with the
// sweep keeping every flight busy, 2 did better than 8 (1 reader: 1.25-1.71× against
// 1.15-1.44×; 8 readers: 0.90-1.08× against 0.85-0.88×), and 1 was slower (the device idles
// while a read is pushed). Once reads ended at the samples already read, 3 reads of 1 MiB beat
// 2 of 4 MiB at 1 reader (medians of 5 passes in three runs: 1.44-1.51× against 1.35-1.36×)
// and were alike at 8 and 32 (0.94 and 0.88× against 0.92 and 0.87×): a miss waits behind 3
// MiB at the device instead of 8, and fio read this disk as fast in 1 MiB reads 2 at a time
// (1.18 GB/s) as in 4 MiB reads (0.88-0.93 GB/s). 2 reads of 1 MiB, 3 of 512 KiB or 2 MiB, and
// 4 of 1 MiB did no better. A read is 8 KiB under 1 MiB so that, widened to 4 KiB at both ends
// for O_DIRECT, it fits the local backend's 1 MiB buffers (Options.ChunkBytes: over S3, where
// a GET costs a round trip, the mount asks for 4 MiB).
//
// On the 2-vCPU AMD EPYC VM of run 12, whose disk reads faster the more reads it has in flight
// (fio's random 112 KiB reads: 14,785 a second at depth 8, 16,688 at 32; its 4 MiB sequential
// reads 1.4-1.6 GB/s at any depth) and where every miss costs far more CPU (a paravirtualised
// guest: a system call 1.15 µs, a wake-up across CPUs 28 µs), more reads in flight won at every
// concurrency: cold epochs by hand, aifs/ext4 in the same pass, medians of 5-7 passes, at 1, 8
// and 32 readers: 3 reads of 1 MiB 1.65, 0.82-0.89 and 0.80-0.84; 6 reads 1.69, 0.99-1.00 and
// 0.96; 8 reads 1.01 at 8 and 0.94 at 32; 10 reads 1.78, 1.00 and 1.05; 16 reads 1.05-1.10 at
// 8 and 1.02 at 32 (harness run 13, 16 reads: 1.83, 1.14 and 1.02). The sweep pushes the epoch
// ahead of the readers faster, so fewer READs miss (CPU a file at 8 readers 186-203 µs with 16
// against 228-258 with 3). On the Intel VM the disk read ~900 MB/s at any depth, so that 3
// reads kept it busy and more only lengthen a miss's wait behind them; as no byte is read
// twice, the device's work is the same either way.

// chunkFlightBytes bounds the bytes of the chunk reads queued, reading or pushing (each holds
// a buffer until its samples are pushed, chunkDone): 16 reads of DefaultChunkBytes, 4 of 4 MiB
// over S3 without cache_dir.
const chunkFlightBytes = 16 << 20

// maxChunkFlights is how many chunk reads of ChunkBytes chunkFlightBytes allows, 2 at least.
func (l *Loader) maxChunkFlights() int32 {
	return int32(max(2, chunkFlightBytes/l.opt.ChunkBytes))
}

// DefaultChunkBytes is Options.ChunkBytes when not set.
const DefaultChunkBytes = 1<<20 - 8<<10

// readChunk queues the read of the samples that follow sample id (entry e), whose READ missed,
// up to ChunkBytes, if it is worth one. When the set does not fit, a miss outside the subset
// asks for none: it is the steady state (the subset around it is resident), and looking at
// its neighbours for nothing was 3-4% of the daemon's CPU in a memory cgroup of half the
// dataset; in a cold epoch the sweep reads the subset around it.
func (l *Loader) readChunk(id layout.ID, e layout.Entry) {
	if !l.chunksOpen.Load() || l.chunkFlights.Load() >= l.maxChunkFlights() || !l.mu.TryLock() {
		return
	}
	next := l.drainLocked()
	var f Fetch
	ok := false
	if (l.res.Fits() || l.res.Keeps(id)) && !l.planner.Streaming() {
		var want int64
		end := e.Offset + e.Size
		f, want, _ = l.chunkFetchFrom(e.Shard, l.x.ExtentPos(e.Shard, end), end+uint64(l.opt.ChunkBytes))
		ok = l.worthReading(f, want)
	}
	l.unlockPlannerNext(next)
	if ok {
		l.chunkFlights.Add(1)
		l.stats.chunkReads.Add(1)
		l.queueFetches([]Fetch{f})
	}
}

// chunkFetchFrom returns the read of the samples to push among those of shard from extent
// position pos on that end by end, their bytes, and the position after the last it looked at;
// mu is held. The read ends before a sample that this epoch has read or is reading (a READ or
// read-ahead), as its bytes would be read twice: at 32 readers the misses read 44% of a cold
// epoch's samples before chunk reads do, and reading across them read 1.16× the set's bytes
// from the device (the 2-core VM, 10,000 JPEGs; 0.78× ext4's files/s, 0.87-1.0× without).
func (l *Loader) chunkFetchFrom(shard uint32, pos int, end uint64) (f Fetch, want int64, next int) {
	f = Fetch{Shard: shard, Chunk: true}
	for ; pos < l.x.Files(); pos++ {
		c := l.x.ByExtent(pos)
		ce := l.x.Entry(c)
		if ce.Shard != shard || ce.Offset+ce.Size > end {
			break
		}
		if l.planner.ReadThisEpoch(c) || l.have(c) {
			if len(f.IDs) > 0 {
				break
			}
			continue
		}
		size := int64(ce.Size)
		// When the set fits, a sample believed resident but not read this epoch is read all the
		// same (inPageCache), and a warm epoch has no misses. Otherwise the resident subset is
		// left alone.
		if size <= pageSize || size > l.opt.MaxWhole || !l.res.Keeps(c) || l.inPageCache(c) {
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
// worth a read when the set fits: left to its READ, it is a miss after the sweep has passed,
// and at 1 reader those (about 500) read at the end of the epoch took a fifth of it.
func (l *Loader) worthReading(f Fetch, want int64) bool {
	return (len(f.IDs) >= 2 || len(f.IDs) == 1 && l.res.Fits()) && 2*want >= f.Len
}

// sweep keeps maxChunkFlights chunk reads going while the gate is open and no plan is held
// (plans read ahead in their own order): from a cursor that starts again at each epoch and
// each time the gate opens (tick), it reads the samples worth reading in the order of the shards,
// up to ChunkBytes at a time, so that no sample is left out as one across a chunk boundary is
// by aligned chunks. A miss's own read (readChunk) goes first; the sweep fills the flights it
// leaves, so that the device never idles between misses. It runs at each tick and each
// time a chunk read ends, never on a READ's path, and looks at no more than sweepLook reads a
// call (mu held).
//
// Why: with chunk reads started by misses alone, a cold epoch at 1 reader kept 2-4 of the 8
// flights busy, as each miss waited 4-8 ms behind the chunk reads before it and started the
// next (the 2-core VM, 10,000 JPEGs: 266 chunk reads in a 2.6 s epoch, READs waiting 1.5 s of
// it, 3,800 files/s, ext4 3,100-3,900).
func (l *Loader) sweep() {
	if !l.opt.ChunkReads || l.res == nil || !l.chunksOpen.Load() || l.chunkFlights.Load() >= l.maxChunkFlights() {
		return
	}
	// It waits for mu (only READs may not): with 8 readers mu was busy often enough that a
	// sweep that tried it once kept 2 of 8 flights going.
	l.lockPlanner()
	var fetches []Fetch
	if l.planner.PlannedBytes() == 0 && !l.planner.Streaming() {
		if epoch, _, _ := l.planner.Epoch(); epoch != l.sweepEpoch {
			l.sweepEpoch, l.sweepPos = epoch, 0
		}
		room := int(l.maxChunkFlights() - l.chunkFlights.Load())
		for n := 0; n < sweepLook && len(fetches) < room && l.sweepPos < l.x.Files(); n++ {
			first := l.x.Entry(l.x.ByExtent(l.sweepPos))
			f, want, pos := l.chunkFetchFrom(first.Shard, l.sweepPos, first.Offset+uint64(l.opt.ChunkBytes))
			if l.worthReading(f, want) {
				fetches = append(fetches, f)
			}
			l.sweepPos = max(pos, l.sweepPos+1)
		}
	}
	l.unlockPlanner()
	l.chunkFlights.Add(int32(len(fetches)))
	l.stats.chunkReads.Add(uint64(len(fetches)))
	l.queueFetches(fetches)
}

// chunkDone is told that a chunk read is done, its samples pushed: the next may start. A read
// holds its flight until then, so that the flights bound the buffers held too: with 8 flights
// of 4 MiB, freeing one when its bytes were in (pushing 4 MiB takes 2-9 ms of CPU) held up to 16
// buffers, left the daemon 20-25 MB larger in a memory cgroup (a smaller page-cache budget),
// and ran a cold epoch at 1 reader slower (4 passes by hand: 5,274-5,856 files/s against
// 6,064-6,883).
func (l *Loader) chunkDone() {
	l.chunkFlights.Add(-1)
	l.sweep()
}

// sweepLook bounds the reads one sweep looks at, so that it holds mu briefly (each is tens of
// samples to look up).
const sweepLook = 8

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
	ticks  int // ticks since it opened, up to gateSpan
}

const (
	gateSpan        = 100 // ticks (1 s)
	gateOpenTicks   = 2   // ticks (20 ms)
	gateOpenMisses  = 20  // in gateOpenTicks: 1,000 a second
	gateCloseMisses = 250 // in gateSpan: 250 a second
)

// tick takes the Loader's misses counter at a tick and returns whether chunk reads are open.
// Once open, the gate stays open for gateSpan at least: chunk reads slow the misses down
// (a miss waits 5-25 ms behind the chunk reads before it at the device) and make them fewer,
// so the misses of the first ticks after it opens would close it at once, and a whole span
// with no ticks before the epoch's first misses would too.
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
