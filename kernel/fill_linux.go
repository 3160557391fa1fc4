package kernel

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aifs/aifs/internal/bitset"
	"github.com/aifs/aifs/internal/flight"
	"github.com/aifs/aifs/internal/latency"
	"github.com/aifs/aifs/internal/subset"
)

// Fetch reads len(p) bytes of shard at offset off from where the shards lie (S3): the bytes a
// Filler writes into its sparse copy. An error fails the reads that wait for them with EIO.
type Fetch func(ctx context.Context, shard int, off int64, p []byte) error

// Filler keeps local sparse copies of a set's shards, the kernel plane's devices where the
// shards lie in S3, and fills their holes chunk by chunk before any read of them proceeds. Each
// copy with holes is marked for fanotify's pre-content event (FAN_PRE_ACCESS, Linux 6.14+):
// whoever reads it (EROFS, in the reader's own time) waits, with the range, until Run has
// fetched the chunks the range covers (Fetch), written them and allowed the read, or failed it
// with EIO where they could not be fetched or written. Ranges already filled are allowed at
// once; a copy filled whole loses its mark, and its reads reach the Filler no more. While the
// Filler's group lives no read is given a hole's zeros: see docs/kernel.md, "The plane over S3",
// for what happens when it ends.
//
// The copies must be opened by EROFS after NewFiller has marked them (a descriptor opened
// before a mark raises no event). Which chunks are filled is kept in a file beside each copy
// (Persist), written only after the copy's data is on disk, so a chunk filled since the last
// Persist is a hole again after a crash, never a chunk of zeros taken for filled.
type Filler struct {
	fan    int
	opt    FillOptions
	shards []*sparseShard
	byIno  map[[2]uint64]int // shard by the copy's device and inode
	flying flight.Group[chunkKey, struct{}]
	self   uint32 // this process's pid: its reads (the Loader's reads ahead) are fills ahead

	mu sync.Mutex // guards marks and persists

	filled  atomic.Int64      // bytes of the chunks filled
	keepMax atomic.Uint64     // the highest rank evict kept: a chunk ranked above it is read through when the budget is full
	stageQ  chan *sparseShard // copies with chunks to stage (Stage, StageShards)
	planned atomic.Bool       // Stage has been called: reads no longer stage whole copies

	// Counters for Stats.
	events, waited, failed, whole  atomic.Uint64
	orphans                        atomic.Uint64
	demand, demandBytes            atomic.Uint64
	ahead, aheadBytes              atomic.Uint64
	punched, punchedBytes, punchFl atomic.Uint64
	through, throughBytes          atomic.Uint64
	wait                           latency.Histogram // ns a read waited for its chunks
}

// FillOptions configure a Filler.
type FillOptions struct {
	// Chunk is the unit fetched, recorded and punched, in bytes: a multiple of the page size.
	Chunk int64
	// Budget bounds the bytes of filled chunks kept on disk (the disk cache's size); 0: no
	// bound. Over it, the chunks of highest rank (the stable subset's order, as the disk cache
	// keeps) are punched out again down to it, and chunks ranked above the highest kept are read
	// through (fill); see evict.
	Budget int64
	// Grace is how long after the last read allowed over a chunk, and after its copy was marked
	// again, its hole may be punched (DefaultGrace when 0). A read the Filler has allowed takes
	// the copy's inode lock as soon as its thread runs again, and a punch waits for that lock
	// and for the direct I/O under it (ext4, XFS); the grace is the time that thread may wait
	// for a CPU, microseconds to milliseconds on a loaded machine, many times over.
	Grace time.Duration
	// StageShards fills a copy whole in the background once it is first read, until Stage is
	// first called (a plan says what this node reads): prefetch_shards, as the disk cache.
	StageShards bool
	Fetch       Fetch
}

// DefaultGrace is FillOptions.Grace's default.
const DefaultGrace = time.Second

// sparseShard is the local copy of one shard.
type sparseShard struct {
	path     string
	size     int64
	f        *os.File        // opened read-write before the mark: its writes raise no event
	filled   bitset.Atomic   // a bit per chunk
	holes    atomic.Int64    // chunks not filled
	marked   bool            // under Filler.mu
	markedAt time.Time       // under Filler.mu: when it was last marked
	dirty    atomic.Bool     // chunks filled or punched since the last Persist
	used     []atomic.Int64  // a chunk's last read allowed or fill, in Unix ns
	wmu      sync.Mutex      // orders a chunk's write and its punch
	index    int             // the shard's number
	through  bitset.Atomic   // chunks holding ranges written for reads only, not filled (fillThrough)
	gen      []atomic.Uint32 // a chunk's take-backs of its through ranges
	want     bitset.Atomic   // chunks to stage
	queued   atomic.Bool     // in Filler.stageQ
	touched  atomic.Bool     // read once (StageShards)
}

