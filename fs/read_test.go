package fs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/aifs/aifs/backend"
	"github.com/aifs/aifs/backend/faulty"
	"github.com/aifs/aifs/backend/memory"
	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/prefetch"
)

// readFile READs [off, off+size) of inode ino with a buffer of size bytes, the way go-fuse does,
// and returns a copy of the data.
func readFile(t testing.TB, f *FS, ino, off uint64, size uint32) ([]byte, fuse.Status) {
	return readInto(t, f, ino, off, size, make([]byte, size))
}

// readInto READs with buf as the request's buffer. It takes the data both with Slices (as
// go-fuse does with splice off) and with Bytes, checks that they and Size agree, and calls Done.
func readInto(t testing.TB, f *FS, ino, off uint64, size uint32, buf []byte) ([]byte, fuse.Status) {
	t.Helper()
	res, st := f.Read(nil, &fuse.ReadIn{InHeader: fuse.InHeader{NodeId: ino}, Offset: off, Size: size}, buf)
	if st != fuse.OK {
		if res != nil {
			t.Errorf("Read of inode %d failed (%v) but returned a result", ino, st)
		}
		return nil, st
	}
	b, st := res.Bytes(buf)
	if st != fuse.OK {
		t.Fatalf("ReadResult.Bytes: %v", st)
	}
	got := bytes.Clone(b)
	if sl, ok := res.(interface {
		Slices() ([][]byte, fuse.Status)
	}); ok {
		v, st := sl.Slices()
		if st != fuse.OK || !bytes.Equal(bytes.Join(v, nil), got) {
			t.Errorf("Read of inode %d: Slices (%v) and Bytes differ", ino, st)
		}
	}
	if res.Size() != len(got) {
		t.Errorf("Read of inode %d: Size() %d, Bytes %d bytes", ino, res.Size(), len(got))
	}
	res.Done()
	return got, fuse.OK
}

// testBackend wraps a Backend: it counts open shards and lent views, records every read, can
// hide View (so that its shards offer ReadAt only) and can make every read fail with a given
// error.
type testBackend struct {
	backend.Backend
	hideView bool

	shards, views atomic.Int64 // open, lent
	doubleRelease atomic.Int64
	fault         atomic.Pointer[error]

	mu    sync.Mutex // guards reads
	reads []shardRead
}

// shardRead is one ReadAt or View that reached the wrapped backend.
type shardRead struct {
	shard uint32 // index in the shard table
	off   int64
	n     int
}

// readsOf returns how many reads covered byte off of shard.
func (b *testBackend) readsOf(shard uint32, off int64) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, r := range b.reads {
		if r.shard == shard && r.off <= off && off < r.off+int64(r.n) {
			n++
		}
	}
	return n
}

func (b *testBackend) record(shard uint32, off int64, n int) {
	b.mu.Lock()
	b.reads = append(b.reads, shardRead{shard, off, n})
	b.mu.Unlock()
}

func (b *testBackend) setFault(err error) {
	if err == nil {
		b.fault.Store(nil)
	} else {
		b.fault.Store(&err)
	}
}

func (b *testBackend) Open(ctx context.Context, s layout.Shard) (backend.Shard, error) {
	sh, err := b.Backend.Open(ctx, s)
	if err != nil {
		return nil, err
	}
	b.shards.Add(1)
	num, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(s.Name, "shard-"), ".dat"))
	if err != nil || layout.ShardName(num) != s.Name {
		return nil, fmt.Errorf("test: unexpected shard name %q", s.Name)
	}
	ts := &testShard{Shard: sh, b: b, num: uint32(num)}
	if _, ok := sh.(backend.Viewer); ok && !b.hideView {
		return &viewShard{ts}, nil
	}
	return ts, nil
}

type testShard struct {
	backend.Shard
	b      *testBackend
	num    uint32
	closed sync.Once
}

func (s *testShard) ReadAt(ctx context.Context, p []byte, off int64) error {
	s.b.record(s.num, off, len(p))
	if err := s.b.fault.Load(); err != nil {
		return fmt.Errorf("test: read [%d,+%d): %w", off, len(p), *err)
	}
	return s.Shard.ReadAt(ctx, p, off)
}

func (s *testShard) Close() error {
	s.closed.Do(func() { s.b.shards.Add(-1) })
	return s.Shard.Close()
}

type viewShard struct{ *testShard }

