package kernel

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/aifs/aifs/internal/bitset"
	"github.com/aifs/aifs/internal/flight"
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
	chunk  int64
	fetch  Fetch
	shards []*sparseShard
	byIno  map[[2]uint64]int // shard by the copy's device and inode
	flying flight.Group[chunkKey, struct{}]

	mu sync.Mutex // guards marks and persists

	// Counters for Stats.
	events, waited, fetched, fetchedBytes, failed, whole atomic.Uint64
}

// sparseShard is the local copy of one shard.
type sparseShard struct {
	path   string
	size   int64
	f      *os.File      // opened read-write before the mark: its writes raise no event
	filled bitset.Atomic // a bit per chunk
	holes  atomic.Int64  // chunks not filled
	marked bool          // under Filler.mu
	dirty  atomic.Bool   // chunks filled since the last Persist
}

// chunkKey names a chunk of a shard.
type chunkKey struct {
	shard int
	chunk int64
}

// FillStats are a Filler's counters: pre-content events (reads that reached the Filler), those
// that waited for a fetch, chunks fetched and their bytes, reads failed with EIO, copies whole.
type FillStats struct {
	Events       uint64 `json:"events"`
	Waited       uint64 `json:"waited"`
	Fetched      uint64 `json:"fetched_chunks"`
	FetchedBytes uint64 `json:"fetched_bytes"`
	Failed       uint64 `json:"failed"`
	Whole        uint64 `json:"whole_shards"`
}

// filledSuffix names the file beside a copy that records its filled chunks.
const filledSuffix = ".filled"

// NewFiller opens (or creates, sparse, of the given sizes) the copies at paths, reads which of
// their chunks of chunk bytes are filled, and marks those with holes. It returns an error
// wrapping ErrUnsupported where the kernel has no pre-content events.
func NewFiller(paths []string, sizes []int64, chunk int64, fetch Fetch) (*Filler, error) {
	if chunk <= 0 || chunk%int64(unix.Getpagesize()) != 0 {
		return nil, fmt.Errorf("kernel: fill chunk %d is not a multiple of the page size", chunk)
	}
	fan, err := unix.FanotifyInit(unix.FAN_CLASS_PRE_CONTENT|unix.FAN_CLOEXEC|unix.FAN_UNLIMITED_QUEUE|unix.FAN_NONBLOCK,
		unix.O_RDONLY|unix.O_LARGEFILE|unix.O_CLOEXEC)
	if err != nil {
		if errors.Is(err, unix.EINVAL) {
			return nil, fmt.Errorf("%w: the kernel has no fanotify pre-content events (Linux 6.14+, CONFIG_FANOTIFY_ACCESS_PERMISSIONS): %v", ErrUnsupported, err)
		}
		return nil, fmt.Errorf("fanotify_init: %w", err)
	}
	fl := &Filler{fan: fan, chunk: chunk, fetch: fetch, byIno: map[[2]uint64]int{}}
	fl.flying.Init(func(k chunkKey) uint { return uint(k.shard)*31 + uint(k.chunk) })
	for i, p := range paths {
		s, err := openSparse(p, sizes[i], chunk)
		if err != nil {
			fl.Close()
			return nil, err
		}
		fl.shards = append(fl.shards, s)
		var st unix.Stat_t
		if err := unix.Fstat(int(s.f.Fd()), &st); err != nil {
			fl.Close()
			return nil, fmt.Errorf("kernel: stat %s: %w", p, err)
		}
		fl.byIno[[2]uint64{st.Dev, st.Ino}] = i
		if s.holes.Load() == 0 {
			fl.whole.Add(1)
			continue
		}
		if err := unix.FanotifyMark(fan, unix.FAN_MARK_ADD, unix.FAN_PRE_ACCESS, unix.AT_FDCWD, p); err != nil {
			fl.Close()
			if errors.Is(err, unix.EINVAL) {
				return nil, fmt.Errorf("%w: the kernel has no fanotify pre-content events for %s: %v", ErrUnsupported, p, err)
			}
			return nil, fmt.Errorf("kernel: fanotify_mark %s: %w", p, err)
		}
		s.marked = true
	}
	return fl, nil
}

// openSparse opens the copy at path, read-write, creating it as a hole of size bytes, and reads
// its filled chunks from the file beside it (none where that is missing or does not match).
func openSparse(path string, size, chunk int64) (*sparseShard, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("kernel: sparse shard: %w", err)
	}
	st, err := f.Stat()
	if err == nil && st.Size() != size {
		err = f.Truncate(size) // a new copy (size 0), or one of another size: all holes again
		os.Remove(path + filledSuffix)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("kernel: sparse shard %s: %w", path, err)
	}
	n := (size + chunk - 1) / chunk
	s := &sparseShard{path: path, size: size, f: f, filled: bitset.NewAtomic(int(n))}
	s.holes.Store(n)
	if b, err := os.ReadFile(path + filledSuffix); err == nil && int64(len(b)) == (n+7)/8 {
		for i := range n {
			if b[i/8]&(1<<(i%8)) != 0 {
				s.filled.Add(uint64(i))
				s.holes.Add(-1)
			}
		}
	}
	return s, nil
}