// chunkKey names a chunk of a shard.
type chunkKey struct {
	shard int
	chunk int64
}

// FillStats are a Filler's counters: pre-content events (reads that reached the Filler), those
// that waited for a fetch and how long (p50, p99), chunks fetched and their bytes for readers
// (on demand) and for the daemon's reads ahead (plans, the sweep), reads failed with EIO, copies
// whole, reads a dead daemon left unanswered (failed by AdoptFiller), chunks punched out (and punches that failed), and the bytes filled against the budget.
type FillStats struct {
	Events       uint64  `json:"events"`
	Waited       uint64  `json:"waited"`
	WaitP50us    float64 `json:"wait_p50_us"`
	WaitP99us    float64 `json:"wait_p99_us"`
	Demand       uint64  `json:"demand_chunks"`
	DemandBytes  uint64  `json:"demand_bytes"`
	Ahead        uint64  `json:"ahead_chunks"`
	AheadBytes   uint64  `json:"ahead_bytes"`
	Failed       uint64  `json:"failed"`
	Orphans      uint64  `json:"orphans"`
	Whole        uint64  `json:"whole_shards"`
	Punched      uint64  `json:"punched_chunks"`
	PunchedBytes uint64  `json:"punched_bytes"`
	PunchFailed  uint64  `json:"punch_failed"`
	Through      uint64  `json:"through_reads"`
	ThroughBytes uint64  `json:"through_bytes"`
	FilledBytes  int64   `json:"filled_bytes"`
	BudgetBytes  int64   `json:"budget_bytes"`
}

// FilledSuffix names the file beside a copy that records its filled chunks.
const FilledSuffix = ".filled"

// NewFiller opens (or creates, sparse, of the given sizes) the copies at paths, reads which of
// their chunks are filled, and marks those with holes. It returns an error wrapping
// ErrUnsupported where the kernel has no pre-content events.
func NewFiller(paths []string, sizes []int64, opt FillOptions) (*Filler, error) {
	if err := opt.check(); err != nil {
		return nil, err
	}
	fan, err := unix.FanotifyInit(unix.FAN_CLASS_PRE_CONTENT|unix.FAN_CLOEXEC|unix.FAN_UNLIMITED_QUEUE|unix.FAN_NONBLOCK,
		unix.O_RDONLY|unix.O_LARGEFILE|unix.O_CLOEXEC)
	if err != nil {
		if errors.Is(err, unix.EINVAL) {
			return nil, fmt.Errorf("%w: the kernel has no fanotify pre-content events (Linux 6.14+, CONFIG_FANOTIFY_ACCESS_PERMISSIONS): %v", ErrUnsupported, err)
		}
		return nil, fmt.Errorf("fanotify_init: %w", err)
	}
	fl := newFiller(fan, opt)
	for i, p := range paths {
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
		if err == nil {
			err = fl.add(p, f, sizes[i], true)
		}
		if err != nil {
			fl.Close()
			return nil, fmt.Errorf("kernel: sparse shard: %w", err)
		}
	}
	return fl, nil
}

// AdoptFiller takes over the Filler of a daemon that died (docs/kernel.md, "Daemon restarts"):
// fan is its fanotify group and files its copies, opened before their marks (both kept across
// the restart by the keeper), which must be the files at paths. It marks again the copies the
// records beside them say have holes, and answers the reads the dead daemon took and left
// unanswered with EIO: their ranges died with it, and a read allowed so might get a hole's
// zeros. Reads its predecessor had not yet taken wait for Run.
func AdoptFiller(fan int, files []*os.File, paths []string, sizes []int64, opt FillOptions) (*Filler, error) {
	if err := opt.check(); err != nil {
		return nil, err
	}
	if len(files) != len(paths) {
		return nil, fmt.Errorf("kernel: %d sparse shards handed over for %d shards", len(files), len(paths))
	}
	if err := unix.SetNonblock(fan, true); err != nil { // a keeper passing it on may have made it blocking
		return nil, fmt.Errorf("kernel: the fanotify group handed over: %w", err)
	}
	fl := newFiller(fan, opt)
	for i, p := range paths {
		var held, there unix.Stat_t
		if err := unix.Fstat(int(files[i].Fd()), &held); err != nil {
			return nil, fmt.Errorf("kernel: sparse shard %s: %w", p, err)
		}
		if err := unix.Stat(p, &there); err != nil || held.Dev != there.Dev || held.Ino != there.Ino || held.Size != sizes[i] {
			return nil, fmt.Errorf("kernel: the sparse shard handed over is not %s of %d bytes (replaced or truncated since)", p, sizes[i])
		}
		if err := fl.add(p, files[i], sizes[i], false); err != nil {
			return nil, err
		}
	}
	fl.answerOrphans()
	return fl, nil
}