func (s *viewShard) View(ctx context.Context, off int64, n int) (backend.View, error) {
	s.b.record(s.num, off, n)
	if err := s.b.fault.Load(); err != nil {
		return nil, fmt.Errorf("test: view [%d,+%d): %w", off, n, *err)
	}
	v, err := s.Shard.(backend.Viewer).View(ctx, off, n)
	if err != nil {
		return nil, err
	}
	s.b.views.Add(1)
	return &countedView{View: v, b: s.b}, nil
}

type countedView struct {
	backend.View
	b        *testBackend
	released atomic.Bool
}

func (v *countedView) Release() {
	if v.released.Swap(true) {
		v.b.doubleRelease.Add(1)
		return
	}
	v.b.views.Add(-1)
	v.View.Release()
}

// checkReleased closes f and checks that every view lent by tb's shards has been released once.
func checkReleased(t *testing.T, f *FS, tb *testBackend) {
	t.Helper()
	f.Close()
	if n, d := tb.views.Load(), tb.doubleRelease.Load(); n != 0 || d != 0 {
		t.Errorf("after Close: %d views not released, %d released twice", n, d)
	}
}

// readPaths are the two ways the FS reads a shard: a View it lends to go-fuse, or ReadAt into
// the request's buffer.
var readPaths = []struct {
	name     string
	hideView bool
}{{"View", false}, {"ReadAt", true}}

// TestRead reads every file whole, and ranges of a few of them (inside, up to and past the end,
// longer than the file, in 1 MiB windows, into a short buffer), through both read paths, and
// checks the bytes against the source, the statistics and that every lent view is released.
func TestRead(t *testing.T) {
	s := packTree(t, writeSourceTree)
	for _, rp := range readPaths {
		t.Run(rp.name, func(t *testing.T) {
			tb := &testBackend{Backend: memory.New(s.shards), hideView: rp.hideView}
			f := s.serve(t, tb, Options{})
			var reads, total uint64
			check := func(p string, off uint64, size uint32, buf []byte) {
				t.Helper()
				data := s.want[p].data
				got, st := readInto(t, f, s.inoOf(t, p), off, size, buf)
				reads++
				total += uint64(len(got))
				lo := min(off, uint64(len(data)))
				want := data[lo:min(lo+uint64(min(size, uint32(len(buf)))), uint64(len(data)))]
				if st != fuse.OK || !bytes.Equal(got, want) {
					t.Errorf("Read %q [%d,+%d) with a %d-byte buffer: %v, %d bytes, want %d bytes of the source",
						p, off, size, len(buf), st, len(got), len(want))
				}
			}
			for _, p := range s.paths {
				if e := s.want[p]; !e.isDir() {
					check(p, 0, uint32(len(e.data)), make([]byte, len(e.data)))
				}
			}
			for _, p := range []string{"a.txt", "big.bin", "nested/deeper/leaf.dat", "empty", "link", "odd/\xff\xfe.bin"} {
				n := uint64(len(s.want[p].data))
				for _, c := range [][2]uint64{
					{0, 0}, {0, 1}, {1, 3}, {n / 2, uint64(n / 3)}, {0, n + 100}, {n / 2, 1 << 20},
					{max(n, 1) - 1, 2}, {n, 10}, {n + 1, 10}, {1 << 40, 4096}, {1<<64 - 1, 10},
				} {
					check(p, c[0], uint32(c[1]), make([]byte, c[1]))
				}
				check(p, 0, 100, make([]byte, 10)) // a buffer shorter than the request: clipped to it
			}
			// A file larger than one READ window, read as the kernel would: 1 MiB at a time.
			var whole []byte
			for off := uint64(0); ; off += 1 << 20 {
				got, st := readFile(t, f, s.inoOf(t, "big.bin"), off, 1<<20)
				if st != fuse.OK {
					t.Fatalf("Read big.bin at %d: %v", off, st)
				}
				reads++
				total += uint64(len(got))
				if len(got) == 0 {
					break
				}
				whole = append(whole, got...)
			}
			if !bytes.Equal(whole, s.want["big.bin"].data) {
				t.Errorf("big.bin read in 1 MiB windows: %d bytes differing from the source's %d", len(whole), bigSize)
			}
			for _, c := range []struct {
				ino  uint64
				want fuse.Status
			}{
				{fuse.FUSE_ROOT_ID, fuse.Status(syscall.EISDIR)},
				{s.inoOf(t, "nested"), fuse.Status(syscall.EISDIR)},
				{uint64(s.x.Len()) + 1, fuse.Status(syscall.ESTALE)},
				{0, fuse.Status(syscall.ESTALE)},
			} {
				if _, st := readFile(t, f, c.ino, 0, 4096); st != c.want {
					t.Errorf("Read of inode %d: %v, want %v", c.ino, st, c.want)
				}
			}
			snap := f.Stats().Snapshot()
			if got := snap.Ops["read"]; got.Count != reads+4 || got.Errors != 4 || snap.ReadBytes != total {
				t.Errorf("read stats %+v, %d bytes; want %d requests, 4 errors, %d bytes", got, snap.ReadBytes, reads+4, total)
			}
			checkReleased(t, f, tb)
		})
	}
}

