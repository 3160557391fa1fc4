package prefetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/ristretto/v2"

	"github.com/aifs/aifs/backend"
	"github.com/aifs/aifs/layout"
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
	// larger one is read READ by READ and never cached.
	MaxWhole int64
	// Planner bounds the read-ahead decisions.
	Planner PlannerConfig
	// Store, if set, is offered each sample read ahead, except beacons (Planner.IsBeacon) and
	// samples of one page or less: fs pushes it into the kernel's page cache (NOTIFY_STORE) and
	// reports whether the kernel took it; if so the Loader lets go of it, and the reader reads
	// it from the page cache with no request at all. Store must not keep data.
	Store func(id layout.ID, data []byte) bool
	// Verify checks every sample fetched against the CRC32C the index records for it, before
	// any reader sees it (-o verify=on): one whose bytes differ fails with ErrCorrupt and is
	// not cached. CRC32C runs at several GB/s per core (SSE4.2), small beside a read.
	Verify bool
}

// ErrCorrupt: a sample's bytes do not match the CRC32C of the index (Options.Verify).
var ErrCorrupt = errors.New("sample does not match its checksum")

// CheckSample returns an error wrapping ErrCorrupt, naming the sample and where it lies, if sum,
// the CRC32C of the bytes of sample id (entry e of x), is not the index's.
func CheckSample(x *layout.Index, id layout.ID, e layout.Entry, sum uint32) error {
	if sum != e.CRC {
		return fmt.Errorf("%s: %w (CRC32C %08x, the index says %08x; %s [%d,+%d))",
			x.Path(id), ErrCorrupt, sum, e.CRC, x.Shards()[e.Shard].Name, e.Offset, e.Size)
	}
	return nil
}

// DefaultCacheBytes is Options.CacheBytes when not set (-o mem_cache).
const DefaultCacheBytes = 1 << 30

func (o *Options) defaults() {
	if o.CacheBytes <= 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	if o.Workers <= 0 {
		o.Workers = 16 // as deep as the readers of a DataLoader with 8-16 workers
	}
	if o.MaxWhole <= 0 {
		o.MaxWhole = 16 << 20
	}
	if o.Planner.MaxFetch <= 0 {
		o.Planner.MaxFetch = 4 << 20 // the local backend's largest pooled buffer
	}
}

// Loader serves whole samples to the FUSE layer: from its memory cache, from a fetch already
// in flight for the same sample (one fetch however many readers wait), or by fetching the
// sample's whole extent from its shard. A Planner, told of every sample read and every plan
// written, decides what to fetch ahead; prefetch runs on Workers goroutines, in a bounded
// queue, and a prefetch that does not fit in the queue or the budget is dropped, never waited
// for.
//
// Memory: every sample held (cached or fetched ahead) is counted against CacheBytes before it
// is fetched or kept; samples being written to the kernel are held a moment longer by their
// reader. Samples read ahead together share one buffer, freed when the last of them goes.
//
// Cache policy (DESIGN.md, "Cache behaviour across epochs"): a shuffled epoch reads each
// sample once, so a sample just read is the one least likely to be needed soon, and LRU keeps
// exactly the wrong ones. With KeepRead the Loader keeps a stable subset instead: a sample is
// kept iff its hash ranks below (CacheBytes less the read-ahead share, 1/16) ÷ dataset bytes, the same samples every epoch, so the next shuffled epoch hits about that
// fraction of its reads. A sample fetched
// ahead is dropped as soon as it is read unless it belongs to the subset: its next use is in
// the next epoch, the furthest possible, which is eviction by next use once the order is known.
//
// All methods are safe for concurrent use. The hot path (a cache hit) takes no lock but the
// planner's, once per sample.
type Loader struct {
	x      *layout.Index
	shards []backend.Shard
	opt    Options

	cache *ristretto.Cache[uint32, *Sample]
	// keepBudget and aheadBudget bound the subset (keptBytes) and read-ahead (aheadBytes);
	// heldBytes, their sum, never exceeds CacheBytes (see take).
	keepBudget, aheadBudget          int64
	keepFraction                     uint64 // a sample is in the subset iff its rank < keepFraction (of 2^64)
	keptBytes, aheadBytes, heldBytes atomic.Int64

	flights [flightShards]flightShard

	mu      sync.Mutex // guards planner, parsers
	planner *Planner
	parsers map[uint32]*planParser
	files   []layout.ID // regular files in pack order, for index plans; built on first use
	filesMu sync.Once

	queue  chan Fetch
	inline bool // tests: run prefetch in plan's caller, so that replays are deterministic
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	stats loaderStats
}

