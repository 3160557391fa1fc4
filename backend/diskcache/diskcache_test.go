package diskcache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/aifs/aifs/backend"
	"github.com/aifs/aifs/backend/backendtest"
	"github.com/aifs/aifs/backend/faulty"
	"github.com/aifs/aifs/backend/memory"
	"github.com/aifs/aifs/layout"
)

// source is an inner Backend for tests: memory shards that count the bytes read from them,
// can report a version (backend.Versioned), fail on demand, and hold reads at a gate.
type source struct {
	backend.Backend
	version string // "": its shards are not Versioned
	fetched atomic.Int64
	reads   atomic.Int64
	fail    atomic.Pointer[error]
	gate    atomic.Pointer[chan struct{}] // reads wait until it is closed
}

func newSource(files map[string][]byte, version string) *source {
	return &source{Backend: memory.New(files), version: version}
}

func (s *source) Open(ctx context.Context, ls layout.Shard) (backend.Shard, error) {
	sh, err := s.Backend.Open(ctx, ls)
	if err != nil {
		return nil, err
	}
	t := &testShard{Shard: sh, src: s}
	if s.version != "" {
		return &versionedShard{t}, nil
	}
	return t, nil
}

type testShard struct {
	backend.Shard
	src *source
}

func (t *testShard) ReadAt(ctx context.Context, p []byte, off int64) error {
	if g := t.src.gate.Load(); g != nil {
		select {
		case <-*g:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := t.src.fail.Load(); err != nil {
		return fmt.Errorf("injected: %w", *err)
	}
	if err := t.Shard.ReadAt(ctx, p, off); err != nil {
		return err
	}
	t.src.fetched.Add(int64(len(p)))
	t.src.reads.Add(1)
	return nil
}

type versionedShard struct{ *testShard }

func (v versionedShard) Version() string { return v.src.version }

// newCache returns a Cache closed when the test ends.
func newCache(t testing.TB, inner backend.Backend, opt Options) *Cache {
	t.Helper()
	if opt.Logger == nil {
		if tt, ok := t.(*testing.T); ok {
			opt.Logger = zaptest.NewLogger(tt)
		}
	}
	c, err := New(inner, opt)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// flush waits until the writers have written every chunk queued and deleted every file doomed.
func flush(t testing.TB, c *Cache) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
		c.doomMu.Lock()
		doomed := len(c.doomed)
		c.doomMu.Unlock()
		if c.pend.jobs.Load() == 0 && doomed == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("writers still busy: %d jobs, %d files to delete", c.pend.jobs.Load(), doomed)
		}
	}
}

// dataset is shards of random bytes cut into samples of about 110 KB (log-normal, as
// ImageNet's JPEGs), packed end to end.
type dataset struct {
	files   map[string][]byte
	shards  []layout.Shard
	samples []sample
	total   int64
}

type sample struct {
	shard  int
	off, n int64
}

func makeDataset(seed uint64, sizes ...int64) *dataset {
	rng := rand.New(rand.NewPCG(seed, 7))
	ds := &dataset{files: map[string][]byte{}}
	for i, size := range sizes {
		data := make([]byte, size)
		rand.NewChaCha8([32]byte{byte(seed), byte(i)}).Read(data)
		name := layout.ShardName(i)
		ds.files[name] = data
		ds.shards = append(ds.shards, layout.Shard{Name: name, Size: uint64(size), CRC: layout.Checksum(data)})
		ds.total += size
		for off := int64(0); off < size; {
			n := min(int64(math.Exp(rng.NormFloat64()*0.5+math.Log(100e3))), 1<<20, size-off)
			ds.samples = append(ds.samples, sample{i, off, max(n, 1)})
			off += max(n, 1)
		}
	}
	return ds
}

// open opens every shard of ds in c.
func (ds *dataset) open(t testing.TB, c *Cache) []backend.Shard {
	t.Helper()
	var shs []backend.Shard
	for _, s := range ds.shards {
		sh, err := c.Open(t.Context(), s)
		if err != nil {
			t.Fatalf("Open(%s): %v", s.Name, err)
		}
		t.Cleanup(func() { sh.Close() })
		shs = append(shs, sh)
	}
	return shs
}

// pass reads every sample once, in a random order, from 4 goroutines, checking the bytes;
// every fourth read is a View.
func (ds *dataset) pass(t testing.TB, shs []backend.Shard, seed uint64) {
	t.Helper()
	order := rand.New(rand.NewPCG(seed, 9)).Perm(len(ds.samples))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				k := next.Add(1) - 1
				if k >= int64(len(order)) {
					return
				}
				s := ds.samples[order[k]]
				if !ds.check(t, shs[s.shard], s, k%4 == 0) {
					return
				}
			}
		})
	}
	wg.Wait()
}