// Run answers the pre-content events of the copies until ctx is done: each in a goroutine of
// its own, which fills the chunks the read's range covers (Fill) and allows the read, or fails
// it with EIO. It returns ctx's end as nil, or why it could not go on.
func (fl *Filler) Run(ctx context.Context) error {
	return eachEvent(ctx, fl.fan, func(ev []byte) {
		fd := int(int32(binary.NativeEndian.Uint32(ev[16:20])))
		if fd < 0 {
			return
		}
		off, count := eventRange(ev)
		fl.events.Add(1)
		go fl.answer(ctx, fd, off, count)
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
// or failed with EIO. It closes fd.
func (fl *Filler) answer(ctx context.Context, fd int, off, count int64) {
	defer unix.Close(fd)
	resp := uint32(unix.FAN_ALLOW)
	var st unix.Stat_t
	err := unix.Fstat(fd, &st)
	if err == nil {
		i, ok := fl.byIno[[2]uint64{st.Dev, st.Ino}]
		if !ok {
			err = errors.New("a file the Filler did not mark")
		} else {
			if count < 0 {
				off, count = 0, fl.shards[i].size
			}
			err = fl.Fill(ctx, i, off, count)
		}
	}
	if err != nil {
		fl.failed.Add(1)
		resp = unix.FAN_DENY | uint32(syscall.EIO)<<24 // FAN_DENY_ERRNO(EIO)
	}
	var r [8]byte
	binary.NativeEndian.PutUint32(r[0:4], uint32(fd))
	binary.NativeEndian.PutUint32(r[4:8], resp)
	unix.Write(fl.fan, r[:])
}

// Fill makes the chunks of shard that [off, off+n) covers filled, fetching and writing those
// that are not, each once however many callers want it: a read's event, or a plan ahead of the
// readers. Once the copy is whole its mark is removed.
func (fl *Filler) Fill(ctx context.Context, shard int, off, n int64) error {
	s := fl.shards[shard]
	if n <= 0 || off >= s.size {
		return nil
	}
	first, last := off/fl.chunk, (min(off+n, s.size)-1)/fl.chunk
	waited := false
	for c := first; c <= last; c++ {
		if s.filled.Has(uint64(c)) {
			continue
		}
		waited = true
		k := chunkKey{shard, c}
		f, leader := fl.flying.JoinAwait(k)
		if leader {
			go func() { fl.flying.Resolve(k, f, struct{}{}, fl.fillChunk(ctx, s, shard, c)) }()
		}
		select {
		case <-f.Done():
		case <-ctx.Done():
			return ctx.Err()
		}
		if _, err := f.Result(); err != nil {
			return err
		}
	}
	if waited {
		fl.waited.Add(1)
	}
	return nil
}

// fillChunk fetches chunk c of shard (s) and writes it into the copy through the descriptor
// opened before the mark.
func (fl *Filler) fillChunk(ctx context.Context, s *sparseShard, shard int, c int64) error {
	if s.filled.Has(uint64(c)) {
		return nil
	}
	off := c * fl.chunk
	buf := make([]byte, min(fl.chunk, s.size-off))
	if err := fl.fetch(ctx, shard, off, buf); err != nil {
		return fmt.Errorf("kernel: fetching %s [%d, %d): %w", s.path, off, off+int64(len(buf)), err)
	}
	if _, err := s.f.WriteAt(buf, off); err != nil {
		return fmt.Errorf("kernel: filling %s [%d, %d): %w", s.path, off, off+int64(len(buf)), err)
	}
	fl.fetched.Add(1)
	fl.fetchedBytes.Add(uint64(len(buf)))
	s.dirty.Store(true)
	if s.filled.Add(uint64(c)) && s.holes.Add(-1) == 0 {
		fl.unmark(s)
	}
	return nil
}

// unmark removes the mark of copy s, whole now: its reads reach the Filler no more.
func (fl *Filler) unmark(s *sparseShard) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if s.marked && unix.FanotifyMark(fl.fan, unix.FAN_MARK_REMOVE, unix.FAN_PRE_ACCESS, unix.AT_FDCWD, s.path) == nil {
		s.marked = false
		fl.whole.Add(1)
	}
}

// Persist records which chunks of each copy are filled, once their data is on disk (fdatasync),
// in the file beside it (written to a temporary file and renamed into place).
func (fl *Filler) Persist() error {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	for _, s := range fl.shards {
		if !s.dirty.Swap(false) {
			continue
		}
		n := (s.size + fl.chunk - 1) / fl.chunk
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
		tmp := s.path + filledSuffix + ".tmp"
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			s.dirty.Store(true)
			return fmt.Errorf("kernel: %w", err)
		}
		if err := os.Rename(tmp, s.path+filledSuffix); err != nil {
			s.dirty.Store(true)
			return fmt.Errorf("kernel: %w", err)
		}
	}
	return nil
}

// Stats returns the Filler's counters.
func (fl *Filler) Stats() FillStats {
	return FillStats{Events: fl.events.Load(), Waited: fl.waited.Load(), Fetched: fl.fetched.Load(),
		FetchedBytes: fl.fetchedBytes.Load(), Failed: fl.failed.Load(), Whole: fl.whole.Load()}
}

// Close persists what is filled and closes the copies and the group. Reads of holes after it
// get zeros (the group's end): unmount the plane first.
func (fl *Filler) Close() error {
	err := fl.Persist()
	for _, s := range fl.shards {
		s.f.Close()
	}
	unix.Close(fl.fan)
	return err
}