func (o *FillOptions) check() error {
	if o.Chunk <= 0 || o.Chunk%int64(unix.Getpagesize()) != 0 {
		return fmt.Errorf("kernel: fill chunk %d is not a multiple of the page size", o.Chunk)
	}
	if o.Grace == 0 {
		o.Grace = DefaultGrace
	}
	return nil
}

func newFiller(fan int, opt FillOptions) *Filler {
	fl := &Filler{fan: fan, opt: opt, byIno: map[[2]uint64]int{}, self: uint32(os.Getpid()), stageQ: make(chan *sparseShard, stageQueue)}
	fl.keepMax.Store(^uint64(0))
	fl.flying.Init(func(k chunkKey) uint { return uint(k.shard)*31 + uint(k.chunk) })
	return fl
}

// add takes the copy f at path as the next shard, of size bytes (with fresh, it is made that
// size: a new copy, or one of another size, is all holes again), reads its record of filled
// chunks, and marks it if it has holes. It owns f from then on.
func (fl *Filler) add(path string, f *os.File, size int64, fresh bool) error {
	chunk := fl.opt.Chunk
	s := &sparseShard{path: path, size: size, f: f}
	fl.shards = append(fl.shards, s)
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("kernel: stat %s: %w", path, err)
	}
	if fresh && st.Size != size {
		if err := f.Truncate(size); err != nil {
			return fmt.Errorf("kernel: sparse shard %s: %w", path, err)
		}
		os.Remove(path + FilledSuffix)
	}
	fl.byIno[[2]uint64{st.Dev, st.Ino}] = len(fl.shards) - 1
	n := (size + chunk - 1) / chunk
	s.filled, s.used, s.want, s.index = bitset.NewAtomic(int(n)), make([]atomic.Int64, n), bitset.NewAtomic(int(n)), len(fl.shards)-1
	s.through, s.gen = bitset.NewAtomic(int(n)), make([]atomic.Uint32, n)
	s.holes.Store(n)
	if b, err := os.ReadFile(path + FilledSuffix); err == nil && int64(len(b)) == (n+7)/8 {
		for i := range n {
			if b[i/8]&(1<<(i%8)) != 0 {
				s.filled.Add(uint64(i))
				s.holes.Add(-1)
				fl.filled.Add(s.chunkLen(i, chunk))
			}
		}
	}
	if s.holes.Load() == 0 {
		fl.whole.Add(1)
		return nil
	}
	return fl.mark(s)
}

// chunkLen is the length of chunk c of s (the last is shorter).
func (s *sparseShard) chunkLen(c, chunk int64) int64 { return min(chunk, s.size-c*chunk) }

// mark marks copy s for pre-content events, if it is not: from then on its reads wait for Run.
// Marking a copy marked already (by a daemon before this one) changes nothing.
func (fl *Filler) mark(s *sparseShard) error {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if s.marked {
		return nil
	}
	if err := unix.FanotifyMark(fl.fan, unix.FAN_MARK_ADD, unix.FAN_PRE_ACCESS, unix.AT_FDCWD, s.path); err != nil {
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
			return fmt.Errorf("%w: no fanotify pre-content events for %s (Linux 6.14+, and a file system that has them: ext4, XFS, btrfs; tmpfs has not): %v",
				ErrUnsupported, s.path, err)
		}
		return fmt.Errorf("kernel: fanotify_mark %s: %w", s.path, err)
	}
	s.marked, s.markedAt = true, time.Now()
	return nil
}

// FDs returns the Filler's fanotify group and its copies' descriptors, in the shards' order,
// for a keeper to hold across daemon restarts (AdoptFiller). They stay the Filler's.
func (fl *Filler) FDs() (fan int, copies []int) {
	for _, s := range fl.shards {
		copies = append(copies, int(s.f.Fd()))
	}
	return fl.fan, copies
}