// check reads sample s from sh (with View if view) and compares it with the data.
func (ds *dataset) check(t testing.TB, sh backend.Shard, s sample, view bool) bool {
	want := ds.files[ds.shards[s.shard].Name][s.off : s.off+s.n]
	if view {
		v, err := sh.(backend.Viewer).View(context.Background(), s.off, int(s.n))
		if err != nil {
			t.Errorf("View %v: %v", s, err)
			return false
		}
		defer v.Release()
		if !bytes.Equal(v.Bytes(), want) {
			t.Errorf("View %v: wrong bytes", s)
			return false
		}
		return true
	}
	p := make([]byte, s.n)
	if err := sh.ReadAt(context.Background(), p, s.off); err != nil {
		t.Errorf("ReadAt %v: %v", s, err)
		return false
	}
	if !bytes.Equal(p, want) {
		t.Errorf("ReadAt %v: wrong bytes", s)
		return false
	}
	return true
}

// diskBytes returns the bytes of the chunk files in dir and how many there are.
func diskBytes(t testing.TB, dir string) (total int64, files int) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted while we walk
		}
		if err != nil {
			return err
		}
		if _, _, ok := parseName(d.Name()); ok && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				total += fi.Size()
				files++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total, files
}

// TestSuite runs the conformance suite over Caches of a memory Backend: with the defaults,
// with 4 KiB chunks and a budget of a few of them (eviction on almost every read), and with
// staging.
func TestSuite(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  Options
	}{
		{"default", Options{Size: 1 << 30}},
		{"tiny", Options{Size: 64 << 10, ChunkSize: 4096}},
		{"staged", Options{Size: 1 << 30, ChunkSize: 256 << 10, StageShards: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			backendtest.Run(t, func(t *testing.T, files map[string][]byte) backend.Backend {
				opt := tc.opt
				opt.Dir = t.TempDir()
				return newCache(t, memory.New(files), opt)
			})
		})
	}
}

// TestReuse: a second pass over data that fits fetches nothing, and neither does a new Cache
// on the same directory after Close (a remount).
func TestReuse(t *testing.T) {
	ds := makeDataset(1, 5<<20+12345, 3<<20, 777)
	dir := t.TempDir()
	src := newSource(ds.files, "etag-1")
	c := newCache(t, src, Options{Dir: dir, Size: 1 << 30, Namespace: "s3://bucket/set"})
	shs := ds.open(t, c)
	ds.pass(t, shs, 1)
	flush(t, c)
	if got := src.fetched.Load(); got != ds.total {
		t.Errorf("first pass fetched %d bytes, want the data's %d", got, ds.total)
	}
	st := c.Stats()
	if st.UsedBytes != ds.total || st.WrittenBytes != ds.total || st.Budget != 1<<30 {
		t.Errorf("after the first pass: %+v, want %d bytes used and written", st, ds.total)
	}
	ds.pass(t, shs, 2)
	if got := src.fetched.Load(); got != ds.total {
		t.Errorf("second pass fetched %d bytes, want 0", got-ds.total)
	}
	if st2 := c.Stats(); st2.Misses != st.Misses || st2.Hits <= st.Hits || st2.HitBytes-st.HitBytes != ds.total {
		t.Errorf("second pass: stats %+v after %+v, want only hits, of %d bytes", st2, st, ds.total)
	}
	for _, sh := range shs {
		sh.Close()
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := shs[0].(*shard).c.Open(t.Context(), ds.shards[0]); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("Open after Close: %v, want fs.ErrClosed", err)
	}

	if got, err := DirBytes(dir); err != nil || got != ds.total {
		t.Errorf("DirBytes = %d, %v; want %d", got, err, ds.total)
	}
	src2 := newSource(ds.files, "etag-1")
	c2 := newCache(t, src2, Options{Dir: dir, Size: 1 << 30, Namespace: "s3://bucket/set"})
	if got := c2.Stats().UsedBytes; got != ds.total {
		t.Errorf("a new Cache found %d bytes, want %d", got, ds.total)
	}
	ds.pass(t, ds.open(t, c2), 3)
	if got := src2.fetched.Load(); got != 0 {
		t.Errorf("after a restart, a pass fetched %d bytes, want 0", got)
	}
}

