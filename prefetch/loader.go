package prefetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/ristretto/v2"

	"github.com/aifs/aifs/backend"
	"github.com/aifs/aifs/internal/bitset"
	"github.com/aifs/aifs/internal/flight"
	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/plan"
)

// Options configure a Loader. The zero value means the defaults named.
type Options struct {
	// CacheBytes bounds the sample bytes the Loader holds: fetched ahead and not yet read, plus
	// (with KeepRead) the stable subset kept after reading. Default 1 GiB.
	CacheBytes int64
	// KeepRead keeps a stable subset of the samples read, for the next epochs (the memory
	// cache proper). Without it only samples fetched ahead and not yet read are held: that is
	// right when the kernel page cache keeps what was read (kernel_cache=on).
	KeepRead bool
	// Workers bounds the prefetch reads in flight (default 16); foreground reads are not
	// counted and never wait for them.
	Workers int
	// MaxWhole is the largest sample fetched whole on its first READ (default 16 MiB); a
	// larger one is read READ by READ (ReadRange) and never cached.
	MaxWhole int64
	// Planner bounds the read-ahead decisions.
	Planner PlannerConfig
	// Push, if set, pushes data, the bytes of sample id from offset off to its end, into the
	// kernel's page cache (fs: NOTIFY_STORE) and reports whether the kernel took them; Push
	// must not keep data. The Loader offers it each sample read ahead, except beacons
	// (Planner.IsBeacon) and samples of one page or less, and lets go of those taken: the
	// reader reads them from the page cache with no request at all. It also offers the rest of
	// a sample whose first READ stops short of its end (ReadRange), so that a sample costs one
	// READ whatever the kernel's read-ahead window (push.go).
	Push func(id layout.ID, off int64, data []byte) bool
	// PageCache, with Push and Drop, returns the bytes of sample pages the kernel's page cache
	// may keep (-o page_cache) and where that figure came from, for a Residency policy
	// (residency.go, pagecache.go); readers are the pids of the processes that sent READs
	// lately (ReadRange's reader), whose memory cgroups the page cache is charged to. The Loader calls
	// it when it starts and every second after, from one goroutine. Nil: no limit.
	PageCache func(readers []uint32) (bytes int64, source string)
	// Drop drops sample id's pages from the kernel's page cache (fs: fadvise through the
	// mount, or NOTIFY_INVAL_INODE). With Push, it turns the Residency policy on: the Loader
	// calls it, from one goroutine and never on a READ's path, for the samples the policy lets
	// go. Nil: aifs never drops pages, and the kernel's LRU decides what stays.
	Drop func(id layout.ID)
	// WillNeed, if set, serves the reads ahead on another serving path, one that reads the
	// shards itself: the kernel data plane (package kernel), where the kernel's EROFS serves
	// the files and the Loader never sees a READ. Instead of reading a sample from the shards
	// and pushing it, the Loader asks WillNeed to bring sample id into that path's page cache
	// (readahead(2)) and counts it pushed if it reports so; Seen, not READs, tells the Loader of
	// the samples read, every one of them (no beacons: Policy.SeesEveryRead). With Drop it
	// turns the Residency policy on, as Push does. With wait (a chunk read's), it returns once
	// the sample is read, so that chunk reads' flights bound their reads. Default nil: the FUSE
	// plane.
	WillNeed func(id layout.ID, wait bool) bool
	// Misses, with WillNeed, estimates the samples read on that path that missed the page cache
	// so far (kernel.Plane.Misses): what the READs that miss count on the FUSE plane, to open
	// chunk reads (chunkGate). Each tick counts no more of them than Seen's reads since the last,
	// as the estimate counts whatever else its readers read from storage. Nil: chunk reads do
	// not run on that path.
	Misses func() uint64
	// Quiet, with WillNeed, tells that path to stop (true) or to go on (false) telling of its
	// reads (Seen), which cost its readers and the daemon CPU a read: the Loader stops it once
	// the policy has been settled for quietTicks (Policy.Settled: the set fits and is in the
	// page cache, no plan, no chunk reads), and wakes it once the policy is not settled or the
	// storage under the shards is read (StorageReads: pages evicted, caches dropped, a cold
	// reader). Nil: it always tells (docs/kernel.md, "Quiet").
	Quiet func(bool)
	// StorageReads, with Quiet, returns the bytes read so far from the storage under the
	// shards, by any process.
	StorageReads func() uint64
	// ChunkReads, with the Residency policy on, makes a cold miss read the samples after it that
	// the page cache will keep, up to ChunkBytes, and then the shards in order (chunks.go), in
	// the background, and push them.
	ChunkReads bool
	// ChunkBytes bounds the bytes a chunk read spans (default DefaultChunkBytes, 1 MiB less 8
	// KiB, for local shards read with O_DIRECT; over S3, where a GET costs a round trip, the
	// mount sets 4 MiB).
	ChunkBytes int64
	// StagePlans passes every sample a plan names to its shard's Stage (backend.Stager), so
	// that a disk cache with staging on (-o prefetch_shards=on) stages what this node will
	// read (docs/multinode.md). Every shard opened must then be a backend.Stager: NewLoader
	// refuses a shard that is not. Default off.
	StagePlans bool
	// Verify checks every sample fetched against the checksum the index records for it, before
	// any reader sees it (-o verify=on): one whose bytes differ fails with ErrCorrupt and is
	// not cached. A sample over MaxWhole is read whole once more, in pieces, on its first
	// ReadRange, and is checked again on the next one if it failed.
	Verify bool
}