// answerOrphans fails with EIO every read that a daemon before this one took from the group and
// did not answer. The kernel finds an answer's event by the descriptor number the event came
// with, in the group, not in a process's table; those numbers died with the daemon, so every
// number it could have had is answered: those of no pending event are refused (ENOENT). It must
// run before Run takes any event of this daemon's.
func (fl *Filler) answerOrphans() {
	limit := uint64(1 << 16)
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil && rl.Max != unix.RLIM_INFINITY {
		limit = max(limit, min(rl.Max, 1<<22))
	}
	var r [8]byte
	binary.NativeEndian.PutUint32(r[4:8], denyEIO)
	for fd := range uint32(limit) {
		binary.NativeEndian.PutUint32(r[0:4], fd)
		if _, err := unix.Write(fl.fan, r[:]); err == nil {
			fl.orphans.Add(1)
		}
	}
}

// denyEIO is the answer that fails a read with EIO: FAN_DENY_ERRNO(EIO).
const denyEIO = unix.FAN_DENY | uint32(syscall.EIO)<<24

// Run answers the pre-content events of the copies until ctx is done: each in a goroutine of
// its own, which fills the chunks the read's range covers (Fill) and allows the read, or fails
// it with EIO. With a budget it also punches chunks out again (evict). It returns ctx's end as
// nil, or why it could not go on.
func (fl *Filler) Run(ctx context.Context) error {
	if fl.opt.Budget > 0 {
		go fl.evict(ctx)
	}
	for range stagers {
		go fl.stager(ctx)
	}
	return eachEvent(ctx, fl.fan, func(ev []byte) {
		fd := int(int32(binary.NativeEndian.Uint32(ev[16:20])))
		if fd < 0 {
			return
		}
		pid := binary.NativeEndian.Uint32(ev[20:24])
		off, count := eventRange(ev)
		fl.events.Add(1)
		go fl.answer(ctx, fd, off, count, pid == fl.self)
	}, nil)
}

// eventRange returns the byte range of a pre-content event (its range record), or the whole
// file (0, -1) where it has none.
func eventRange(ev []byte) (off, count int64) {
	meta := int(binary.NativeEndian.Uint16(ev[6:8]))
	for r := ev[min(meta, len(ev)):]; len(r) >= 4; {
		n := int(binary.NativeEndian.Uint16(r[2:4]))
		if n < 4 || n > len(r) {
			break
		}
		// The range record: a header (4 bytes), padding (4), the offset and the count (8 each).
		if r[0] == unix.FAN_EVENT_INFO_TYPE_RANGE && n >= 24 {
			return int64(binary.NativeEndian.Uint64(r[8:16])), int64(binary.NativeEndian.Uint64(r[16:24]))
		}
		r = r[n:]
	}
	return 0, -1
}

// answer fills what the read of the event's descriptor fd covers and answers the event: allowed,
// or failed with EIO. ahead: the read is this daemon's own (a read ahead). It closes fd.
func (fl *Filler) answer(ctx context.Context, fd int, off, count int64, ahead bool) {
	defer unix.Close(fd)
	start := time.Now()
	resp := uint32(unix.FAN_ALLOW)
	var st unix.Stat_t
	waited := false
	err := unix.Fstat(fd, &st)
	if err == nil {
		i, ok := fl.byIno[[2]uint64{st.Dev, st.Ino}]
		if !ok {
			err = errors.New("a file the Filler did not mark")
		} else {
			if count < 0 {
				off, count = 0, fl.shards[i].size
			}
			for err == nil {
				var w bool
				var refs []throughRef
				w, refs, err = fl.fill(ctx, i, off, count, ahead, true)
				if waited = waited || w; err == nil && fl.held(i, off, count, refs) {
					break
				}
			}
		}
	}
	if err != nil {
		fl.failed.Add(1)
		resp = denyEIO
	} else if i, ok := fl.byIno[[2]uint64{st.Dev, st.Ino}]; ok && !ahead {
		fl.touch(fl.shards[i])
	}
	var r [8]byte
	binary.NativeEndian.PutUint32(r[0:4], uint32(fd))
	binary.NativeEndian.PutUint32(r[4:8], resp)
	unix.Write(fl.fan, r[:])
	if waited {
		fl.waited.Add(1)
		if !ahead {
			fl.wait.Add(uint64(time.Since(start)))
		}
	}
}