// TestReadFetchesSampleOnce: a sample larger than a READ, read as the kernel does (128 KiB
// read-ahead windows, one after the other, as when the kernel refuses the push of its tail),
// reaches its shard once: the first READ of a sample fetches all of it (docs/design.md).
func TestReadFetchesSampleOnce(t *testing.T) {
	s := packTree(t, writeSourceTree)
	ino := s.inoOf(t, "big.bin")
	e := s.x.Entry(layout.ID(ino - 1))
	for _, rp := range readPaths {
		for _, mode := range []CacheMode{CacheOn, CacheOff} {
			tb := &testBackend{Backend: memory.New(s.shards), hideView: rp.hideView}
			f := s.serve(t, tb, Options{KernelCache: mode})
			var got []byte
			for off := uint64(0); off < e.Size; off += 128 << 10 {
				b, st := readFile(t, f, ino, off, 128<<10)
				if st != fuse.OK {
					t.Fatalf("Read big.bin at %d: %v", off, st)
				}
				got = append(got, b...)
			}
			if !bytes.Equal(got, s.want["big.bin"].data) {
				t.Errorf("%s, cache %v: big.bin read in 128 KiB windows differs from the source", rp.name, mode)
			}
			first, last := tb.readsOf(e.Shard, int64(e.Offset)), tb.readsOf(e.Shard, int64(e.Offset+e.Size-1))
			if first != 1 || last != 1 {
				t.Errorf("%s, cache %v: %d READs of big.bin (%d bytes) read its first byte from the shard %d times and its last %d times, want once",
					rp.name, mode, (e.Size+128<<10-1)/(128<<10), e.Size, first, last)
			}
			checkReleased(t, f, tb)
		}
	}
}

// allocsPerRead returns the allocations of one READ in by f, averaged over many.
func allocsPerRead(t *testing.T, f *FS, in *fuse.ReadIn, buf []byte) float64 {
	return testing.AllocsPerRun(500, func() {
		res, st := f.Read(nil, in, buf)
		if st != fuse.OK {
			t.Fatal(st)
		}
		if b, _ := res.Bytes(buf); len(b) != int(in.Size) {
			t.Fatalf("%d bytes", len(b))
		}
		res.Done()
	})
}

// TestReadNoAllocs: a READ of a sample that needs no new fetch, or of a sample over MaxWhole
// (read range by range), allocates nothing, whichever way the shard is read (read.go pools its
// results).
func TestReadNoAllocs(t *testing.T) {
	s := packTree(t, writeSourceTree)
	for _, rp := range readPaths {
		tb := &testBackend{Backend: memory.New(s.shards), hideView: rp.hideView}
		f := s.serve(t, tb, Options{})
		// Over MaxWhole every READ reaches the shard: the memory backend's own views (tb's
		// wrap each one in a new countedView) or tb's ReadAt.
		var lb backend.Backend = memory.New(s.shards)
		if rp.hideView {
			lb = tb
		}
		large := s.serve(t, lb, Options{Prefetch: prefetch.Options{MaxWhole: 64 << 10}})
		in := &fuse.ReadIn{InHeader: fuse.InHeader{NodeId: s.inoOf(t, "big.bin")}, Offset: 1000, Size: 128 << 10}
		buf := make([]byte, in.Size)
		// Warm up until a READ reaches no shard (the loader may publish a fetched sample a
		// moment after returning it).
		e := s.x.Entry(layout.ID(in.NodeId - 1))
		for i := 0; ; i++ {
			before := tb.readsOf(e.Shard, int64(e.Offset+in.Offset))
			if _, st := readInto(t, f, in.NodeId, in.Offset, in.Size, buf); st != fuse.OK {
				t.Fatal(st)
			}
			if tb.readsOf(e.Shard, int64(e.Offset+in.Offset)) == before {
				break
			}
			if i == 1000 {
				t.Fatalf("%s: every READ of the same range reaches the shard", rp.name)
			}
			time.Sleep(time.Millisecond)
		}
		if n := allocsPerRead(t, f, in, buf); n != 0 {
			t.Errorf("%s: %v allocations per READ, want 0", rp.name, n)
		}
		readInto(t, large, in.NodeId, in.Offset, in.Size, buf) // the first READ of a sample over MaxWhole
		if n := allocsPerRead(t, large, in, buf); n != 0 {
			t.Errorf("%s: %v allocations per READ of a sample over MaxWhole, want 0", rp.name, n)
		}
	}
}