// TestVersions: a cache written for another version of a shard (re-uploaded: another ETag,
// another CRC, another namespace) is never served, and Open deletes the stale chunks.
func TestVersions(t *testing.T) {
	old := makeDataset(2, 2<<20+5, 1<<20)
	now := makeDataset(3, 2<<20+5, 1<<20) // same names and sizes, other bytes
	for _, tc := range []struct {
		name             string
		oldSrc, newSrc   *source
		oldOpt, newOpt   Options
		oldData, newData *dataset
		stale            bool // the old chunks are of the same shards (deleted on Open)
	}{
		{name: "etag", oldSrc: newSource(old.files, "a"), newSrc: newSource(now.files, "b"), oldData: old, newData: now, stale: true},
		{name: "index-version", oldSrc: newSource(old.files, ""), newSrc: newSource(now.files, ""), oldData: withVersion(old, "1"), newData: withVersion(now, "2"), stale: true},
		{name: "crc", oldSrc: newSource(old.files, ""), newSrc: newSource(now.files, ""), oldData: old, newData: now, stale: true},
		{name: "namespace", oldSrc: newSource(old.files, "a"), newSrc: newSource(now.files, "a"), oldData: old, newData: now,
			oldOpt: Options{Namespace: "s3://one"}, newOpt: Options{Namespace: "s3://two"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.oldOpt.Dir, tc.oldOpt.Size = dir, 1<<30
			tc.newOpt.Dir, tc.newOpt.Size = dir, 1<<30
			c := newCache(t, tc.oldSrc, tc.oldOpt)
			shs := tc.oldData.open(t, c)
			tc.oldData.pass(t, shs, 1)
			flush(t, c)
			for _, sh := range shs {
				sh.Close()
			}
			c.Close()

			c2 := newCache(t, tc.newSrc, tc.newOpt)
			tc.newData.pass(t, tc.newData.open(t, c2), 2)
			flush(t, c2)
			st := c2.Stats()
			// pass compared every byte with the new data; each chunk of the new version is
			// fetched exactly once (later reads of it in the pass are hits of this pass).
			if got := tc.newSrc.fetched.Load(); got != tc.newData.total {
				t.Errorf("reading the new version fetched %d bytes, want %d (each chunk once)", got, tc.newData.total)
			}
			want := tc.newData.total
			if !tc.stale {
				want += tc.oldData.total
			}
			if got, _ := diskBytes(t, dir); got != want || st.UsedBytes != want {
				t.Errorf("%d bytes on disk, %d used; want %d", got, st.UsedBytes, want)
			}
		})
	}
}

func withVersion(ds *dataset, v string) *dataset {
	d := *ds
	d.shards = append([]layout.Shard(nil), ds.shards...)
	for i := range d.shards {
		d.shards[i].Version = v
		d.shards[i].CRC = 0
	}
	return &d
}

// TestBudget reads several shuffled passes over data four and two times the budget (c = 1/4,
// 1/2): the used bytes never exceed the budget, and the passes after the first hit at least
// 0.9·c of their chunk reads (Stats.Hits over Hits+Misses; a ~110 KB sample is one chunk read,
// or two when it straddles a chunk boundary), fetching only the bytes of the chunks outside
// the subset (no read amplification).
func TestBudget(t *testing.T) {
	ds := makeDataset(4, 48<<20, 48<<20, 32<<20)
	for _, c := range []float64{0.25, 0.5} {
		t.Run(fmt.Sprint(c), func(t *testing.T) {
			size := int64(c * float64(ds.total))
			src := newSource(ds.files, "v")
			cache := newCache(t, src, Options{Dir: t.TempDir(), Size: size, ChunkSize: 1 << 20}) // 128 chunks
			var worst atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for {
					worst.Store(max(worst.Load(), cache.Stats().UsedBytes))
					select {
					case <-stop:
						return
					case <-time.After(100 * time.Microsecond):
					}
				}
			})
			shs := ds.open(t, cache)
			ds.pass(t, shs, 10)
			flush(t, cache)
			for p := range 3 {
				before, fetched := cache.Stats(), src.fetched.Load()
				ds.pass(t, shs, uint64(11+p))
				flush(t, cache)
				after := cache.Stats()
				hits, misses := after.Hits-before.Hits, after.Misses-before.Misses
				rate := float64(hits) / float64(hits+misses)
				f := src.fetched.Load() - fetched
				t.Logf("c=%.2f pass %d: hit rate %.3f (%d/%d chunk reads), fetched %d MiB of %d, used %d of %d",
					c, p+2, rate, hits, hits+misses, f>>20, ds.total>>20, after.UsedBytes, size)
				if rate < 0.9*c {
					t.Errorf("pass %d: hit rate %.3f, want ≥ %.3f", p+2, rate, 0.9*c)
				}
				// The pass after the first converges on the subset: a chunk admitted early in
				// it may be evicted by a lower-ranked one and fetched again. From then on only
				// the chunks outside the subset are fetched.
				if limit := ds.total - size + 2*cache.chunk; p > 0 && f > limit {
					t.Errorf("pass %d fetched %d bytes, want ≤ %d (the data outside the subset)", p+2, f, limit)
				}
				if disk, _ := diskBytes(t, cache.opt.Dir); disk > size {
					t.Errorf("pass %d: %d bytes on disk, budget %d", p+2, disk, size)
				}
			}
			close(stop)
			wg.Wait()
			if w := worst.Load(); w > size || w < size/2 {
				t.Errorf("used bytes peaked at %d; budget %d", w, size)
			}
		})
	}
}