type loaderStats struct {
	hits, misses, waits        atomic.Uint64
	backendBytes, backendReads atomic.Uint64
	aheadUsed, aheadWasted     atomic.Uint64 // bytes
	aheadDropped, aheadIssued  atomic.Uint64 // samples
	planWriteError             atomic.Uint64
	stored                     atomic.Uint64 // samples read ahead into the kernel's page cache
	arrivedStored              atomic.Uint64 // samples put in the kernel's page cache by Arrived
	corrupt                    atomic.Uint64 // samples that failed Options.Verify
}

const flightShards = 64

type flightShard struct {
	mu sync.Mutex
	m  map[layout.ID]*flight
}

// flight is one fetch of a sample in progress. Readers that find it wait for done; the
// fetcher takes a reference for each of them before closing done.
type flight struct {
	done    chan struct{}
	waiters int
	s       *Sample
	err     error
}

// Sample is one sample's bytes, held by reference: Release it exactly once when done.
type Sample struct {
	data []byte
	blk  *block
	id   layout.ID
	// ahead: fetched ahead (or whole for a READ that did not reach its end) and not yet read
	// to the end; counted in aheadBytes. kept: in the subset, counted in keptBytes.
	ahead, kept atomic.Bool
}

// Bytes returns the whole sample.
func (s *Sample) Bytes() []byte { return s.data }

// Release drops the reader's reference.
func (s *Sample) Release() { s.blk.release() }

// block is one buffer read from a shard, shared by the samples in it and freed when the last
// reference goes.
type block struct {
	refs atomic.Int32
	view backend.View // nil when the buffer is plain Go memory
}