// TestReadFaults makes the backend fail every read with each kind of error and checks the errno
// (errno.go), that the error is logged once with the op, path and sample id however often the
// sample is read, that it is counted, and that nothing sticks once the backend recovers.
func TestReadFaults(t *testing.T) {
	s := packTree(t, writeSourceTree)
	const p = "nested/deeper/leaf.dat"
	id, _ := s.x.LookupPath(p)
	cases := []struct {
		err  error
		want fuse.Status
	}{
		{backend.ErrOutOfRange, fuse.EIO},
		{backend.ErrMismatch, fuse.EIO},
		{backend.ErrNotExist, fuse.EIO},
		{iofs.ErrClosed, fuse.EIO},
		{io.ErrUnexpectedEOF, fuse.EIO},
		{errors.New("generic failure"), fuse.EIO},
		{os.ErrNotExist, fuse.EIO},
		{context.Canceled, fuse.EINTR},
		{context.DeadlineExceeded, fuse.EINTR},
		{&os.PathError{Op: "pread", Path: "shard", Err: syscall.EIO}, fuse.EIO},
		{&os.PathError{Op: "pread", Path: "shard", Err: syscall.ENXIO}, fuse.EIO},
	}
	for _, rp := range readPaths {
		t.Run(rp.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.DebugLevel)
			tb := &testBackend{Backend: memory.New(s.shards), hideView: rp.hideView}
			f := s.serve(t, tb, Options{Logger: zap.New(core)})
			ino := s.inoOf(t, p)
			for _, c := range cases {
				tb.setFault(c.err)
				f.failures = failLog{} // each case's first failure is logged
				for range 2 {
					if got, st := readFile(t, f, ino, 10, 100); st != c.want || got != nil {
						t.Errorf("Read with the backend failing with %v: %v, want %v", c.err, st, c.want)
					}
				}
				// An empty file, or a read at the end, needs no I/O.
				if _, st := readFile(t, f, s.inoOf(t, "empty"), 0, 100); st != fuse.OK {
					t.Errorf("Read of the empty file with the backend failing: %v", st)
				}
				if _, st := readFile(t, f, ino, uint64(len(s.want[p].data)), 100); st != fuse.OK {
					t.Errorf("Read at the end with the backend failing: %v", st)
				}
				entries := logs.TakeAll()
				if c.want == fuse.EINTR {
					if len(entries) != 0 {
						t.Errorf("an interrupted request (%v) is logged: %v", c.err, entries)
					}
					continue // no failure
				}
				if len(entries) != 1 {
					t.Errorf("failing with %v: %d log entries, want 1", c.err, len(entries))
					continue
				}
				fields := entries[0].ContextMap()
				if e := entries[0]; e.Level != zapcore.ErrorLevel || fields["op"] != "read" || fields["path"] != p ||
					fields["id"] != uint32(id) || !strings.Contains(fmt.Sprint(fields["error"]), c.err.Error()) {
					t.Errorf("failing with %v: logged %v %q %v", c.err, e.Level, e.Message, fields)
				}
			}
			tb.setFault(nil)
			if got, st := readFile(t, f, ino, 0, 1<<20); st != fuse.OK || !bytes.Equal(got, s.want[p].data) {
				t.Errorf("Read after the backend recovered: %v, %d bytes", st, len(got))
			}
			if got := f.Stats().Snapshot().Ops["read"]; got.Errors != 2*uint64(len(cases)) {
				t.Errorf("read stats %+v, want %d errors", got, 2*len(cases))
			}
			checkReleased(t, f, tb)
		})
	}
}