// ErrCorrupt: a sample's bytes do not match the checksum of the index (Options.Verify).
var ErrCorrupt = errors.New("sample does not match its checksum")

// CheckSample returns an error wrapping ErrCorrupt, naming the sample and where it lies, if sum,
// the checksum of the bytes of sample id (entry e of x) of its shard's kind (layout.Shard.Checksum),
// is not the index's.
func CheckSample(x *layout.Index, id layout.ID, e layout.Entry, sum uint32) error {
	if sum != e.CRC {
		sh := x.Shards()[e.Shard]
		return fmt.Errorf("%s: %w (%s %08x, the index says %08x; %s [%d,+%d))",
			x.Path(id), ErrCorrupt, sh.Checksum, sum, e.CRC, sh.Name, e.Offset, e.Size)
	}
	return nil
}

// DefaultCacheBytes is Options.CacheBytes when not set (-o mem_cache).
const DefaultCacheBytes = 1 << 30

// DefaultWorkers is Options.Workers when not set: as deep as the readers of a DataLoader with
// 8-16 workers.
const DefaultWorkers = 16

// DefaultMaxWhole is Options.MaxWhole when not set.
const DefaultMaxWhole = 16 << 20

// aheadQueueLen bounds the reads ahead queued for the Workers: room for every plan's depth (a
// read that does not fit is shed for good: the Policy does not ask twice); the bytes queued
// are bounded by the budget anyway.
const aheadQueueLen = 1024

// With KeepRead and a set larger than CacheBytes, read-ahead gets 1/aheadShare of CacheBytes,
// at most maxAheadBytes, and the stable subset the rest.
const (
	aheadShare    = 16
	maxAheadBytes = 256 << 20
)

func (o *Options) defaults() {
	if o.CacheBytes <= 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.ChunkBytes <= 0 {
		o.ChunkBytes = DefaultChunkBytes
	}
	if o.MaxWhole <= 0 {
		o.MaxWhole = DefaultMaxWhole
	}
	if o.Planner.MaxFetch <= 0 {
		o.Planner.MaxFetch = backend.MaxView // not the planner's 8 MiB: a coalesced read is lent whole
	}
}