// held stamps the chunks of shard that [off, off+n) covers as used now and reports whether all
// still hold their bytes (filled, or read through by this read: refs), right before their read is
// allowed: evict, which takes a chunk back by clearing its bit (or, read through, by counting a
// take-back) first, then punches it only a grace after its last stamp, so a read allowed after
// held saw its bytes there finds them; if held did not, the range is filled again.
func (fl *Filler) held(shard int, off, n int64, refs []throughRef) bool {
	s := fl.shards[shard]
	if n <= 0 || off >= s.size {
		return true
	}
	now := time.Now().UnixNano()
	for c := off / fl.opt.Chunk; c <= (min(off+n, s.size)-1)/fl.opt.Chunk; c++ {
		s.used[c].Store(now)
		if s.filled.Has(uint64(c)) {
			continue
		}
		ok := false
		for _, r := range refs {
			ok = ok || r.chunk == c && s.through.Has(uint64(c)) && s.gen[c].Load() == r.gen
		}
		if !ok {
			return false
		}
	}
	return true
}

// throughRef is a chunk whose range a read wrote (fillThrough), with the chunk's take-backs then.
type throughRef struct {
	chunk int64
	gen   uint32
}

// Fill makes the chunks of shard that [off, off+n) covers filled, fetching and writing those
// that are not, each once however many callers want it (reads' events, plans ahead of them).
// Once the copy is whole its mark is removed.
func (fl *Filler) Fill(ctx context.Context, shard int, off, n int64) error {
	_, _, err := fl.fill(ctx, shard, off, n, true, false)
	return err
}

// fill is Fill, which also says whether it waited for a fetch; ahead counts the fetches as
// reads ahead, not on demand. Each chunk's use is stamped before its bit is looked at (a read's
// answer stamps them again, held, after the last fetch). With read (a read's event), a chunk the
// budget would not keep (admit) is not filled: only the read's range of it is fetched and
// written, and its refs returned for held.
func (fl *Filler) fill(ctx context.Context, shard int, off, n int64, ahead, read bool) (waited bool, refs []throughRef, err error) {
	s := fl.shards[shard]
	if n <= 0 || off >= s.size {
		return false, nil, nil
	}
	now := time.Now().UnixNano()
	first, last := off/fl.opt.Chunk, (min(off+n, s.size)-1)/fl.opt.Chunk
	for c := first; c <= last; c++ {
		s.used[c].Store(now)
		if s.filled.Has(uint64(c)) {
			continue
		}
		waited = true
		if read && !fl.admit(s, c) {
			ref, err := fl.fillThrough(ctx, s, c, off, n, ahead)
			if err != nil {
				return waited, nil, err
			}
			refs = append(refs, ref)
			continue
		}
		k := chunkKey{shard, c}
		f, leader := fl.flying.JoinAwait(k)
		if leader {
			go func() { fl.flying.Resolve(k, f, struct{}{}, fl.fillChunk(ctx, s, shard, c, ahead)) }()
		}
		select {
		case <-f.Done():
		case <-ctx.Done():
			return waited, nil, ctx.Err()
		}
		if _, err := f.Result(); err != nil {
			return waited, nil, err
		}
	}
	return waited, refs, nil
}

// admit reports whether chunk c of s is to be filled whole and kept: with no budget, and
// otherwise for a chunk ranked no higher than keepMax (every chunk until the budget is first
// full; then the highest rank evict keeps: the stable subset). Another is read through: fetching it whole for one read, to punch it out again
// soon, would fetch each chunk of a set larger than the budget once per sample read from it.
func (fl *Filler) admit(s *sparseShard, c int64) bool {
	return fl.opt.Budget <= 0 || rank(s.index, c) <= fl.keepMax.Load()
}

// rank places chunk c of shard in the stable subset's order: the lowest ranks are kept.
func rank(shard int, c int64) uint64 { return subset.Rank(uint64(shard)<<32 | uint64(c)) }