// TestReadBackendFaults: readers in parallel while the backend fails, stalls and gives short
// reads (backend/faulty): every READ returns the source's bytes or EIO, never other bytes and
// never a short read; once the faults stop every READ succeeds; nothing deadlocks, every view
// lent is released, and no goroutine outlives Close.
func TestReadBackendFaults(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) }) // after the FS's own cleanups
	s := packTree(t, writeSourceTree)
	for _, rp := range readPaths {
		t.Run(rp.name, func(t *testing.T) {
			fb := faulty.New(memory.New(s.shards))
			tb := &testBackend{Backend: fb, hideView: rp.hideView}
			// big.bin is over MaxWhole: its READs take the direct path
			f := s.serve(t, tb, Options{Logger: zap.NewNop(), Prefetch: prefetch.Options{MaxWhole: 256 << 10}})
			boom := errors.New("injected")
			fb.Set(faulty.Rule{Op: faulty.Read, Err: boom, Times: 40},
				faulty.Rule{Op: faulty.Read, Short: true, Times: 40},
				faulty.Rule{Op: faulty.Read, Delay: 2 * time.Millisecond})
			var files []string
			for _, p := range s.paths {
				if !s.want[p].isDir() {
					files = append(files, p)
				}
			}
			var failed, served atomic.Int64
			var wg sync.WaitGroup
			for r := range 8 {
				wg.Go(func() {
					for i := range 3 * len(files) {
						p := files[(i*7+r)%len(files)]
						data := s.want[p].data
						got, st := readFile(t, f, s.inoOf(t, p), 0, 1<<20)
						switch {
						case st == fuse.EIO:
							failed.Add(1)
						case st != fuse.OK:
							t.Errorf("Read %q under faults: %v, want OK or EIO", p, st)
						case !bytes.Equal(got, data[:min(len(data), 1<<20)]):
							t.Errorf("Read %q under faults: %d bytes that are not the source's", p, len(got))
						default:
							served.Add(1)
						}
					}
				})
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(2 * time.Minute):
				t.Fatal("readers still blocked after 2 minutes of faults")
			}
			if calls, faults := fb.Calls(); failed.Load() == 0 || served.Load() == 0 || faults < 80 {
				t.Errorf("%d reads failed, %d served, %d of %d backend calls faulted: want some of each", failed.Load(), served.Load(), faults, calls)
			}
			fb.Set()
			for _, p := range files {
				data := s.want[p].data
				if got, st := readFile(t, f, s.inoOf(t, p), 0, 1<<20); st != fuse.OK || !bytes.Equal(got, data[:min(len(data), 1<<20)]) {
					t.Errorf("Read %q after the faults stopped: %v", p, st)
				}
			}
			checkReleased(t, f, tb)
		})
	}
}

// TestReadVerify: with Prefetch.Verify a sample with a changed byte gets EIO, through the
// loader and through the path of samples over MaxWhole (checked whole on their first READ),
// and is logged and counted once however often it is read (as when the kernel retries a READ
// that failed); the other samples read right.
func TestReadVerify(t *testing.T) {
	s := packTree(t, writeSourceTree)
	corrupt := []string{"a.txt", "big.bin"} // big.bin is over MaxWhole below
	for _, p := range corrupt {
		id, _ := s.x.LookupPath(p)
		e := s.x.Entry(id)
		s.shards[s.x.Shards()[e.Shard].Name][e.Offset+e.Size-1] ^= 1
	}
	core, logs := observer.New(zapcore.DebugLevel)
	f := s.serve(t, nil, Options{Logger: zap.New(core), Prefetch: prefetch.Options{Verify: true, MaxWhole: 64 << 10}})
	for round := range 2 {
		for _, p := range s.paths {
			e := s.want[p]
			if e.isDir() {
				continue
			}
			got, st := readFile(t, f, s.inoOf(t, p), 0, 1<<20)
			bad := slices.Contains(corrupt, p)
			if bad && st != fuse.EIO || !bad && (st != fuse.OK || !bytes.Equal(got, e.data[:min(len(e.data), 1<<20)])) {
				t.Errorf("round %d: Read %q: %v, %d bytes (corrupt: %v)", round, p, st, len(got), bad)
			}
		}
	}
	for _, p := range corrupt {
		if n := logs.FilterField(zap.String("path", p)).Len(); n != 1 {
			t.Errorf("%s logged %d times, want once", p, n)
		}
	}
	if b := f.Stats().Snapshot().Backend; b.Corrupt != 2 || b.CorruptReads != 4 {
		t.Errorf("%d corrupt samples, %d corrupt reads counted; want 2 samples, 4 reads (2 rounds)", b.Corrupt, b.CorruptReads)
	}
}