// TestShared: two Caches share one directory, with a budget of half the data, and read it
// from 16 goroutines; every read returns the right bytes although each deletes chunks the
// other holds. A third Cache on the directory afterwards finds it within the budget.
func TestShared(t *testing.T) {
	ds := makeDataset(5, 12<<20, 12<<20+999)
	dir := t.TempDir()
	size := ds.total / 2
	var caches [2]*Cache
	var shs [2][]backend.Shard
	for i := range caches {
		caches[i] = newCache(t, newSource(ds.files, "v"), Options{Dir: dir, Size: size, ChunkSize: 256 << 10})
		shs[i] = ds.open(t, caches[i])
	}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 11))
			for k := range 150 {
				s := ds.samples[rng.IntN(len(ds.samples))]
				if !ds.check(t, shs[g%2][s.shard], s, k%3 == 0) {
					return
				}
			}
		})
	}
	wg.Wait()
	for i, c := range caches {
		flush(t, c)
		st := c.Stats()
		t.Logf("cache %d: %+v", i, st)
		if st.UsedBytes > size || st.Hits == 0 {
			t.Errorf("cache %d: %+v; want hits and at most %d bytes used", i, st, size)
		}
	}
	disk, _ := diskBytes(t, dir)
	t.Logf("%d bytes on disk, budget %d", disk, size)
	for _, c := range caches {
		c.Close()
	}
	c := newCache(t, newSource(ds.files, "v"), Options{Dir: dir, Size: size, ChunkSize: 256 << 10})
	flush(t, c)
	if disk, _ := diskBytes(t, dir); disk > size || c.Stats().UsedBytes != disk {
		t.Errorf("after a rescan: %d bytes on disk, %d used; budget %d", disk, c.Stats().UsedBytes, size)
	}
	ds.pass(t, ds.open(t, c), 1)
}

// TestTorn: a chunk file shorter than its name says (torn, truncated) is not served, and
// temporary files are removed once a minute old, not before; junk is left alone.
func TestTorn(t *testing.T) {
	const chunk = 1 << 20 // the dataset holds chunks 0-4; 2 and 3 are torn below
	ds := makeDataset(6, 4<<20+100)
	dir := t.TempDir()
	c := newCache(t, newSource(ds.files, ""), Options{Dir: dir, Size: 1 << 30, ChunkSize: chunk})
	ds.pass(t, ds.open(t, c), 1)
	flush(t, c)
	c.Close()

	nameID, ver := shardIDs("", ds.shards[0].Name, int64(ds.shards[0].Size), ds.shards[0].CRC, "", chunk)
	k := chunkKey{name: nameID, ver: ver, idx: 2}
	path := filepath.Join(fanDir(dir, nameID), fileName(k, chunk))
	if err := os.Truncate(path, 4096); err != nil {
		t.Fatal(err)
	}
	k3 := k
	k3.idx = 3
	path3 := filepath.Join(fanDir(dir, nameID), fileName(k3, chunk))
	if err := os.WriteFile(path3, bytes.Repeat([]byte{1}, chunk+1), 0o644); err != nil { // too long: torn too
		t.Fatal(err)
	}
	oldTmp, newTmp, junk := filepath.Join(dir, tmpDir, "0123.tmp"), filepath.Join(dir, tmpDir, "4567.tmp"), filepath.Join(fanDir(dir, 0), "junk")
	for _, p := range []string{oldTmp, newTmp, junk} {
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chtimes(oldTmp, time.Now(), time.Now().Add(-2*tmpMaxAge)); err != nil {
		t.Fatal(err)
	}

	src := newSource(ds.files, "")
	c2 := newCache(t, src, Options{Dir: dir, Size: 1 << 30, ChunkSize: chunk})
	for p, want := range map[string]bool{oldTmp: false, newTmp: true, junk: true} {
		if _, err := os.Stat(p); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", p, err == nil, want)
		}
	}
	shs := ds.open(t, c2)
	ds.pass(t, shs, 2)
	if got := src.fetched.Load(); got < 2*chunk || got > 4*chunk {
		t.Errorf("fetched %d bytes, want the two torn chunks' (once through, once to cache)", got)
	}
	ds.pass(t, shs, 3)
	flush(t, c2)
	for _, p := range []string{path, path3} {
		if fi, err := os.Stat(p); err != nil || fi.Size() != chunk {
			t.Errorf("%s: %v, want a whole chunk again", p, err)
		}
	}
}