// fillThrough fetches and writes only the pages of chunk c of s that the read of [off, off+n)
// covers, for that read: the chunk stays a hole to the Filler (not filled) and is punched out
// again a grace after its last use (evict). It returns the chunk with its take-backs, for held.
func (fl *Filler) fillThrough(ctx context.Context, s *sparseShard, c, off, n int64, ahead bool) (throughRef, error) {
	const page = 4096
	start, end := c*fl.opt.Chunk, c*fl.opt.Chunk+s.chunkLen(c, fl.opt.Chunk)
	lo, hi := max(off, start)/page*page, min((min(off+n, end)+page-1)/page*page, end)
	buf := make([]byte, hi-lo)
	if err := fl.opt.Fetch(ctx, s.index, lo, buf); err != nil {
		return throughRef{}, fmt.Errorf("kernel: fetching %s [%d, %d): %w", s.path, lo, hi, err)
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if _, err := s.f.WriteAt(buf, lo); err != nil {
		return throughRef{}, fmt.Errorf("kernel: filling %s [%d, %d): %w", s.path, lo, hi, err)
	}
	s.through.Add(uint64(c))
	s.used[c].Store(time.Now().UnixNano())
	fl.through.Add(1)
	fl.throughBytes.Add(uint64(len(buf)))
	if ahead {
		fl.aheadBytes.Add(uint64(len(buf)))
	} else {
		fl.demandBytes.Add(uint64(len(buf)))
	}
	return throughRef{c, s.gen[c].Load()}, nil
}

// fillChunk fetches chunk c of shard (s) and writes it into the copy through the descriptor
// opened before the mark.
func (fl *Filler) fillChunk(ctx context.Context, s *sparseShard, shard int, c int64, ahead bool) error {
	if s.filled.Has(uint64(c)) {
		return nil
	}
	off := c * fl.opt.Chunk
	buf := make([]byte, s.chunkLen(c, fl.opt.Chunk))
	if err := fl.opt.Fetch(ctx, shard, off, buf); err != nil {
		return fmt.Errorf("kernel: fetching %s [%d, %d): %w", s.path, off, off+int64(len(buf)), err)
	}
	s.wmu.Lock()
	_, err := s.f.WriteAt(buf, off)
	if err == nil {
		s.used[c].Store(time.Now().UnixNano())
		s.dirty.Store(true)
		s.through.Remove(uint64(c)) // its ranges are part of the chunk now
		if s.filled.Add(uint64(c)) {
			fl.filled.Add(int64(len(buf)))
			if s.holes.Add(-1) == 0 {
				defer fl.unmark(s)
			}
		}
	}
	s.wmu.Unlock()
	if err != nil {
		return fmt.Errorf("kernel: filling %s [%d, %d): %w", s.path, off, off+int64(len(buf)), err)
	}
	if ahead {
		fl.ahead.Add(1)
		fl.aheadBytes.Add(uint64(len(buf)))
	} else {
		fl.demand.Add(1)
		fl.demandBytes.Add(uint64(len(buf)))
	}
	return nil
}

// unmark removes the mark of copy s, if it is whole: its reads reach the Filler no more.
func (fl *Filler) unmark(s *sparseShard) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if s.marked && s.holes.Load() == 0 && unix.FanotifyMark(fl.fan, unix.FAN_MARK_REMOVE, unix.FAN_PRE_ACCESS, unix.AT_FDCWD, s.path) == nil {
		s.marked = false
		fl.whole.Add(1)
	}
}