// Loader serves samples to the FUSE layer (ReadRange): whole ones from its memory cache, from
// a fetch already in flight for the same sample (one fetch however many readers wait:
// internal/flight), or by fetching the sample's whole extent from its shard; those over
// MaxWhole range by range from the shard, never cached nor read ahead. It decides nothing
// itself: it tells its Policy (policy.go, through decider.go, which owns the lock) of every
// first READ, plan, push, budget and tick, and carries out the actions it returns: reads
// ahead on Workers goroutines in a bounded queue (ahead.go; one that does not fit in the queue
// or the budget is shed, never waited for), chunk reads (chunks.go), pushes into the page
// cache (push.go) and drops from it (pagecache.go). Files: shared fetches (flights.go), the
// memory budget (budget.go), samples over MaxWhole (large.go), plans written (plan.go), stats
// (stats.go).
//
// Memory: every sample held (cached or fetched ahead) is counted against CacheBytes before it
// is fetched or kept; samples being written to the kernel are held a moment longer by their
// reader. Samples read ahead together share one buffer, freed when the last of them goes.
//
// Cache policy (docs/design.md): a shuffled epoch reads each sample once, so a sample just
// read is the one least likely to be needed soon, and LRU keeps exactly the wrong ones. With
// KeepRead the Loader keeps a stable subset instead: a sample is kept iff its hash ranks below
// (CacheBytes less the read-ahead share, 1/aheadShare) ÷ dataset bytes, the same samples every
// epoch, so the next shuffled epoch hits about that fraction of its reads. A sample fetched
// ahead leaves the cache as soon as it is read unless it belongs to the subset: its next use is
// in the next epoch, the furthest possible, which is eviction by next use once the order is
// known.
//
// All methods are safe for concurrent use. Lock order: the decisions' lock (decider.mu) → a
// flight stripe's lock (flights) or a pending stripe's lock → layout's index block locks
// (decider.go). The lock is never held across a shard read, a push or a drop; it is held while
// the Policy reads index entries, which the first time may read an index block from disk. A
// cache hit waits for no lock but a pending stripe's: it tries the decisions' lock (TryLock)
// once per sample, on its first READ, and leaves the READ pending if it is taken.
type Loader struct {
	x       *layout.Index
	shards  []backend.Shard
	stagers []backend.Stager  // by shard, with StagePlans; nil without
	shardN  map[string]uint32 // shard name → number, for Arrived
	opt     Options

	mem memCache // the memory cache and its budget (budget.go)

	flights flight.Group[layout.ID, *Sample]

	// d owns the mutex and every decision (Policy): what to read ahead, what to read as
	// chunks, what to push, what the page cache keeps and drops. The Loader carries out its
	// actions, never under its lock.
	d decider

	// pageCache: Push and Drop are set, so the page cache's policy is on (Policy.res).
	// readers holds the pids of recent READs (noteReader).
	pageCache    bool
	readers      [8]atomic.Uint32
	chunkFlights atomic.Int32 // chunk reads queued, reading or pushing (chunks.go)
	// seen counts Seen's reads; pathMisses, the misses of another serving path that the gate
	// sees (pathMissesTick), and lastSeen, lastPath their counts at the last tick.
	seen                           atomic.Uint64
	pathMisses, lastSeen, lastPath uint64
	// With Options.Quiet: whether the path is quiet, the ticks the policy has been settled
	// (while not), the storage's bytes read at the last tick, and how many times it went quiet.
	quiet         atomic.Bool
	settledTicks  int
	lastStorage   uint64
	quiets, wakes atomic.Uint64
	maxFlights    int32 // bound of chunkFlights (maxChunkFlights)

	verified bitset.Atomic // with Verify: the samples over MaxWhole whose checksum matched, one bit each
	corrupt  bitset.Atomic // with Verify: the samples found not to match their checksum, one bit each

	queue  fetchQueue // l.work, or the tests' (ahead.go)
	work   workQueue
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	stats     loaderStats
	closeOnce sync.Once
}