// TestInnerErrors: errors of the inner Backend pass through Open, ReadAt and View (the
// sentinels hold) and nothing is cached from a failed read; a reader whose context ends stops
// waiting for a fetch that another reader shares, and that fetch completes.
func TestInnerErrors(t *testing.T) {
	ds := makeDataset(7, 3<<20)
	src := newSource(ds.files, "v")
	c := newCache(t, src, Options{Dir: t.TempDir(), Size: 1 << 30, ChunkSize: 1 << 20}) // 3 chunks
	if _, err := c.Open(t.Context(), layout.Shard{Name: layout.ShardName(5), Size: 1}); !errors.Is(err, backend.ErrNotExist) {
		t.Errorf("Open of a missing shard: %v, want ErrNotExist", err)
	}
	if _, err := c.Open(t.Context(), layout.Shard{Name: ds.shards[0].Name, Size: 5}); !errors.Is(err, backend.ErrMismatch) {
		t.Errorf("Open with the wrong size: %v, want ErrMismatch", err)
	}
	sh := ds.open(t, c)[0]
	mismatch := backend.ErrMismatch
	src.fail.Store(&mismatch)
	if err := sh.ReadAt(t.Context(), make([]byte, 10), 5); !errors.Is(err, backend.ErrMismatch) {
		t.Errorf("ReadAt: %v, want ErrMismatch", err)
	}
	if _, err := sh.(backend.Viewer).View(t.Context(), 1<<20-5, 10); !errors.Is(err, backend.ErrMismatch) {
		t.Errorf("View: %v, want ErrMismatch", err)
	}
	var wg sync.WaitGroup
	for range 8 { // readers sharing one failing fetch all see its error
		wg.Go(func() {
			if err := sh.ReadAt(context.Background(), make([]byte, 100), 2<<20+7); !errors.Is(err, backend.ErrMismatch) {
				t.Errorf("concurrent ReadAt: %v, want ErrMismatch", err)
			}
		})
	}
	wg.Wait()
	flush(t, c)
	if st := c.Stats(); st.UsedBytes != 0 || st.WrittenBytes != 0 {
		t.Errorf("after failed reads: %+v, want nothing cached", st)
	}
	src.fail.Store(nil)

	gate := make(chan struct{})
	src.gate.Store(&gate)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 2)
	go func() { errc <- sh.ReadAt(ctx, make([]byte, 100), 100) }()
	done := make(chan bool)
	go func() { done <- ds.check(t, sh, sample{0, 50, 200}, false) }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled reader: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled reader kept waiting")
	}
	close(gate)
	<-done
	src.gate.Store(nil)
	flush(t, c)
	if st := c.Stats(); st.UsedBytes != 1<<20 || src.reads.Load() != 1 {
		t.Errorf("after the shared fetch: %+v, %d inner reads; want chunk 0 cached by one read", st, src.reads.Load())
	}
}

// TestQueueReserved: a fetch to keep a chunk holds its place in the writers' queue from its
// start, so a queue that fills while the chunk is on its way does not turn it away (it used to:
// whole chunks were fetched, dropped and fetched again); a miss that finds the queue full
// reads only its bytes through.
func TestQueueReserved(t *testing.T) {
	const chunk = 1 << 20
	ds := makeDataset(12, 3<<20)
	src := newSource(ds.files, "v")
	c := newCache(t, src, Options{Dir: t.TempDir(), Size: 1 << 30, ChunkSize: chunk})
	sh := ds.open(t, c)[0]
	gate := make(chan struct{})
	src.gate.Store(&gate)
	done := make(chan bool)
	go func() { done <- ds.check(t, sh, sample{0, 100, 1000}, false) }()
	for deadline := time.Now().Add(10 * time.Second); !c.flights.Busy(sh.(*shard).key(0)); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the fetch of chunk 0 did not start")
		}
	}
	var filled int64 // the rest of the queue, taken while chunk 0 is on its way
	for c.pend.reserve(chunk, c.pend.maxBytes) {
		filled += chunk
	}
	src.gate.Store(nil)
	close(gate)
	<-done
	if got := src.fetched.Load(); got != chunk {
		t.Errorf("chunk 0 fetched %d bytes, want %d", got, chunk)
	}
	// With the queue full, a miss of chunk 2 reads its 500 bytes through.
	ds.check(t, sh, sample{0, 2*chunk + 10, 500}, false)
	if got := src.fetched.Load(); got != chunk+500 {
		t.Errorf("after a miss with the queue full, %d bytes fetched, want %d", got, chunk+500)
	}
	for ; filled > 0; filled -= chunk {
		c.pend.release(chunk)
	}
	flush(t, c)
	if st := c.Stats(); st.WrittenBytes != chunk || st.UsedBytes != chunk {
		t.Errorf("%+v: want chunk 0 written and kept", st)
	}
	ds.check(t, sh, sample{0, 100, 1000}, false)
	if got := src.fetched.Load(); got != chunk+500 {
		t.Errorf("a read of the kept chunk fetched %d bytes more", got-chunk-500)
	}
}