// evict keeps the filled chunks within the budget until ctx is done, as the disk cache does:
// the chunks of highest rank (subset.Rank of the chunk) go first, so that the same chunks, a
// stable subset, stay from epoch to epoch. A chunk is taken back in two steps: its copy is
// marked (if whole) and its bit cleared, so that a read of it from then on waits for a fill;
// the records beside the copies are written (Persist) so that a crash after the punch cannot
// find it recorded filled; then, once Grace has passed since that and since the last read allowed over it (a read
// allowed before may not have reached the copy yet), its hole is punched, unless a read has
// filled it again meanwhile. Filled bytes may pass the budget by what is filled within a tick
// and the grace.
func (fl *Filler) evict(ctx context.Context) {
	type victim struct {
		s     *sparseShard
		c     int64
		after int64 // Unix ns from which it may be punched
	}
	var pending []victim
	recorded := true // the records say every pending victim is a hole (Persist since the last clear)
	tick := time.NewTicker(time.Second / 4)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if fl.filled.Load() < fl.opt.Budget-keepRoom*fl.opt.Chunk {
			fl.keepMax.Store(^uint64(0)) // room again (chunks punched past the budget): take any chunk until full
		}
		if len(pending) == 0 && fl.filled.Load() > fl.opt.Budget {
			for _, v := range fl.victims(fl.filled.Load() - fl.opt.Budget) {
				s := fl.shards[v.shard]
				if err := fl.mark(s); err != nil {
					continue // never punched unmarked: a read could get the hole
				}
				fl.mu.Lock()
				markedAt := s.markedAt
				fl.mu.Unlock()
				s.wmu.Lock()
				if s.filled.Remove(uint64(v.chunk)) {
					fl.filled.Add(-s.chunkLen(v.chunk, fl.opt.Chunk))
					s.holes.Add(1)
					s.dirty.Store(true)
					recorded = false
					after := max(markedAt.UnixNano(), s.used[v.chunk].Load()) + int64(fl.opt.Grace)
					pending = append(pending, victim{s, v.chunk, after})
				}
				s.wmu.Unlock()
			}
		}
		// Chunks read through, unused for a grace: taken back (a take-back counted, so that no
		// read is held over them from then on), then punched a grace after their last use.
		for _, sh := range fl.shards {
			for c := range int64(len(sh.used)) {
				if !sh.through.Has(uint64(c)) || time.Now().UnixNano() < sh.used[c].Load()+int64(fl.opt.Grace) {
					continue
				}
				sh.wmu.Lock()
				if sh.through.Remove(uint64(c)) && !sh.filled.Has(uint64(c)) {
					sh.gen[c].Add(1)
					pending = append(pending, victim{sh, c, sh.used[c].Load() + int64(fl.opt.Grace)})
				}
				sh.wmu.Unlock()
			}
		}
		if !recorded { // a hole recorded filled would be served as zeros after a crash
			recorded = fl.Persist() == nil
		}
		if !recorded {
			continue
		}
		now := time.Now().UnixNano()
		kept := pending[:0]
		for _, v := range pending {
			if after := max(v.after, v.s.used[v.c].Load()+int64(fl.opt.Grace)); after > now {
				kept = append(kept, v)
				continue
			}
			fl.punch(v.s, v.c)
		}
		pending = kept
	}
}

// punch makes chunk c of s a hole again, unless a read filled it (or read through it) since
// evict took it back.
func (fl *Filler) punch(s *sparseShard, c int64) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.filled.Has(uint64(c)) || s.through.Has(uint64(c)) { // written again since it was taken back
		return
	}
	n := s.chunkLen(c, fl.opt.Chunk)
	if err := unix.Fallocate(int(s.f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, c*fl.opt.Chunk, n); err != nil {
		fl.punchFl.Add(1) // the bytes stay; the chunk is refilled when read
		return
	}
	s.dirty.Store(true)
	fl.punched.Add(1)
	fl.punchedBytes.Add(uint64(n))
}

// victims returns chunks filled, highest rank first, of at least bytes in all.
func (fl *Filler) victims(bytes int64) []chunkKey {
	type ranked struct {
		k    chunkKey
		rank uint64
	}
	var all []ranked
	for i, s := range fl.shards {
		for c := range int64(len(s.used)) {
			if s.filled.Has(uint64(c)) {
				all = append(all, ranked{chunkKey{i, c}, rank(i, c)})
			}
		}
	}
	slices.SortFunc(all, func(a, b ranked) int { return cmp.Compare(b.rank, a.rank) })
	var out []chunkKey
	for _, r := range all {
		if bytes <= 0 {
			fl.keepMax.Store(r.rank) // the highest rank kept: above it, chunks are read through
			break
		}
		out = append(out, r.k)
		bytes -= fl.shards[r.k.shard].chunkLen(r.k.chunk, fl.opt.Chunk)
	}
	return out
}

// keepRoom is how many chunks under the budget the filled bytes must fall (an eviction that
// overshot) before chunks of any rank are filled whole again: evictions go down to the budget
// itself, so that chunks admitted into a little room are not punched again at once.
const keepRoom = 8

// stagers is how many copies are staged at once, each a chunk at a time; stageQueue, how many
// copies wait (more wait for the next Stage).
const (
	stagers    = 4
	stageQueue = 1024
)

// Stage asks for the chunks of shard that [off, off+n) covers to be filled in the background,
// soon, before their reads (backend.Stager: the samples a plan names). It only marks them: it
// never blocks. From its first call on, reads no longer stage whole copies (StageShards): the
// plans say what this node reads.
func (fl *Filler) Stage(shard int, off, n int64) {
	s := fl.shards[shard]
	if off < 0 || n <= 0 || off >= s.size {
		return
	}
	if !fl.planned.Load() {
		fl.planned.Store(true)
	}
	for c := off / fl.opt.Chunk; c <= (min(off+n, s.size)-1)/fl.opt.Chunk; c++ {
		if !s.want.Has(uint64(c)) && !s.filled.Has(uint64(c)) {
			s.want.Add(uint64(c))
		}
	}
	fl.queue(s)
}