// NewLoader opens every shard of x through b and returns a Loader reading the samples of x
// from them. A missing or mismatched shard is an error naming it (backend.Backend.Open), and
// the shards opened are closed again, so a bad shard set is refused before it is mounted. The
// Loader owns the shards and Close closes them; the caller keeps b and closes it after.
func NewLoader(ctx context.Context, x *layout.Index, b backend.Backend, opt Options) (*Loader, error) {
	shards := make([]backend.Shard, 0, len(x.Shards()))
	closeAll := func() {
		for _, sh := range shards {
			sh.Close()
		}
	}
	for _, s := range x.Shards() {
		sh, err := b.Open(ctx, s)
		if err != nil {
			closeAll()
			return nil, err
		}
		shards = append(shards, sh)
	}
	l, err := newLoader(x, shards, opt, tickEvery)
	if err != nil {
		closeAll()
		return nil, err
	}
	return l, nil
}

// newLoader returns a Loader over shards, opened (indexed as x.Shards()), which it owns, whose
// page cache's policy ticks every every (tests that tick by hand pass an hour).
func newLoader(x *layout.Index, shards []backend.Shard, opt Options, every time.Duration) (*Loader, error) {
	opt.defaults()
	l := &Loader{x: x, shards: shards, opt: opt, pageCache: (opt.Push != nil || opt.WillNeed != nil) && opt.Drop != nil}
	l.maxFlights = maxChunkFlights(opt.ChunkBytes)
	l.shardN = make(map[string]uint32, len(x.Shards()))
	for i, s := range x.Shards() {
		l.shardN[s.Name] = uint32(i)
	}
	if opt.StagePlans {
		l.stagers = make([]backend.Stager, len(shards))
		for i, sh := range shards {
			st, ok := sh.(backend.Stager)
			if !ok {
				return nil, fmt.Errorf("prefetch: StagePlans: shard %s does not stage", x.Shards()[i].Name)
			}
			l.stagers[i] = st
		}
	}
	l.mem.keepBudget, l.mem.aheadBudget, l.mem.keepFraction = splitMemory(opt.CacheBytes, int64(x.FileBytes()), opt.KeepRead)
	l.mem.keepRead, l.mem.stats = opt.KeepRead, &l.stats
	if opt.Verify {
		l.verified, l.corrupt = bitset.NewAtomic(x.Len()), bitset.NewAtomic(x.Len())
	}
	items := opt.CacheBytes / (32 << 10) // counters for samples of 32 KiB and up
	cache, err := ristretto.NewCache(&ristretto.Config[uint32, *Sample]{
		NumCounters:        max(10*items, 1<<12),
		MaxCost:            opt.CacheBytes + opt.Planner.MaxFetch, // our own accounting stays below CacheBytes
		BufferItems:        64,
		IgnoreInternalCost: true,
		OnExit:             l.mem.onExit,
	})
	if err != nil {
		return nil, fmt.Errorf("prefetch: %w", err)
	}
	l.mem.cache = cache
	l.flights.Init(func(id layout.ID) uint { return uint(id) })
	l.d = decider{
		p: NewPolicy(x, PolicyConfig{Planner: opt.Planner, MaxWhole: opt.MaxWhole, PageCache: l.pageCache,
			ChunkReads: opt.ChunkReads && (opt.WillNeed == nil || opt.Misses != nil), ChunkBytes: opt.ChunkBytes, SeesEveryRead: opt.WillNeed != nil}),
		parsers: map[uint32]*plan.Parser{},
		have:    l.have,
		busy:    l.flights.Busy,
		room: func() (int64, int64) {
			held := l.mem.aheadBytes.Load()
			return l.mem.aheadBudget - held, held
		},
		queue: l.queueFetches,
	}
	l.work = make(workQueue, aheadQueueLen)
	l.queue = l.work
	l.ctx, l.cancel = context.WithCancel(context.Background())
	for range opt.Workers {
		l.wg.Add(1)
		go l.worker()
	}
	if l.pageCache {
		l.refreshBudget() // before any READ: nothing is resident yet, so nothing is dropped
		l.wg.Add(1)
		go l.residencyLoop(every)
	}
	return l, nil
}