// TestAdjacentChunks: a read across missing chunks fetches them in one inner read.
func TestAdjacentChunks(t *testing.T) {
	ds := makeDataset(8, 1<<20)
	src := newSource(ds.files, "")
	c := newCache(t, src, Options{Dir: t.TempDir(), Size: 1 << 30, ChunkSize: 64 << 10})
	sh := ds.open(t, c)[0]
	ds.check(t, sh, sample{0, 100, 300 << 10}, false) // chunks 0-4
	if n, b := src.reads.Load(), src.fetched.Load(); n != 1 || b != 320<<10 {
		t.Errorf("%d inner reads of %d bytes, want 1 of %d", n, b, 320<<10)
	}
	flush(t, c)
	ds.check(t, sh, sample{0, 200 << 10, 300 << 10}, true) // chunks 3-7: 5-7 missing
	if n, b := src.reads.Load(), src.fetched.Load(); n != 2 || b != 512<<10 {
		t.Errorf("%d inner reads of %d bytes, want 2 of %d", n, b, 512<<10)
	}
}

// TestArrived: the function set by OnArrived gets each run of chunks fetched, with its shard, offset and
// bytes, once its readers were woken (its flights are gone); hits do not call it.
func TestArrived(t *testing.T) {
	ds := makeDataset(8, 1<<20)
	src := newSource(ds.files, "")
	type call struct {
		shard   string
		off     int64
		n       int
		ok      bool // the bytes are the shard's
		pending bool // a flight of the run was still there
	}
	var mu sync.Mutex
	var calls []call
	n := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(calls)
	}
	var sh *shard
	c := newCache(t, src, Options{Dir: t.TempDir(), Size: 1 << 30, ChunkSize: 64 << 10})
	c.OnArrived(func(name string, off int64, data []byte) {
		pending := false
		for i := off / sh.c.chunk; i*sh.c.chunk < off+int64(len(data)); i++ {
			pending = pending || sh.c.flights.Busy(sh.key(i))
		}
		mu.Lock()
		calls = append(calls, call{name, off, len(data), bytes.Equal(data, ds.files[name][off:off+int64(len(data))]), pending})
		mu.Unlock()
	})
	sh = ds.open(t, c)[0].(*shard)
	name := ds.shards[0].Name
	ds.check(t, sh, sample{0, 100, 300 << 10}, false) // chunks 0-4
	waitFor(t, func() bool { return n() == 1 }, "the first run's Arrived")
	flush(t, c)
	ds.check(t, sh, sample{0, 200 << 10, 300 << 10}, true) // chunks 3-7: 5-7 missing
	waitFor(t, func() bool { return n() == 2 }, "the second run's Arrived")
	ds.check(t, sh, sample{0, 10, 100}, false) // a hit
	c.Close()                                  // waits for the fetches
	want := []call{{name, 0, 320 << 10, true, false}, {name, 320 << 10, 192 << 10, true, false}}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Errorf("Arrived calls %v, want %v", calls, want)
	}
}