// touch stages the whole of copy s at its first read by a reader, with StageShards and until a
// plan has staged chunks.
func (fl *Filler) touch(s *sparseShard) {
	if !fl.opt.StageShards || fl.planned.Load() || s.holes.Load() == 0 || s.touched.Load() || s.touched.Swap(true) {
		return
	}
	s.want.Fill()
	fl.queue(s)
}

// queue puts s in the stagers' queue unless it is there; a full queue leaves it for the next
// Stage.
func (fl *Filler) queue(s *sparseShard) {
	if s.queued.Load() || s.queued.Swap(true) {
		return
	}
	select {
	case fl.stageQ <- s:
	default:
		s.queued.Store(false)
	}
}

// stager fills the chunks wanted of the copies queued, in order, until ctx is done; chunks the
// budget has no room for are let go (the stable subset keeps what it keeps on its reads).
func (fl *Filler) stager(ctx context.Context) {
	for {
		var s *sparseShard
		select {
		case <-ctx.Done():
			return
		case s = <-fl.stageQ:
		}
		s.queued.Store(false) // chunks wanted from now on queue s again
		for c := range int64(len(s.used)) {
			if !s.want.Remove(uint64(c)) || s.filled.Has(uint64(c)) {
				continue
			}
			if fl.opt.Budget > 0 && fl.filled.Load()+fl.opt.Chunk > fl.opt.Budget {
				continue
			}
			if _, _, err := fl.fill(ctx, s.index, c*fl.opt.Chunk, 1, true, false); err != nil && ctx.Err() != nil {
				return
			}
		}
	}
}

// Persist records which chunks of each copy are filled, once their data is on disk (fdatasync),
// in the file beside it (written to a temporary file and renamed into place). A chunk punched
// since is recorded as a hole before or with its punch reaching the disk: the record is written
// after, and a chunk whose bit was cleared is never recorded filled again until refilled.
func (fl *Filler) Persist() error {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	for _, s := range fl.shards {
		if !s.dirty.Swap(false) {
			continue
		}
		n := (s.size + fl.opt.Chunk - 1) / fl.opt.Chunk
		b := make([]byte, (n+7)/8)
		for i := range n {
			if s.filled.Has(uint64(i)) {
				b[i/8] |= 1 << (i % 8)
			}
		}
		if err := s.f.Sync(); err != nil { // the data before the record that says it is there
			s.dirty.Store(true)
			return fmt.Errorf("kernel: fdatasync %s: %w", s.path, err)
		}
		if err := writeRecord(s.path+FilledSuffix, b); err != nil {
			s.dirty.Store(true)
			return err
		}
	}
	return nil
}

// writeRecord writes b to path durably: a synced temporary file renamed into place, then the
// directory synced, so that after a crash the record is the old one or the new one, whole.
func writeRecord(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("kernel: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		var d *os.File
		if d, err = os.Open(filepath.Dir(path)); err == nil {
			err = d.Sync()
			d.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("kernel: recording the filled chunks: %w", err)
	}
	return nil
}

// Stats returns the Filler's counters.
func (fl *Filler) Stats() FillStats {
	q := fl.wait.Quantiles(0.5, 0.99)
	return FillStats{Events: fl.events.Load(), Waited: fl.waited.Load(), WaitP50us: q[0] / 1e3, WaitP99us: q[1] / 1e3,
		Demand: fl.demand.Load(), DemandBytes: fl.demandBytes.Load(), Ahead: fl.ahead.Load(), AheadBytes: fl.aheadBytes.Load(),
		Failed: fl.failed.Load(), Orphans: fl.orphans.Load(), Whole: fl.whole.Load(), Punched: fl.punched.Load(), PunchedBytes: fl.punchedBytes.Load(),
		PunchFailed: fl.punchFl.Load(), Through: fl.through.Load(), ThroughBytes: fl.throughBytes.Load(), FilledBytes: fl.filled.Load(), BudgetBytes: fl.opt.Budget}
}

// Close persists what is filled and closes the copies and the group. Reads of holes after it
// get zeros (the group's end) unless another process holds the group: unmount the plane first.
func (fl *Filler) Close() error {
	err := fl.Persist()
	for _, s := range fl.shards {
		s.f.Close()
	}
	unix.Close(fl.fan)
	return err
}