// TestNewChecksShards: New (its loader) opens every shard and fails, naming the shard and closing the ones it
// opened, when one is missing or has the wrong size.
func TestNewChecksShards(t *testing.T) {
	s := packTree(t, writeSourceTree)
	last := s.x.Shards()[len(s.x.Shards())-1].Name
	missing, short := map[string][]byte{}, map[string][]byte{}
	for name, data := range s.shards {
		if name != last {
			missing[name] = data
		}
		short[name] = data
	}
	short[last] = s.shards[last][1:]
	for _, c := range []struct {
		name   string
		shards map[string][]byte
		want   error
	}{{"missing", missing, backend.ErrNotExist}, {"short", short, backend.ErrMismatch}} {
		tb := &testBackend{Backend: memory.New(c.shards)}
		f, err := New(t.Context(), s.x, tb, Options{})
		if f != nil || !errors.Is(err, c.want) || !strings.Contains(fmt.Sprint(err), last) {
			t.Errorf("%s shard: New returned %v, %v; want an error wrapping %v naming %s", c.name, f, err, c.want, last)
		}
		if n := tb.shards.Load(); n != 0 {
			t.Errorf("%s shard: %d shards left open", c.name, n)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := New(ctx, s.x, memory.New(s.shards), Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("New with a cancelled context: %v", err)
	}
}

// TestClose: Close closes every shard, is idempotent, and later READs fail with EIO rather than
// return data or crash.
func TestClose(t *testing.T) {
	s := packTree(t, writeSourceTree)
	tb := &testBackend{Backend: memory.New(s.shards)}
	f := s.serve(t, tb, Options{})
	if n := tb.shards.Load(); n != int64(len(s.x.Shards())) {
		t.Errorf("%d shards open, want %d", n, len(s.x.Shards()))
	}
	if err1, err2 := f.Close(), f.Close(); err1 != nil || err2 != nil {
		t.Errorf("Close twice: %v, %v", err1, err2)
	}
	if n := tb.shards.Load(); n != 0 {
		t.Errorf("%d shards open after Close", n)
	}
	if _, st := readFile(t, f, s.inoOf(t, "a.txt"), 0, 100); st != fuse.EIO {
		t.Errorf("Read after Close: %v, want EIO", st)
	}
	// The namespace is still answered from the index.
	if out := lookupPath(t, f, "nested/x"); out.NodeId != s.inoOf(t, "nested/x") {
		t.Errorf("Lookup after Close: node %d", out.NodeId)
	}
}

// TestReadLargeCounted: the READs of a sample over MaxWhole, which the loader reads range by
// range from the shard, are counted in the stats' backend section, reads and bytes, and so are
// the reads that verify it whole on its first READ (issue 28, item 7).
func TestReadLargeCounted(t *testing.T) {
	s := packTree(t, writeSourceTree)
	ino := s.inoOf(t, "big.bin")
	size := s.x.Entry(layout.ID(ino - 1)).Size
	for _, verify := range []bool{false, true} {
		for _, rp := range readPaths {
			tb := &testBackend{Backend: memory.New(s.shards), hideView: rp.hideView}
			f := s.serve(t, tb, Options{Prefetch: prefetch.Options{MaxWhole: 64 << 10, Verify: verify}})
			var reads uint64
			for off := uint64(0); off < size; off += 128 << 10 {
				if _, st := readFile(t, f, ino, off, 128<<10); st != fuse.OK {
					t.Fatalf("Read big.bin at %d: %v", off, st)
				}
				reads++
			}
			wantReads, wantBytes := reads, size
			if verify { // read whole once more, in pieces of 4 MiB
				wantReads, wantBytes = reads+(size+4<<20-1)/(4<<20), 2*size
			}
			if got := f.Stats().Snapshot().Backend; got.Reads != wantReads || got.Bytes != wantBytes {
				t.Errorf("%s, verify %v: big.bin (%d bytes) read in %d READs of 128 KiB: backend stats %d reads, %d bytes; want %d, %d",
					rp.name, verify, size, reads, got.Reads, got.Bytes, wantReads, wantBytes)
			}
			checkReleased(t, f, tb)
		}
	}
}