// Close stops prefetching, closes the memory cache and the shards. It is idempotent. Reads
// after Close fail (the shards are closed: fs.ErrClosed).
func (l *Loader) Close() {
	l.closeOnce.Do(func() {
		l.cancel()
		l.wg.Wait()
		l.mem.cache.Close()
		for _, sh := range l.shards {
			sh.Close()
		}
	})
}

// ReadRange returns [off, off+len(p)) of sample id (entry e), which must lie inside it, for a
// READ sent by reader (its pid; 0: not known): lent (v not nil: data lies in v, and the caller
// Releases v once done with data) or read into p (v nil, data is p). It is the only read fs
// makes. A sample up to MaxWhole comes whole through Read (v is its *Sample); a larger one is
// read from the shard, range by range (large.go). cancel (FUSE's interrupt) stops the wait for
// a whole sample that other readers share, not a read from the shard: the error is then
// context.Canceled.
func (l *Loader) ReadRange(cancel <-chan struct{}, reader uint32, id layout.ID, e layout.Entry, off int64, p []byte) (data []byte, v backend.View, err error) {
	l.noteReader(reader)
	end := off + int64(len(p))
	if int64(e.Size) > l.opt.MaxWhole {
		return l.readLarge(id, e, off, p)
	}
	if off == 0 && end < int64(e.Size) && l.opt.Push != nil {
		return l.readHead(cancel, reader, id, e, end)
	}
	s, err := l.Read(cancel, reader, id, e, off, end)
	if err != nil {
		return nil, nil, err
	}
	return s.data[off:end], s, nil
}

// Read returns sample id (entry e), whole, for a READ of [off, end) of it by reader (as for
// ReadRange); the caller Releases it after use. cancel (FUSE's interrupt) stops the wait, not a
// fetch other readers share: the error is then context.Canceled. A sample larger than MaxWhole
// is not read whole: the error wraps errTooLarge (ReadRange reads it).
func (l *Loader) Read(cancel <-chan struct{}, reader uint32, id layout.ID, e layout.Entry, off, end int64) (*Sample, error) {
	if int64(e.Size) > l.opt.MaxWhole {
		return nil, fmt.Errorf("%s: %w", l.x.Path(id), errTooLarge)
	}
	if off == 0 {
		l.d.observe(firstRead{id, reader})
	}
	if s, ok := l.mem.cache.Get(uint32(id)); ok && s.blk.acquire() {
		l.stats.hits.Add(1)
		l.mem.consumed(s, end)
		return s, nil
	}
	l.stats.misses.Add(1)
	f, leader := l.flights.Join(id)
	if !leader {
		l.stats.waits.Add(1)
		return l.wait(id, f, cancel, end)
	}
	if off == 0 && l.opt.ChunkReads && l.pageCache {
		l.readChunk(id, e)
	}
	s, err := l.fetchOne(id, e)
	if err == nil {
		s.blk.refs.Store(1) // ours
		if end < int64(e.Size) && l.mem.reserveAhead(int64(e.Size)) {
			// A READ that stops short of the end (a sample over the kernel's READ size): keep
			// the rest for the READs that follow, which come at once, so wait until the cache
			// shows it (ristretto applies a Set asynchronously) before the flight goes. With a
			// page cache (Push), such a READ is one past a sample's first (readHead pushed the
			// rest, and the kernel evicted part of it), and the READs that would read the kept
			// sample to its end need not come: the kernel may hold the other pages. So the
			// cache keeps an exact copy, not the read's pooled buffer, which can be 8 times the
			// sample. Why: docs/bench/prefetch-notes.md, "Buffers held for READs that never come".
			if l.opt.Push != nil {
				l.mem.cacheCopy(s, false)
			} else {
				l.mem.admit(s, true)
			}
			l.mem.cache.Wait()
		} else {
			l.mem.admit(s, false)
		}
	}
	l.resolve(id, f, s, err)
	return s, err
}