func (b *block) acquire() bool {
	for {
		n := b.refs.Load()
		if n <= 0 {
			return false
		}
		if b.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (b *block) release() {
	if b.refs.Add(-1) == 0 && b.view != nil {
		b.view.Release()
	}
}

// NewLoader returns a Loader reading the samples of x from shards (indexed as x.Shards()).
// Close it when done; it does not close the shards.
func NewLoader(x *layout.Index, shards []backend.Shard, opt Options) (*Loader, error) {
	opt.defaults()
	l := &Loader{x: x, shards: shards, opt: opt, parsers: map[uint32]*planParser{}}
	l.aheadBudget = opt.CacheBytes
	if opt.KeepRead {
		var data int64
		for _, s := range x.Shards() {
			data += int64(s.Size)
		}
		// When the dataset fits, all of it is kept and read-ahead gets what is left over.
		// Otherwise read-ahead, which needs little (a plan's depth, a sequential window),
		// gets 1/16 of the budget (at most 256 MiB) and the subset, which sets the next
		// epoch's hit rate, the rest.
		l.keepFraction = ^uint64(0)
		l.keepBudget = data
		l.aheadBudget = opt.CacheBytes - data
		if data > opt.CacheBytes {
			l.aheadBudget = min(opt.CacheBytes/16, 256<<20)
			l.keepBudget = opt.CacheBytes - l.aheadBudget
			l.keepFraction = uint64(float64(l.keepBudget) / float64(data) * (1 << 64))
		}
	}
	items := opt.CacheBytes / (32 << 10) // counters for samples of 32 KiB and up
	cache, err := ristretto.NewCache(&ristretto.Config[uint32, *Sample]{
		NumCounters:        max(10*items, 1<<12),
		MaxCost:            opt.CacheBytes + opt.Planner.MaxFetch, // our own accounting stays below CacheBytes
		BufferItems:        64,
		IgnoreInternalCost: true,
		OnExit:             l.onExit,
	})
	if err != nil {
		return nil, fmt.Errorf("prefetch: %w", err)
	}
	l.cache = cache
	for i := range l.flights {
		l.flights[i].m = map[layout.ID]*flight{}
	}
	l.planner = NewPlanner(x, opt.Planner)
	// Room for every plan's depth: a fetch that does not fit is dropped for good (the
	// planner does not ask twice), and the bytes queued are bounded by the budget anyway.
	l.queue = make(chan Fetch, 1024)
	l.ctx, l.cancel = context.WithCancel(context.Background())
	for range opt.Workers {
		l.wg.Add(1)
		go l.worker()
	}
	return l, nil
}

// Close stops prefetching and drops the cache. Reads after Close may fail.
func (l *Loader) Close() {
	l.cancel()
	l.wg.Wait()
	l.cache.Close()
}

// rank places a sample in [0, 2^64) by a hash of its id (splitmix64), so the subset is the
// same every epoch and every run.
func rank(id layout.ID) uint64 {
	z := uint64(id) + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// onExit runs when the cache lets go of a sample (deleted, evicted, rejected or replaced).
func (l *Loader) onExit(s *Sample) {
	if s == nil {
		return
	}
	size := int64(len(s.data))
	if s.ahead.Swap(false) {
		l.give(&l.aheadBytes, size)
		l.stats.aheadWasted.Add(uint64(size))
	}
	if s.kept.Swap(false) {
		l.give(&l.keptBytes, size)
	}
	s.blk.release()
}

// Read returns sample id (entry e), whole, for a READ of [off, end) of it; the caller Releases
// it after use. cancel (FUSE's interrupt) stops the wait, not a fetch other readers share: the
// error is then context.Canceled. Samples larger than MaxWhole return errTooLarge.
func (l *Loader) Read(cancel <-chan struct{}, id layout.ID, e layout.Entry, off, end int64) (*Sample, error) {
	if int64(e.Size) > l.opt.MaxWhole {
		return nil, errTooLarge
	}
	if off == 0 {
		l.observe(id)
	}
	if s, ok := l.cache.Get(uint32(id)); ok && s.blk.acquire() {
		l.stats.hits.Add(1)
		l.consumed(s, end)
		return s, nil
	}
	l.stats.misses.Add(1)
	fs := &l.flights[id%flightShards]
	fs.mu.Lock()
	if f := fs.m[id]; f != nil {
		f.waiters++
		fs.mu.Unlock()
		l.stats.waits.Add(1)
		return l.wait(fs, id, f, cancel, end)
	}
	f := &flight{done: make(chan struct{})}
	fs.m[id] = f
	fs.mu.Unlock()

	s, err := l.fetchOne(id, e)
	if err == nil {
		s.blk.refs.Store(1) // ours
		if end < int64(e.Size) && l.reserveAhead(int64(e.Size)) {
			// A READ that stops short of the end (a sample over the kernel's READ size): keep
			// the rest for the READs that follow, which come at once, so wait until the cache
			// shows it (ristretto applies a Set asynchronously) before the flight goes.
			l.admit(s, true)
			l.cache.Wait()
		} else {
			l.admit(s, false)
		}
	}
	l.resolve(fs, id, f, s, err)
	return s, err
}

// errTooLarge says a sample is read READ by READ (fs falls back to the shard).
var errTooLarge = errors.New("prefetch: sample larger than MaxWhole")

// IsTooLarge reports whether err means the sample must be read from the shard directly.
func IsTooLarge(err error) bool { return errors.Is(err, errTooLarge) }

// wait waits for flight f of sample id, which counted this reader among its waiters.
func (l *Loader) wait(fs *flightShard, id layout.ID, f *flight, cancel <-chan struct{}, end int64) (*Sample, error) {
	select {
	case <-f.done:
	case <-cancel:
		fs.mu.Lock()
		if fs.m[id] == f { // not resolved: withdraw
			f.waiters--
			fs.mu.Unlock()
			return nil, context.Canceled
		}
		fs.mu.Unlock()
		<-f.done // resolved already: a reference was taken for us
		if f.s != nil {
			f.s.Release()
		}
		return nil, context.Canceled
	}
	if f.err != nil {
		return nil, f.err
	}
	l.consumed(f.s, end)
	return f.s, nil
}

// resolve ends flight f: it takes a reference to s for each waiter, then wakes them.
func (l *Loader) resolve(fs *flightShard, id layout.ID, f *flight, s *Sample, err error) {
	fs.mu.Lock()
	delete(fs.m, id)
	if s != nil && f.waiters > 0 {
		s.blk.refs.Add(int32(f.waiters))
	}
	fs.mu.Unlock()
	f.s, f.err = s, err
	close(f.done)
}

// consumed notes that a reader read s up to end: a sample fetched ahead that is now read to
// its end leaves the read-ahead budget, and the cache unless it is in the subset.
func (l *Loader) consumed(s *Sample, end int64) {
	if end < int64(len(s.data)) || !s.ahead.Load() {
		return
	}
	if !s.ahead.Swap(false) {
		return
	}
	size := int64(len(s.data))
	l.give(&l.aheadBytes, size)
	l.stats.aheadUsed.Add(uint64(size))
	if !l.reserveKeep(s.id, size) {
		l.cache.Del(uint32(s.id))
		return
	}
	// Into the subset, as a copy of its own (the cache lets go of s, and s's buffer goes with
	// its last reader).
	l.keepCopy(s)
}

// keepCopy puts into the cache, as kept, an exact-size copy of s (whose keptBytes are already
// counted). A kept sample lives for epochs: it must not pin a pooled read buffer of the next
// size class (a 130 KB sample in a 1 MiB buffer) or the neighbours it was read ahead with,
// which the budget, counting sample bytes, would not see.
func (l *Loader) keepCopy(s *Sample) {
	own := &Sample{data: bytes.Clone(s.data), blk: &block{}, id: s.id}
	own.blk.refs.Store(1) // the cache's
	own.kept.Store(true)
	if !l.cache.Set(uint32(s.id), own, int64(len(s.data))) {
		l.onExit(own)
	}
}

// admit offers s, fetched for a reader who holds a reference, to the cache: as read-ahead
// (already reserved; it may join the subset once read, see consumed) or, with KeepRead, to
// the subset if it belongs there and fits.
func (l *Loader) admit(s *Sample, ahead bool) {
	size := int64(len(s.data))
	if !ahead {
		if l.reserveKeep(s.id, size) {
			l.keepCopy(s)
		}
		return
	}
	s.ahead.Store(true)
	s.blk.refs.Add(1) // the cache's
	if !l.cache.Set(uint32(s.id), s, size) {
		l.onExit(s)
	}
}

// reserveAhead counts n bytes of read-ahead against the budget, or reports that they do not fit.
func (l *Loader) reserveAhead(n int64) bool { return l.take(&l.aheadBytes, l.aheadBudget, n) }

// reserveKeep counts sample id of n bytes into the subset if it belongs there and fits.
func (l *Loader) reserveKeep(id layout.ID, n int64) bool {
	if !l.opt.KeepRead || rank(id) >= l.keepFraction {
		return false
	}
	return l.take(&l.keptBytes, l.keepBudget, n)
}

// take counts n bytes into part (aheadBytes or keptBytes), which holds at most limit, and into
// heldBytes, or reports that they do not fit. heldBytes never exceeds CacheBytes, not even for
// a moment (the stats file and the tests read it while readers run); part may, briefly, while
// a reservation that does not fit is undone.
func (l *Loader) take(part *atomic.Int64, limit, n int64) bool {
	if part.Add(n) > limit {
		part.Add(-n)
		return false
	}
	for {
		h := l.heldBytes.Load()
		if h+n > l.opt.CacheBytes {
			part.Add(-n)
			return false
		}
		if l.heldBytes.CompareAndSwap(h, h+n) {
			return true
		}
	}
}

// give returns n bytes that take counted into part.
func (l *Loader) give(part *atomic.Int64, n int64) {
	part.Add(-n)
	l.heldBytes.Add(-n)
}

// fetchOne reads sample id whole.
func (l *Loader) fetchOne(id layout.ID, e layout.Entry) (*Sample, error) {
	blk, data, err := l.readBlock(e.Shard, int64(e.Offset), int64(e.Size))
	if err != nil {
		return nil, err
	}
	if err := l.verify(id, e, data); err != nil {
		blk.refs.Store(1)
		blk.release()
		return nil, err
	}
	return &Sample{data: data, blk: blk, id: id}, nil
}

// verify applies Options.Verify to sample id's bytes.
func (l *Loader) verify(id layout.ID, e layout.Entry, data []byte) error {
	if !l.opt.Verify {
		return nil
	}
	err := CheckSample(l.x, id, e, layout.Checksum(data))
	if err != nil {
		l.CountCorrupt()
	}
	return err
}

// CountCorrupt counts a sample that failed its checksum outside the Loader (fs checks the
// samples over MaxWhole) in Stats.Backend.Corrupt.
func (l *Loader) CountCorrupt() { l.stats.corrupt.Add(1) }

// readBlock reads [off, off+n) of a shard into a new block (no references yet).
func (l *Loader) readBlock(shard uint32, off, n int64) (*block, []byte, error) {
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
		return &block{view: view}, view.Bytes(), nil
	}
	buf := make([]byte, n)
	if err := sh.ReadAt(l.ctx, buf, off); err != nil {
		return nil, nil, err
	}
	return &block{}, buf, nil
}

// observe tells the planner of a sample's first READ and queues what it asks for.
func (l *Loader) observe(id layout.ID) {
	l.mu.Lock()
	l.planner.Read(id)
	fetches := l.nextLocked()
	l.mu.Unlock()
	l.queueFetches(fetches)
}

// nextLocked asks the planner, under l.mu, for the fetches that fit the read-ahead budget.
func (l *Loader) nextLocked() []Fetch {
	room := min(l.aheadBudget-l.aheadBytes.Load(), l.opt.CacheBytes-l.heldBytes.Load())
	if room <= 0 {
		return nil
	}
	return l.planner.Next(room, l.have)
}

// queueFetches reserves each fetch's bytes and queues it; what does not fit in the budget or
// the queue is dropped (and its reservation returned).
func (l *Loader) queueFetches(fetches []Fetch) {
	for _, f := range fetches {
		var n int64
		for _, id := range f.IDs {
			n += int64(l.x.Entry(id).Size)
		}
		if !l.reserveAhead(n) {
			l.stats.aheadDropped.Add(uint64(len(f.IDs)))
			continue
		}
		if l.inline {
			l.stats.aheadIssued.Add(uint64(len(f.IDs)))
			l.prefetch(f)
			continue
		}
		select {
		case l.queue <- f:
			l.stats.aheadIssued.Add(uint64(len(f.IDs)))
		default:
			l.give(&l.aheadBytes, n)
			l.stats.aheadDropped.Add(uint64(len(f.IDs)))
		}
	}
}

// have reports whether sample id is cached or being fetched.
func (l *Loader) have(id layout.ID) bool {
	if _, ok := l.cache.Get(uint32(id)); ok {
		return true
	}
	fs := &l.flights[id%flightShards]
	fs.mu.Lock()
	_, ok := fs.m[id]
	fs.mu.Unlock()
	return ok
}

func (l *Loader) worker() {
	defer l.wg.Done()
	for {
		select {
		case <-l.ctx.Done():
			return
		case f := <-l.queue:
			l.prefetch(f)
		}
	}
}

// prefetch runs one read the planner asked for, whose bytes were reserved in aheadBytes:
// samples that another fetch took meanwhile are skipped, the rest become cached read-ahead.
func (l *Loader) prefetch(f Fetch) {
	type claim struct {
		id layout.ID
		fs *flightShard
		f  *flight
	}
	claims := make([]claim, 0, len(f.IDs))
	var unclaimed int64
	l.mu.Lock()
	late := make([]bool, len(f.IDs))
	for i, id := range f.IDs {
		late[i] = l.planner.ReadThisEpoch(id)
	}
	l.mu.Unlock()
	for i, id := range f.IDs {
		fs := &l.flights[id%flightShards]
		fs.mu.Lock()
		if _, busy := fs.m[id]; busy || late[i] { // being fetched, or the readers got there first
			fs.mu.Unlock()
			unclaimed += int64(l.x.Entry(id).Size)
			continue
		}
		fl := &flight{done: make(chan struct{})}
		fs.m[id] = fl
		fs.mu.Unlock()
		claims = append(claims, claim{id, fs, fl})
	}
	l.give(&l.aheadBytes, unclaimed)
	if len(claims) == 0 {
		return
	}
	blk, data, err := l.readBlock(f.Shard, f.Off, f.Len)
	if err != nil {
		for _, c := range claims {
			l.give(&l.aheadBytes, int64(l.x.Entry(c.id).Size))
			l.resolve(c.fs, c.id, c.f, nil, fmt.Errorf("read ahead: %w", err))
		}
		return
	}
	blk.refs.Store(1) // ours, while we hand out samples
	samples := make([]*Sample, len(claims))
	for i, c := range claims {
		e := l.x.Entry(c.id)
		lo := int64(e.Offset) - f.Off
		if err := l.verify(c.id, e, data[lo:lo+int64(e.Size)]); err != nil {
			l.give(&l.aheadBytes, int64(e.Size))
			l.resolve(c.fs, c.id, c.f, nil, fmt.Errorf("read ahead: %w", err))
			claims[i].f = nil // resolved
			continue
		}
		s := &Sample{data: data[lo : lo+int64(e.Size) : lo+int64(e.Size)], blk: blk, id: c.id}
		s.ahead.Store(true)
		s.blk.refs.Add(1) // the cache's
		if !l.cache.Set(uint32(c.id), s, int64(e.Size)) {
			l.onExit(s)
		}
		samples[i] = s
	}
	// ristretto applies Sets asynchronously: the flights stay until the cache shows the
	// samples, so that a reader never finds neither and fetches again.
	l.cache.Wait()
	for i, c := range claims {
		if c.f != nil {
			l.resolve(c.fs, c.id, c.f, samples[i], nil)
		}
	}
	// Only after the flights are resolved: a reader may hold a file's pages locked while its
	// READ waits for a flight, and the kernel locks those pages to store into them.
	if l.opt.Store != nil {
		// Beacons (Planner.IsBeacon) still come as a READ, so that the planner sees how far
		// the readers have got and keeps reading ahead of them.
		l.mu.Lock()
		for i, s := range samples {
			if s != nil && l.planner.IsBeacon(s.id) {
				samples[i] = nil
			}
		}
		l.mu.Unlock()
		for _, s := range samples {
			if s != nil && len(s.data) > pageSize && l.opt.Store(s.id, s.data) {
				l.stats.stored.Add(1)
				l.mu.Lock()
				l.planner.Delivered(s.id)
				l.mu.Unlock()
				l.consumed(s, int64(len(s.data)))
			}
		}
	}
	blk.release()
}

// Arrived is told that bytes data of shard, from offset off, have just come from a slow source
// (a chunk the disk cache fetched from S3 for a reader). With Options.Store it pushes into the
// kernel's page cache each sample lying wholly inside them that this epoch has not read and
// that is neither cached nor being fetched: a shuffled epoch reads every sample once, so the
// other samples of a chunk fetched for one of them are read later in the same epoch, and from
// the page cache they cost no request, no read of the disk cache and no wait. Samples of one
// page or less, and the beacons of a plan (Planner.IsPlanBeacon), are left to their READ, as
// in read-ahead. Call it after the readers waiting
// for these bytes were woken: the kernel locks a file's pages to store into them, and a READ
// holding them must be able to finish. It runs on the caller's goroutine; data is not kept.
func (l *Loader) Arrived(shard uint32, off int64, data []byte) {
	if l.opt.Store == nil || off < 0 || len(data) == 0 {
		return
	}
	end := uint64(off) + uint64(len(data))
	n := layout.ID(l.x.Len())
	var ids []layout.ID
	l.mu.Lock()
	for id := l.x.FirstFileAt(shard, uint64(off)); id < n; id++ {
		e := l.x.Entry(id)
		if e.IsDir() {
			continue
		}
		if e.Shard != shard || e.Offset+e.Size > end {
			break
		}
		if e.Size > pageSize && !l.planner.ReadThisEpoch(id) && !l.planner.IsPlanBeacon(id) && !l.have(id) {
			ids = append(ids, id)
		}
	}
	l.mu.Unlock()
	for _, id := range ids {
		e := l.x.Entry(id)
		b := data[e.Offset-uint64(off) : e.Offset-uint64(off)+e.Size]
		if l.verify(id, e, b) != nil || !l.opt.Store(id, b) {
			continue // its READ fetches it, and reports a corrupt one
		}
		l.stats.arrivedStored.Add(1)
		l.mu.Lock()
		l.planner.Delivered(id)
		l.mu.Unlock()
	}
}

// pageSize is the kernel's page: a sample of one page costs one READ either way.
const pageSize = 4096

// Stats is a snapshot of the Loader's counters, as they appear in the stats file.
type Stats struct {
	Cache    CacheStats     `json:"cache"`
	Backend  BackendStats   `json:"backend"`
	Prefetch PrefetchStats  `json:"prefetch"`
	Epoch    EpochStats     `json:"epoch"`
	Plans    []PlanPosition `json:"plans"` // one per writer
}

// CacheStats count samples found in memory (hits: cached or fetched ahead), not found
// (misses), and found being fetched by another reader (shared, among the misses).
type CacheStats struct {
	Hits        uint64 `json:"hits"`
	Misses      uint64 `json:"misses"`
	Shared      uint64 `json:"shared"`
	KeptBytes   int64  `json:"kept_bytes"` // the stable subset (kernel_cache=off)
	BudgetBytes int64  `json:"budget_bytes"`
}

// BackendStats count the reads sent to the shards, and the samples they returned that failed
// Options.Verify.
type BackendStats struct {
	Reads   uint64 `json:"reads"`
	Bytes   uint64 `json:"bytes"`
	Corrupt uint64 `json:"corrupt"`
}

// PrefetchStats count read-ahead: samples queued and dropped (queue or budget full), bytes
// held now, and bytes later read (used) or let go unread (wasted).
type PrefetchStats struct {
	Issued      uint64 `json:"issued"`
	Dropped     uint64 `json:"dropped"`
	HeldBytes   int64  `json:"held_bytes"`
	UsedBytes   uint64 `json:"used_bytes"`
	WastedBytes uint64 `json:"wasted_bytes"`
	QueueDepth  int    `json:"queue_depth"`
	Stored      uint64 `json:"stored"`  // samples read ahead into the kernel's page cache
	Arrived     uint64 `json:"arrived"` // samples put in the page cache as their chunk arrived (Loader.Arrived)
	// DroppedEarly counts the samples stored or arrived that came as a READ all the same: the
	// kernel dropped their pages before the reader came (memory pressure). A large share of
	// Stored+Arrived says that the page cache cannot hold what is pushed ahead (push_chunks=off).
	DroppedEarly uint64 `json:"dropped_early"`
	PlanErrors   uint64 `json:"plan_errors"` // plan writes refused (EINVAL)
}

// EpochStats say which epoch the reads are in and what fraction of the files it has read.
type EpochStats struct {
	Number   int     `json:"number"`
	Coverage float64 `json:"coverage"`
}

// Stats returns the current counters.
func (l *Loader) Stats() Stats {
	l.mu.Lock()
	epoch, covered, files := l.planner.Epoch()
	plans := l.planner.Plans()
	dropped := l.planner.DroppedDelivered()
	l.mu.Unlock()
	st := &l.stats
	s := Stats{
		Cache: CacheStats{Hits: st.hits.Load(), Misses: st.misses.Load(), Shared: st.waits.Load(),
			KeptBytes: l.keptBytes.Load(), BudgetBytes: l.opt.CacheBytes},
		Backend: BackendStats{Reads: st.backendReads.Load(), Bytes: st.backendBytes.Load(), Corrupt: st.corrupt.Load()},
		Prefetch: PrefetchStats{Issued: st.aheadIssued.Load(), Dropped: st.aheadDropped.Load(),
			HeldBytes: l.aheadBytes.Load(), UsedBytes: st.aheadUsed.Load(), WastedBytes: st.aheadWasted.Load(),
			QueueDepth: len(l.queue), PlanErrors: st.planWriteError.Load(), Stored: st.stored.Load(), Arrived: st.arrivedStored.Load(),
			DroppedEarly: dropped},
		Epoch: EpochStats{Number: epoch},
		Plans: plans,
	}
	if files > 0 {
		s.Epoch.Coverage = float64(covered) / float64(files)
	}
	return s
}

// WritePlan takes bytes written at offset off of the plan file by writer (see the plan format
// in plan.go): off 0 starts the writer's new plan. The samples are planned as they arrive.
// An error wraps ErrBadPlan; the samples before the bad line stay planned.
func (l *Loader) WritePlan(writer uint32, off int64, data []byte) error {
	l.mu.Lock()
	pp := l.parsers[writer]
	if pp == nil || off == 0 {
		if pp == nil && len(l.parsers) >= maxWriters {
			clear(l.parsers) // writers come and go with training runs; a writer mid-plan restarts
		}
		pp = &planParser{}
		l.parsers[writer] = pp
	}
	fresh := off == 0
	ids, err := pp.parse(l.x, l.fileIDs, data, nil)
	if fresh {
		l.planner.SetPlan(writer, ids)
	} else {
		l.planner.AppendPlan(writer, ids)
	}
	if err != nil {
		delete(l.parsers, writer)
	}
	fetches := l.nextLocked()
	l.mu.Unlock()
	if err != nil {
		l.stats.planWriteError.Add(1)
	}
	l.queueFetches(fetches)
	return err
}

// fileIDs returns the regular files in pack order (built once).
func (l *Loader) fileIDs() []layout.ID {
	l.filesMu.Do(func() {
		for id := range l.x.Len() {
			if !l.x.Entry(layout.ID(id)).IsDir() {
				l.files = append(l.files, layout.ID(id))
			}
		}
	})
	return l.files
}