// TestStage: with StageShards one read of a shard stages all of it, and a shard not read is
// not staged; under a budget smaller than a shard, staging stops at the subset.
func TestStage(t *testing.T) {
	ds := makeDataset(9, 5<<20, 3<<20+1, 2<<20)
	src := newSource(ds.files, "v")
	c := newCache(t, src, Options{Dir: t.TempDir(), Size: 1 << 30, ChunkSize: 256 << 10, StageShards: true})
	shs := ds.open(t, c)
	ds.check(t, shs[0], sample{0, 0, 1}, false)
	ds.check(t, shs[1], sample{1, 1 << 20, 10}, true)
	want := int64(ds.shards[0].Size + ds.shards[1].Size)
	waitFor(t, func() bool { return c.Stats().UsedBytes == want }, "staging")
	flush(t, c)
	st := c.Stats()
	if st.StagedBytes < want-2*c.chunk || src.fetched.Load() != want {
		t.Errorf("after staging: %+v, %d bytes fetched; want %d staged and fetched", st, src.fetched.Load(), want)
	}
	for _, s := range ds.samples {
		if s.shard < 2 {
			ds.check(t, shs[s.shard], s, false)
		}
	}
	if got := src.fetched.Load(); got != want {
		t.Errorf("reading staged shards fetched %d more bytes", got-want)
	}

	ds2 := makeDataset(10, 16<<20)
	src2 := newSource(ds2.files, "v")
	size := int64(4 << 20)
	c2 := newCache(t, src2, Options{Dir: t.TempDir(), Size: size, ChunkSize: 256 << 10, StageShards: true})
	sh := ds2.open(t, c2)[0]
	ds2.check(t, sh, sample{0, 0, 1}, false)
	waitFor(t, func() bool { return c2.Stats().UsedBytes >= size-c2.chunk && len(c2.stageQ) == 0 }, "staging")
	time.Sleep(50 * time.Millisecond)
	flush(t, c2)
	st = c2.Stats()
	t.Logf("budget %d of %d: %+v", size, ds2.total, st)
	// In-order staging admits a chunk when it ranks among the lowest seen so far: for a subset
	// of k of n chunks, about k·(1+ln(n/k)) admissions (16 of 64: about 38, 9.5 MiB), some of
	// them evicted later. Staging everything would fetch the whole 16 MiB.
	if st.UsedBytes > size || st.StagedBytes > ds2.total*3/4 {
		t.Errorf("staging under a budget of 1/4: %+v; want at most the budget used, ≤ 3/4 of the shard staged", st)
	}
}

// TestStagePlanned: once Stage is called, the stager fetches the chunks it names and no
// others, and a read no longer stages its whole shard; Stage of chunks held fetches nothing.
func TestStagePlanned(t *testing.T) {
	ds := makeDataset(12, 4<<20, 4<<20)
	src := newSource(ds.files, "v")
	c := newCache(t, src, Options{Dir: t.TempDir(), Size: 1 << 30, ChunkSize: 256 << 10, StageShards: true})
	shs := ds.open(t, c)
	st, ok := shs[0].(backend.Stager)
	if !ok {
		t.Fatal("a diskcache shard is not a backend.Stager")
	}
	// [300 KiB, +600 KiB) covers chunks 1..3 (256 KiB each); [3 MiB, +1) chunk 12.
	st.Stage(300<<10, 600<<10)
	st.Stage(3<<20, 1)
	want := int64(4 * 256 << 10)
	waitFor(t, func() bool { return c.Stats().StagedBytes == want }, "staging")
	ds.check(t, shs[1], sample{1, 0, 10}, true) // a read of shard 1 fetches its chunk, nothing more
	time.Sleep(50 * time.Millisecond)
	flush(t, c)
	if st, f := c.Stats(), src.fetched.Load(); st.StagedBytes != want || f != want+256<<10 {
		t.Errorf("after Stage of 4 chunks and a read: %+v, %d fetched; want %d staged, %d fetched", st, f, want, want+256<<10)
	}
	ds.check(t, shs[0], sample{0, 300 << 10, 600 << 10}, false) // staged: a hit
	st.Stage(256<<10, 3*256<<10)                                // held already
	time.Sleep(50 * time.Millisecond)
	if f := src.fetched.Load(); f != want+256<<10 {
		t.Errorf("Stage of chunks held fetched %d more bytes", f-want-256<<10)
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not finish", what)
		}
	}
}

// TestHitAllocs: a hit allocates nothing, read from disk or from memory, copied or lent.
func TestHitAllocs(t *testing.T) {
	ds := makeDataset(11, 2<<20)
	c := newCache(t, newSource(ds.files, ""), Options{Dir: t.TempDir(), Size: 1 << 30, ChunkSize: 1 << 20}) // 2 chunks
	sh := ds.open(t, c)[0]
	ds.pass(t, []backend.Shard{sh}, 1)
	flush(t, c)
	p := make([]byte, 110<<10)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"ReadAt", func() { sh.ReadAt(ctx, p, 12345) }},
		{"ReadAt across chunks", func() { sh.ReadAt(ctx, p, 1<<20-1000) }},
		{"View", func() {
			if v, err := sh.(backend.Viewer).View(ctx, 12345, len(p)); err == nil {
				v.Release()
			}
		}},
	} {
		tc.f()
		allocs := testing.AllocsPerRun(200, tc.f)
		// sync.Pool drops a quarter of its Puts under the race detector.
		if limit := map[bool]float64{false: 0, true: 1}[raceEnabled]; allocs > limit {
			t.Errorf("%s hit: %.2f allocations, want ≤ %v", tc.name, allocs, limit)
		}
	}
}