// Seen tells the Loader that reader (a pid; 0: not known) read sample id on another serving
// path (Options.WillNeed), from the page cache or not: the decisions follow it as they follow a
// READ, and reads ahead may start. It takes no lock of a reader's (decider.observe).
func (l *Loader) Seen(reader uint32, id layout.ID) {
	l.seen.Add(1)
	l.noteReader(reader)
	l.d.observe(firstRead{id, reader})
}

// errTooLarge: Read was asked for a sample over MaxWhole.
var errTooLarge = errors.New("prefetch: sample larger than MaxWhole")

// fetchOne reads sample id whole.
func (l *Loader) fetchOne(id layout.ID, e layout.Entry) (*Sample, error) {
	view, data, err := l.readShard(e.Shard, int64(e.Offset), nil, int64(e.Size))
	if err != nil {
		return nil, err
	}
	if err := l.verify(id, e, data); err != nil {
		if view != nil {
			view.Release()
		}
		return nil, err
	}
	return newSample(id, data, view), nil
}

// verify applies Options.Verify to sample id's bytes.
func (l *Loader) verify(id layout.ID, e layout.Entry, data []byte) error {
	if !l.opt.Verify {
		return nil
	}
	return l.check(id, e, l.x.Shards()[e.Shard].Checksum.Sum(data))
}

// check compares sum, the checksum of sample id's bytes (CheckSample), with the index's (Options.Verify). A
// mismatch counts a corrupt read, and a corrupt sample the first time only: a corrupt sample is
// never cached, so each READ of it (the kernel retries one that failed) checks it again.
func (l *Loader) check(id layout.ID, e layout.Entry, sum uint32) error {
	err := CheckSample(l.x, id, e, sum)
	if err != nil {
		l.stats.corruptReads.Add(1)
		if l.corrupt.Add(uint64(id)) {
			l.stats.corrupt.Add(1)
		}
	}
	return err
}

// readShard reads [off, off+n) of a shard, counted in the backend stats: lent by the shard if
// it is a backend.Viewer (view not nil; Release it), else into p if it is not nil (n bytes
// long), else into a new buffer.
func (l *Loader) readShard(shard uint32, off int64, p []byte, n int64) (view backend.View, data []byte, err error) {
	if int(shard) >= len(l.shards) {
		return nil, nil, fmt.Errorf("prefetch: shard %d of %d", shard, len(l.shards))
	}
	sh := l.shards[shard]
	l.stats.backendReads.Add(1)
	l.stats.backendBytes.Add(uint64(n))
	if v, ok := sh.(backend.Viewer); ok {
		view, err := v.View(l.ctx, off, int(n))
		if err != nil {
			return nil, nil, err
		}
		if got := len(view.Bytes()); got != int(n) { // a backend bug: never serve what it lent
			view.Release()
			return nil, nil, fmt.Errorf("prefetch: shard %d [%d,+%d): the backend lent %d bytes: %w", shard, off, n, got, io.ErrUnexpectedEOF)
		}
		return view, view.Bytes(), nil
	}
	if p == nil {
		p = make([]byte, n)
	}
	if err := sh.ReadAt(l.ctx, p, off); err != nil {
		return nil, nil, err
	}
	return nil, p, nil
}

// have reports whether sample id is cached or being fetched: the Policy reads none of those
// ahead. Called under the decisions' lock.
func (l *Loader) have(id layout.ID) bool {
	if _, ok := l.mem.cache.Get(uint32(id)); ok {
		return true
	}
	return l.flights.Busy(id)
}