func TestOptions(t *testing.T) {
	inner := memory.New(nil)
	for _, opt := range []Options{
		{Size: 1},
		{Dir: t.TempDir()},
		{Dir: t.TempDir(), Size: 1, ChunkSize: 4095},
		{Dir: t.TempDir(), Size: 1, ChunkSize: 3 << 20},
		{Dir: t.TempDir(), Size: 1, ChunkSize: 2048},
	} {
		if c, err := New(inner, opt); err == nil {
			t.Errorf("New(%+v) succeeded", opt)
			c.Close()
		}
	}
}

func TestNames(t *testing.T) {
	name, ver := shardIDs("ns", "s", 10, 1, "e", 4096)
	for _, k := range []chunkKey{{name, ver, 0}, {name, ver, 123456789}, {math.MaxUint64, [2]uint64{0, math.MaxUint64}, 7}} {
		n := fileName(k, 4096)
		got, size, ok := parseName(n)
		if !ok || got != k || size != 4096 {
			t.Errorf("parseName(fileName(%v)) = %v, %d, %v", k, got, size, ok)
		}
		for _, bad := range []string{n + "x", n[:len(n)-1] + "-", "x" + n[1:], n[:17] + "G" + n[18:], n + "-1", n[:len(n)-4] + "0096"} {
			if _, _, ok := parseName(bad); ok {
				t.Errorf("parseName(%q) accepted", bad)
			}
		}
	}
	a, av := shardIDs("ns", "s", 10, 1, "e", 4096)
	for _, o := range []struct {
		ns, name, v string
		size        int64
		crc         uint32
		chunk       int64
	}{{"ns2", "s", "e", 10, 1, 4096}, {"ns", "t", "e", 10, 1, 4096}, {"ns", "s", "f", 10, 1, 4096}, {"ns", "s", "e", 11, 1, 4096}, {"ns", "s", "e", 10, 2, 4096}, {"ns", "s", "e", 10, 1, 8192}, {"n", "ss", "e", 10, 1, 4096}} {
		b, bv := shardIDs(o.ns, o.name, o.size, o.crc, o.v, o.chunk)
		if bv == av {
			t.Errorf("%+v: same version hash as the original", o)
		}
		if (b == a) != (o.ns == "ns" && o.name == "s") {
			t.Errorf("%+v: name hash equal %v", o, b == a)
		}
	}
}

// TestFaults: readers in parallel while the inner backend fails, stalls and reads short
// (backend/faulty): every read returns the right bytes or the injected error, nothing wrong is
// cached, once the faults stop every read succeeds from a correct cache, and no goroutine
// outlives Close.
func TestFaults(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	ds := makeDataset(21, 3<<20, 3<<20+11, 2<<20)
	fb := faulty.New(newSource(ds.files, "v"))
	c := newCache(t, fb, Options{Dir: t.TempDir(), Size: 1 << 30, Logger: zap.NewNop()})
	shs := ds.open(t, c)
	boom := errors.New("injected")
	fb.Set(faulty.Rule{Op: faulty.Read, Err: boom, Times: 15},
		faulty.Rule{Op: faulty.Read, Short: true, Times: 15},
		faulty.Rule{Op: faulty.Read, Delay: time.Millisecond})
	var failed, served atomic.Int64
	var wg sync.WaitGroup
	for r := range 8 {
		wg.Go(func() {
			for i := r; i < len(ds.samples); i += 3 {
				s := ds.samples[i]
				p := make([]byte, s.n)
				err := shs[s.shard].ReadAt(t.Context(), p, s.off)
				switch {
				case errors.Is(err, boom) || errors.Is(err, io.ErrUnexpectedEOF):
					failed.Add(1)
				case err != nil:
					t.Errorf("read %v under faults: %v", s, err)
				case !bytes.Equal(p, ds.files[ds.shards[s.shard].Name][s.off:s.off+s.n]):
					t.Errorf("read %v under faults: wrong bytes", s)
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
	if failed.Load() == 0 || served.Load() == 0 {
		t.Errorf("%d reads failed, %d served: want some of each", failed.Load(), served.Load())
	}
	fb.Set()
	ds.pass(t, shs, 5)
	flush(t, c)
	before, _ := fb.Calls()
	ds.pass(t, shs, 6) // all from the cache, and every byte right
	if after, _ := fb.Calls(); after != before {
		t.Errorf("a pass after the faults read the inner backend %d times, want 0 (all cached)", after-before)
	}
	for _, sh := range shs {
		sh.Close()
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, leaks)
}
