package prefetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aifs/aifs/backend"
	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/layout/pack"
	"github.com/aifs/aifs/plan"
)

// shard is a backend.Shard over bytes in memory that counts its reads and can be held up.
type shard struct {
	b       []byte
	reads   atomic.Int64
	largest atomic.Int64  // the longest read's bytes
	gate    chan struct{} // if not nil, each read waits for a receive... close to release all
	fail    error
}

func (s *shard) ReadAt(ctx context.Context, p []byte, off int64) error {
	s.reads.Add(1)
	for n := s.largest.Load(); int64(len(p)) > n; n = s.largest.Load() {
		if s.largest.CompareAndSwap(n, int64(len(p))) {
			break
		}
	}
	if s.gate != nil {
		<-s.gate
	}
	if s.fail != nil {
		return s.fail
	}
	if off < 0 || off+int64(len(p)) > int64(len(s.b)) {
		return backend.ErrOutOfRange
	}
	copy(p, s.b[off:])
	return nil
}
func (s *shard) Size() int64  { return int64(len(s.b)) }
func (s *shard) Close() error { return nil }

// dataset packs n files of about size bytes (sizes vary ±50%) in 10 class directories and
// returns the index, its shards in memory and each file's content by id.
func dataset(t testing.TB, n, size int) (*layout.Index, []*shard, map[layout.ID][]byte) {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(n), uint64(size)))
	want := map[string][]byte{}
	for i := range n {
		b := make([]byte, size/2+rng.IntN(size+1))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		want[fmt.Sprintf("class-%d/img-%05d.jpg", i%10, i)] = b
	}
	return packFiles(t, want, int64(n*size)/3)
}

// packFiles packs files (content by path) into shards of about shardSize bytes and returns the
// index, its shards in memory and each file's content by id.
func packFiles(t testing.TB, files map[string][]byte, shardSize int64) (*layout.Index, []*shard, map[layout.ID][]byte) {
	t.Helper()
	src := t.TempDir()
	for rel, b := range files {
		if err := os.MkdirAll(filepath.Join(src, filepath.Dir(rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, rel), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dst := filepath.Join(t.TempDir(), "set")
	if _, err := pack.Pack(context.Background(), src, dst, pack.Options{ShardSize: shardSize}); err != nil {
		t.Fatal(err)
	}
	x, err := layout.Load(dst)
	if err != nil {
		t.Fatal(err)
	}
	var shards []*shard
	for _, s := range x.Shards() {
		b, err := os.ReadFile(filepath.Join(dst, s.Name))
		if err != nil {
			t.Fatal(err)
		}
		shards = append(shards, &shard{b: b})
	}
	content := map[layout.ID][]byte{}
	for rel, b := range files {
		id, err := x.LookupPath(rel)
		if err != nil {
			t.Fatalf("%s not in the index", rel)
		}
		content[id] = b
	}
	return x, shards, content
}

func newTestLoader(t testing.TB, x *layout.Index, shards []*shard, opt Options) *Loader {
	t.Helper()
	bs := make([]backend.Shard, len(shards))
	for i, s := range shards {
		bs[i] = s
	}
	l, err := newLoader(x, bs, opt, testTickEvery)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// testTickEvery is the page cache's tick of the Loaders tests make; a test that ticks by hand
// (Loader.tick) sets an hour.
var testTickEvery = tickEvery

// inlineQueue runs each read ahead in the caller of queueFetches, at once.
type inlineQueue struct{ l *Loader }

func (q inlineQueue) offer(f Fetch) bool { q.l.prefetch(f); return true }
func (q inlineQueue) depth() int         { return 0 }

// newInlineLoader is newTestLoader with prefetch run by the reader that triggers it, so that
// what is read ahead does not depend on goroutine scheduling.
func newInlineLoader(t testing.TB, x *layout.Index, shards []*shard, opt Options) *Loader {
	l := newTestLoader(t, x, shards, opt)
	l.queue = inlineQueue{l}
	return l
}

func (l *Loader) readAll(t testing.TB, id layout.ID) []byte {
	t.Helper()
	e := l.x.Entry(id)
	s, err := l.Read(nil, 0, id, e, 0, int64(e.Size))
	if err != nil {
		t.Fatalf("read %d: %v", id, err)
	}
	defer s.Release()
	return bytes.Clone(s.Bytes())
}

// writePathPlan writes ids to l as writer 1's plan, in the paths form.
func writePathPlan(t testing.TB, l *Loader, ids []layout.ID) {
	t.Helper()
	var text strings.Builder
	text.WriteString(plan.HeaderPaths + "\n")
	for _, id := range ids {
		text.WriteString(l.x.Path(id) + "\n")
	}
	if err := l.WritePlan(1, true, []byte(text.String())); err != nil {
		t.Fatal(err)
	}
}

// contentBytes returns the bytes of all the samples in content.
func contentBytes(content map[layout.ID][]byte) (n int64) {
	for _, b := range content {
		n += int64(len(b))
	}
	return n
}

func sortedIDs(content map[layout.ID][]byte) []layout.ID {
	return slices.Sorted(maps.Keys(content))
}

// TestLoaderSharedFetch: readers of one sample wait on one fetch; one interrupted reader stops
// waiting and the fetch still serves the others.
func TestLoaderSharedFetch(t *testing.T) {
	x, shards, content := dataset(t, 20, 10<<10)
	l := newTestLoader(t, x, shards, Options{})
	id := sortedIDs(content)[5]
	e := x.Entry(id)
	sh := shards[e.Shard]
	sh.gate = make(chan struct{})

	const readers = 8
	var wg sync.WaitGroup
	got := make([][]byte, readers)
	errs := make([]error, readers)
	cancel := make(chan struct{})
	for i := range readers {
		wg.Add(1)
		if i == 1 {
			for sh.reads.Load() == 0 { // reader 0 fetches; the others, and the one we interrupt, wait
				time.Sleep(time.Millisecond)
			}
		}
		go func() {
			defer wg.Done()
			var c <-chan struct{}
			if i == readers-1 {
				c = cancel
			}
			s, err := l.Read(c, 0, id, e, 0, int64(e.Size))
			errs[i] = err
			if err == nil {
				got[i] = bytes.Clone(s.Bytes())
				s.Release()
			}
		}()
	}
	for sh.reads.Load() == 0 || l.stats.waits.Load() < readers-1 {
		time.Sleep(time.Millisecond)
	}
	close(cancel)
	time.Sleep(10 * time.Millisecond) // the interrupted reader returns while the fetch waits
	close(sh.gate)
	wg.Wait()
	if n := sh.reads.Load(); n != 1 {
		t.Errorf("%d shard reads for %d concurrent readers, want 1", n, readers)
	}
	for i := range readers - 1 {
		if errs[i] != nil || !bytes.Equal(got[i], content[id]) {
			t.Errorf("reader %d: err %v, %d bytes (want %d, equal %v)", i, errs[i], len(got[i]), len(content[id]), bytes.Equal(got[i], content[id]))
		}
	}
	if !errors.Is(errs[readers-1], context.Canceled) {
		t.Errorf("interrupted reader: %v, want context.Canceled", errs[readers-1])
	}
}

// TestLoaderErrors: a failed fetch fails its readers and is not cached; the next read tries
// again.
func TestLoaderErrors(t *testing.T) {
	x, shards, content := dataset(t, 10, 4<<10)
	l := newTestLoader(t, x, shards, Options{})
	id := sortedIDs(content)[0]
	e := x.Entry(id)
	boom := errors.New("device gone")
	shards[e.Shard].fail = boom
	if _, err := l.Read(nil, 0, id, e, 0, int64(e.Size)); !errors.Is(err, boom) {
		t.Fatalf("read from a failing shard: %v, want %v", err, boom)
	}
	shards[e.Shard].fail = nil
	if got := l.readAll(t, id); !bytes.Equal(got, content[id]) {
		t.Error("read after the shard recovered: wrong bytes")
	}
	if _, err := l.Read(nil, 0, id, e, 0, int64(e.Size)); err != nil {
		t.Fatal(err)
	}
	big := Options{MaxWhole: 1}
	l2 := newTestLoader(t, x, shards, big)
	if _, err := l2.Read(nil, 0, id, e, 0, 1); !errors.Is(err, errTooLarge) {
		t.Errorf("Read of a sample over MaxWhole: %v, want the too-large error", err)
	}
	shards[e.Shard].fail = boom
	if _, _, err := l2.ReadRange(nil, 0, id, e, 1, make([]byte, 2)); !errors.Is(err, boom) {
		t.Errorf("ReadRange of a sample over MaxWhole from a failing shard: %v, want %v", err, boom)
	}
}

// TestLoaderArrived: bytes that arrive from a slow source put in the page cache exactly the
// samples lying wholly inside them, over a page, not yet read this epoch, whose checksum
// matches (with Verify) and that the kernel takes; those then count as read this epoch.
func TestLoaderArrived(t *testing.T) {
	x, shards, content := dataset(t, 90, 8<<10)
	var in0 []layout.ID // shard 0's samples, in pack order
	for _, id := range sortedIDs(content) {
		if x.Entry(id).Shard == 0 {
			in0 = append(in0, id)
		}
	}
	if len(in0) < 20 {
		t.Fatalf("%d samples in shard 0, want 20 or more", len(in0))
	}
	first, last := x.Entry(in0[3]), x.Entry(in0[18])
	off, end := int64(first.Offset)+1, int64(last.Offset+last.Size/2) // cuts in0[3] and in0[18]
	data := bytes.Clone(shards[0].b[off:end])
	corrupt, refused, read := in0[10], in0[12], in0[6]
	data[int64(x.Entry(corrupt).Offset)-off+5] ^= 1
	pushed := map[layout.ID][]byte{}
	l := newTestLoader(t, x, shards, Options{Verify: true, Push: func(id layout.ID, _ int64, b []byte) bool {
		if id == refused {
			return false // the kernel holds no inode for it
		}
		pushed[id] = bytes.Clone(b)
		return true
	}})
	l.readAll(t, read)
	l.Arrived("not-a-shard-of-x", off, data) // another set's chunk: nothing to do
	if st := l.Stats(); st.Prefetch.Arrived != 0 {
		t.Fatalf("bytes of a shard not in the set pushed %d samples", st.Prefetch.Arrived)
	}
	l.Arrived(x.Shards()[0].Name, off, data)
	want := 0
	for _, id := range in0 {
		b, ok := pushed[id]
		inside := id > in0[3] && id < in0[18]
		switch {
		case !inside || id == corrupt || id == refused || id == read || len(content[id]) <= pageSize:
			if ok {
				t.Errorf("sample %d (position %d in its shard) pushed, want it left to its READ", id, slices.Index(in0, id))
			}
		case !ok:
			t.Errorf("sample %d (position %d in its shard) not pushed", id, slices.Index(in0, id))
		case !bytes.Equal(b, content[id]):
			t.Errorf("sample %d pushed with wrong bytes", id)
		default:
			want++
			if !l.d.p.planner.ReadThisEpoch(id) {
				t.Errorf("pushed sample %d does not count as read this epoch", id)
			}
		}
	}
	if l.d.p.planner.ReadThisEpoch(refused) || l.d.p.planner.ReadThisEpoch(corrupt) {
		t.Error("a sample the kernel refused, or a corrupt one, counts as read this epoch")
	}
	if st := l.Stats(); st.Prefetch.Arrived != uint64(want) || st.Backend.Corrupt != 1 || want < 10 {
		t.Errorf("stats: %d arrived (want %d, at least 10), %d corrupt (want 1)", st.Prefetch.Arrived, want, st.Backend.Corrupt)
	}
	l.Arrived(x.Shards()[0].Name, off, data) // again: every sample is read or pushed by now
	if st := l.Stats(); st.Prefetch.Arrived != uint64(want) {
		t.Errorf("the same bytes again pushed %d more samples", st.Prefetch.Arrived-uint64(want))
	}
	newTestLoader(t, x, shards, Options{}).Arrived(x.Shards()[0].Name, off, data) // no Push: nothing to do

	// With a plan, its beacons still come as READs: the plan's cursor moves only with READs.
	// (A budget of one byte keeps the plan from being read ahead, which would take them first.)
	planned := newInlineLoader(t, x, shards, Options{CacheBytes: 1, Push: func(id layout.ID, _ int64, b []byte) bool { return true }})
	writePathPlan(t, planned, in0)
	planned.Arrived(x.Shards()[0].Name, int64(x.Entry(in0[0]).Offset), shards[0].b[x.Entry(in0[0]).Offset:end])
	for i, id := range in0 {
		if got, beacon := planned.d.p.planner.ReadThisEpoch(id), planned.d.p.planner.IsPlanBeacon(id); beacon && got {
			t.Errorf("plan beacon %d (position %d) was pushed", id, i)
		} else if !beacon && !got && id < in0[18] && len(content[id]) > pageSize {
			t.Errorf("sample %d (position %d) of the plan was not pushed", id, i)
		}
	}
}

// TestLoaderVerify: with Verify, a sample whose bytes were changed in the shard fails with
// ErrCorrupt naming its path, whether read on demand or read ahead in a sequential run, is
// never served or cached, and is counted once however often it is read (each read that failed
// is counted apart); every other sample reads right. Without Verify the changed bytes are
// served (aifs verify finds them).
func TestLoaderVerify(t *testing.T) {
	x, shards, content := dataset(t, 300, 8<<10)
	ids := sortedIDs(content)
	bad := map[layout.ID]bool{ids[5]: true, ids[150]: true} // early (on demand), later (read ahead)
	for id := range bad {
		e := x.Entry(id)
		shards[e.Shard].b[e.Offset+e.Size/2] ^= 0x40
	}
	l := newInlineLoader(t, x, shards, Options{Verify: true})
	for round := range 2 {
		for _, id := range ids { // in pack order: the run is read ahead
			e := x.Entry(id)
			s, err := l.Read(nil, 0, id, e, 0, int64(e.Size))
			switch {
			case bad[id] && (!errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), x.Path(id))):
				t.Errorf("round %d, corrupt sample %s: %v, want ErrCorrupt naming it", round, x.Path(id), err)
			case !bad[id] && err != nil:
				t.Errorf("round %d, sample %s: %v", round, x.Path(id), err)
			case err == nil && !bytes.Equal(s.Bytes(), content[id]):
				t.Errorf("round %d, sample %s: wrong bytes", round, x.Path(id))
			}
			if err == nil {
				s.Release()
			}
		}
	}
	if st := l.Stats(); st.Backend.Corrupt != 2 || st.Backend.CorruptReads < 4 || st.Prefetch.Issued == 0 {
		t.Errorf("stats %+v: want 2 corrupt samples, 4 or more corrupt reads (2 rounds), read-ahead issued", st.Backend)
	}
	plain := newTestLoader(t, x, shards, Options{})
	id := ids[5]
	e := x.Entry(id)
	if s, err := plain.Read(nil, 0, id, e, 0, int64(e.Size)); err != nil || bytes.Equal(s.Bytes(), content[id]) {
		t.Errorf("without Verify: %v; want the changed bytes served", err)
	}
}

// TestLoaderNextEpochHitRate: with KeepRead and a cache of a fraction c of the dataset, the
// second shuffled epoch hits at least 0.9·c of its reads (LRU would get about c²/2), and the
// bytes held never exceed the budget.
func TestLoaderNextEpochHitRate(t *testing.T) {
	x, shards, content := dataset(t, 2000, 8<<10)
	ids := sortedIDs(content)
	total := contentBytes(content)
	for _, c := range []float64{0.25, 0.5, 1.0} {
		t.Run(fmt.Sprint(c), func(t *testing.T) {
			budget := int64(c * float64(total))
			l := newInlineLoader(t, x, shards, Options{KeepRead: true, CacheBytes: budget})
			rng := rand.New(rand.NewPCG(1, 2))
			var hits0, misses0 uint64
			for epoch := 1; epoch <= 3; epoch++ {
				order := append([]layout.ID(nil), ids...)
				rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
				for _, id := range order {
					if got := l.readAll(t, id); !bytes.Equal(got, content[id]) {
						t.Fatalf("epoch %d: sample %d: wrong bytes", epoch, id)
					}
					if held := l.held(); held > budget {
						t.Fatalf("%d bytes held (%d kept, %d ahead), budget %d", held, l.mem.keptBytes.Load(), l.mem.aheadBytes.Load(), budget)
					}
				}
				l.mem.cache.Wait()
				st := l.Stats()
				if epoch >= 2 {
					hits, misses := st.Cache.Hits-hits0, st.Cache.Misses-misses0
					rate := float64(hits) / float64(hits+misses)
					t.Logf("c=%.2f epoch %d: hit rate %.3f (LRU expectation %.3f), kept %d of %d bytes", c, epoch, rate, c*c/2, st.Cache.KeptBytes, total)
					if rate < 0.9*c {
						t.Errorf("c=%.2f epoch %d: hit rate %.3f, want at least %.3f", c, epoch, rate, 0.9*c)
					}
				}
				hits0, misses0 = st.Cache.Hits, st.Cache.Misses
			}
			if st := l.Stats(); st.Epoch.Number != 3 {
				t.Errorf("epoch %d after three epochs", st.Epoch.Number)
			}
		})
	}
}

// TestLoaderSequential: a sorted scan is served from read-ahead after its first samples, with
// few, large shard reads.
func TestLoaderSequential(t *testing.T) {
	x, shards, content := dataset(t, 3000, 8<<10)
	l := newInlineLoader(t, x, shards, Options{})
	for _, id := range sortedIDs(content) {
		if got := l.readAll(t, id); !bytes.Equal(got, content[id]) {
			t.Fatalf("sample %d: wrong bytes", id)
		}
	}
	st := l.Stats()
	if st.Cache.Hits < 2900 {
		t.Errorf("sorted scan: %d hits of 3000", st.Cache.Hits)
	}
	var reads int64
	for _, s := range shards {
		reads += s.reads.Load()
	}
	if reads > 200 {
		t.Errorf("sorted scan of 3000 samples took %d shard reads, want them coalesced", reads)
	}
	if st.Prefetch.WastedBytes > st.Prefetch.UsedBytes/10 {
		t.Errorf("read-ahead used %d bytes and wasted %d", st.Prefetch.UsedBytes, st.Prefetch.WastedBytes)
	}
}

// TestLoaderPlan: a plan written in the plan format (paths and indices, split across writes
// anywhere) makes a shuffled epoch hit; bad plans are refused with plan.ErrBad and counted.
func TestLoaderPlan(t *testing.T) {
	x, shards, content := dataset(t, 500, 8<<10)
	ids := sortedIDs(content)
	order := append([]layout.ID(nil), ids...)
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	index := map[layout.ID]int{}
	for i, id := range ids {
		index[id] = i
	}
	var paths, indices strings.Builder
	paths.WriteString(plan.HeaderPaths + "\n")
	indices.WriteString(plan.HeaderIndices + "\n")
	for _, id := range order {
		paths.WriteString(x.Path(id) + "\n")
		fmt.Fprintf(&indices, "%d\n", index[id])
	}
	for name, text := range map[string]string{"paths": paths.String(), "indices": indices.String()} {
		t.Run(name, func(t *testing.T) {
			l := newInlineLoader(t, x, shards, Options{Planner: PlannerConfig{PlanDepth: 32}})
			// written in odd-sized pieces, lines split across writes
			for off := 0; off < len(text); off += 777 {
				if err := l.WritePlan(42, off == 0, []byte(text[off:min(off+777, len(text))])); err != nil {
					t.Fatal(err)
				}
			}
			for _, id := range order {
				if got := l.readAll(t, id); !bytes.Equal(got, content[id]) {
					t.Fatalf("sample %d: wrong bytes", id)
				}
			}
			st := l.Stats()
			if st.Cache.Hits < 495 {
				t.Errorf("shuffled epoch with a plan: %d hits of 500", st.Cache.Hits)
			}
			if len(st.Plans) != 1 || st.Plans[0].Writer != 42 || st.Plans[0].Samples != 500 || st.Plans[0].Read != 500 {
				t.Errorf("plans %+v, want writer 42 with 500 of 500 read", st.Plans)
			}
		})
	}

	l := newTestLoader(t, x, shards, Options{})
	bad := map[string]string{
		"no header":     "class-0/img-00000.jpg\n",
		"wrong header":  "aifs-plan 2 paths\n",
		"missing path":  plan.HeaderPaths + "\nclass-0/nope.jpg\n",
		"directory":     plan.HeaderPaths + "\nclass-0\n",
		"escape":        plan.HeaderPaths + "\n../etc/passwd\n",
		"index too big": plan.HeaderIndices + "\n500\n",
		"not a number":  plan.HeaderIndices + "\n-1\n",
		"long line":     plan.HeaderPaths + "\n" + strings.Repeat("a", plan.MaxLine+1),
	}
	for name, text := range bad {
		if err := l.WritePlan(7, true, []byte(text)); !errors.Is(err, plan.ErrBad) {
			t.Errorf("%s: %v, want plan.ErrBad", name, err)
		}
	}
	if st := l.Stats(); st.Prefetch.PlanErrors != uint64(len(bad)) {
		t.Errorf("%d plan errors counted, want %d", st.Prefetch.PlanErrors, len(bad))
	}
	// a continuation without a start (the parser was dropped after an error) is refused too
	if err := l.WritePlan(7, false, []byte("class-0/img-00000.jpg\n")); !errors.Is(err, plan.ErrBad) {
		t.Errorf("continuation of a refused plan: %v, want plan.ErrBad", err)
	}
	// a refused plan from a writer that never wrote a good one leaves no plan to report
	if err := l.WritePlan(8, true, []byte("x\n")); !errors.Is(err, plan.ErrBad) {
		t.Errorf("garbage from a new writer: %v, want plan.ErrBad", err)
	}
	for _, p := range l.Stats().Plans {
		if p.Writer == 7 || p.Writer == 8 {
			t.Errorf("refused plans left %+v", p)
		}
	}
}

// TestLoaderBudget: 64 readers with a plan and a small budget never hold more than the budget,
// and every read returns the right bytes.
func TestLoaderBudget(t *testing.T) {
	x, shards, content := dataset(t, 1000, 16<<10)
	ids := sortedIDs(content)
	const budget = 1 << 20
	l := newTestLoader(t, x, shards, Options{CacheBytes: budget, KeepRead: true, Planner: PlannerConfig{PlanDepth: 256}})
	writePathPlan(t, l, ids)
	var next atomic.Int64
	var over atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(len(ids)) {
					return
				}
				id := ids[i]
				if got := l.readAll(t, id); !bytes.Equal(got, content[id]) {
					t.Errorf("sample %d: wrong bytes", id)
				}
				if held := l.held(); held > budget {
					over.Store(held)
				}
			}
		}()
	}
	wg.Wait()
	if o := over.Load(); o > 0 {
		t.Errorf("%d bytes held, budget %d", o, budget)
	}
	l.cancel() // stop the workers (not the cache, whose Close lets go of every sample)
	l.wg.Wait()
	kept, ahead := l.mem.keptBytes.Load(), l.mem.aheadBytes.Load()
	if kept > l.mem.keepBudget || ahead > l.mem.aheadBudget || l.mem.keepBudget+l.mem.aheadBudget != budget {
		t.Errorf("%d kept (of %d), %d ahead (of %d), budgets summing to %d, want %d",
			kept, l.mem.keepBudget, ahead, l.mem.aheadBudget, l.mem.keepBudget+l.mem.aheadBudget, budget)
	}
}

// held returns the bytes l holds: kept and read ahead.
func (l *Loader) held() int64 { return l.mem.keptBytes.Load() + l.mem.aheadBytes.Load() }

// TestLoaderPush: with Options.Push (kernel_cache=on), samples read ahead are pushed into the
// kernel whole and dropped from the Loader's memory, except beacons and one-page samples;
// reading only what still comes as READs (the beacons: the kernel serves the rest from its
// page cache) keeps the plan's read-ahead going to the end of the epoch.
func TestLoaderPush(t *testing.T) {
	x, shards, content := dataset(t, 400, 8<<10)
	ids := sortedIDs(content)
	order := append([]layout.ID(nil), ids...)
	rand.New(rand.NewPCG(5, 6)).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	pushed := map[layout.ID][]byte{}
	var mu sync.Mutex
	l := newInlineLoader(t, x, shards, Options{Planner: PlannerConfig{PlanDepth: 16}, Push: func(id layout.ID, _ int64, data []byte) bool {
		mu.Lock()
		defer mu.Unlock()
		if _, twice := pushed[id]; twice {
			t.Errorf("sample %d pushed twice", id)
		}
		pushed[id] = bytes.Clone(data)
		return true
	}})
	writePathPlan(t, l, order)
	for _, id := range order {
		if _, ok := pushed[id]; ok {
			continue // the kernel has it: no READ comes
		}
		if got := l.readAll(t, id); !bytes.Equal(got, content[id]) {
			t.Fatalf("sample %d: wrong bytes", id)
		}
	}
	beacons := 0
	for _, id := range order {
		b, ok := pushed[id]
		switch {
		case l.d.p.planner.IsBeacon(id) || len(content[id]) <= pageSize:
			beacons++
			if ok {
				t.Errorf("beacon or one-page sample %d was pushed", id)
			}
		case !ok:
			t.Errorf("sample %d (plan position %d) was not pushed", id, slices.Index(order, id))
		case !bytes.Equal(b, content[id]):
			t.Errorf("sample %d pushed with wrong bytes", id)
		}
	}
	st := l.Stats()
	if st.Prefetch.Stored != uint64(len(pushed)) || st.Prefetch.HeldBytes != 0 {
		t.Errorf("stats: %d pushed (want %d), %d bytes still held (want 0: the kernel has them)", st.Prefetch.Stored, len(pushed), st.Prefetch.HeldBytes)
	}
	if st.Cache.Misses > 0 || int(st.Cache.Hits) != beacons {
		t.Errorf("%d hits and %d misses, want a hit for each of the %d beacons", st.Cache.Hits, st.Cache.Misses, beacons)
	}
}

// viewShard lends its reads as views (backend.Viewer), as the local backend's O_DIRECT reads
// do, and counts those not released yet.
type viewShard struct {
	*shard
	live atomic.Int64
}

func (s *viewShard) View(ctx context.Context, off int64, n int) (backend.View, error) {
	v := &testView{b: make([]byte, n), live: &s.live}
	if err := s.ReadAt(ctx, v.b, off); err != nil {
		return nil, err
	}
	s.live.Add(1)
	return v, nil
}

type testView struct {
	b    []byte
	live *atomic.Int64
}

func (v *testView) Bytes() []byte { return v.b }

// Release poisons the bytes, so that a use after it reads wrong.
func (v *testView) Release() {
	for i := range v.b {
		v.b[i] = 0xEE
	}
	v.live.Add(-1)
}

// newPushingViewLoader returns an inline Loader over shards lent as views (viewShard), whose
// pushes all succeed, and the views' shards, to count the reads' buffers not released.
func newPushingViewLoader(t *testing.T, x *layout.Index, shards []*shard) (*Loader, []*viewShard) {
	t.Helper()
	views := make([]*viewShard, len(shards))
	bs := make([]backend.Shard, len(shards))
	for i, s := range shards {
		views[i] = &viewShard{shard: s}
		bs[i] = views[i]
	}
	l, err := newLoader(x, bs, Options{Push: func(layout.ID, int64, []byte) bool { return true }}, testTickEvery)
	if err != nil {
		t.Fatal(err)
	}
	l.queue = inlineQueue{l}
	t.Cleanup(l.Close)
	return l, views
}

// liveViews is how many reads' buffers the shards have lent and not had back.
func liveViews(views []*viewShard) int64 {
	live := int64(0)
	for _, v := range views {
		live += v.live.Load()
	}
	return live
}

// TestLoaderBeaconDetached: a beacon read ahead with its neighbours and left in the cache for
// its READ holds a copy of its own, not the buffer of the whole read, which goes once the
// others are pushed (a beacon whose READ never comes, as the page cache serves it, held its
// read's 1-4 MiB for good: docs/bench/README.md, run 10); its READ still gets its bytes.
func TestLoaderBeaconDetached(t *testing.T) {
	x, shards, content := dataset(t, 400, 8<<10)
	l, views := newPushingViewLoader(t, x, shards)
	for pos := range 3 { // a sequential run: read ahead of it, a beacon every 32 samples
		if id := x.ByExtent(pos); !bytes.Equal(l.readAll(t, id), content[id]) {
			t.Fatalf("sample %d: wrong bytes", id)
		}
	}
	if live := liveViews(views); live != 0 {
		t.Errorf("%d reads' buffers still held, their samples all pushed or read", live)
	}
	held := 0
	for _, id := range sortedIDs(content) {
		if s, ok := l.mem.cache.Get(uint32(id)); ok && s.ahead.Load() {
			held++
			if !l.d.p.planner.IsBeacon(id) {
				t.Errorf("sample %d held for its READ, not a beacon", id)
			}
			if got := l.readAll(t, id); !bytes.Equal(got, content[id]) {
				t.Errorf("beacon %d: wrong bytes", id)
			}
		}
	}
	if held == 0 {
		t.Fatal("no beacon was read ahead: the test checks nothing")
	}
}

// TestLoaderPartialReadCopied: with a page cache (Push), a READ past a sample's first that stops
// short of its end keeps the sample for the READs that would follow, as an exact copy: those
// READs need not come (the kernel may hold the other pages), and the read's own buffer, up to 8
// times the sample, held until evicted, left the daemon 20-40 MB larger in a memory cgroup
// (docs/bench/README.md, "Run 15"). The kept copy still serves the rest.
func TestLoaderPartialReadCopied(t *testing.T) {
	x, shards, content := dataset(t, 40, 32<<10)
	l, views := newPushingViewLoader(t, x, shards)
	var id layout.ID
	for _, c := range sortedIDs(content) {
		if len(content[c]) > 3*pageSize {
			id = c
			break
		}
	}
	e := x.Entry(id)
	// The second page only, as the kernel asks when the first READ's push was partly dropped.
	data, v, err := l.ReadRange(nil, 1, id, e, pageSize, make([]byte, pageSize))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, content[id][pageSize:2*pageSize]) {
		t.Fatal("wrong bytes for the second page")
	}
	if v != nil {
		v.Release()
	}
	if live := liveViews(views); live != 0 {
		t.Errorf("%d reads' buffers still held after the READ: the cache keeps the read's buffer, not a copy", live)
	}
	if s, ok := l.mem.cache.Get(uint32(id)); !ok || !s.ahead.Load() {
		t.Fatal("the rest of the sample is not kept for the READs that follow")
	}
	if got := l.readAll(t, id); !bytes.Equal(got, content[id]) {
		t.Errorf("sample %d: the kept copy serves wrong bytes", id)
	}
}

// TestLoaderNoReadAheadOfLarge: a sequential run never reads ahead a sample over MaxWhole,
// which ReadRange reads range by range and never from the cache: fetched whole ahead, it
// would be read twice and held in memory, whole, until evicted (issue 28, item 6: 436 MB of
// live heap after md5sum of a tree with big files).
func TestLoaderNoReadAheadOfLarge(t *testing.T) {
	files := map[string][]byte{}
	for i := range 40 {
		n := 8 << 10
		if i == 20 {
			n = 1 << 20 // over MaxWhole below
		}
		files[fmt.Sprintf("f%02d", i)] = bytes.Repeat([]byte{byte(i)}, n)
	}
	x, shards, content := packFiles(t, files, 64<<20)
	l := newInlineLoader(t, x, shards, Options{MaxWhole: 64 << 10})
	var total uint64
	for _, id := range sortedIDs(content) {
		e := x.Entry(id)
		total += e.Size
		var got []byte
		for off := int64(0); off < int64(e.Size); off += 128 << 10 {
			data, v, err := l.ReadRange(nil, 0, id, e, off, make([]byte, min(128<<10, int64(e.Size)-off)))
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, data...)
			if v != nil {
				v.Release()
			}
		}
		if !bytes.Equal(got, content[id]) {
			t.Fatalf("%s: wrong bytes", x.Path(id))
		}
	}
	if st := l.Stats(); st.Backend.Bytes > total || st.Prefetch.Issued == 0 || st.Prefetch.HeldBytes != 0 {
		t.Errorf("read %d bytes from the shards for %d bytes of samples (read ahead: %d samples, %d bytes still held); want each byte once",
			st.Backend.Bytes, total, st.Prefetch.Issued, st.Prefetch.HeldBytes)
	}
}

// stagingShard is a shard that records what it is asked to stage.
type stagingShard struct {
	*shard
	mu     sync.Mutex
	staged map[[2]int64]int
}

func (s *stagingShard) Stage(off, n int64) {
	s.mu.Lock()
	s.staged[[2]int64{off, n}]++
	s.mu.Unlock()
}

// TestLoaderPlanStages: every sample a plan names is staged once, at its extent, in the shard
// that holds it (a disk cache stages the node's range from this); a sample not planned is not.
func TestLoaderPlanStages(t *testing.T) {
	x, shards, content := dataset(t, 300, 4<<10)
	ids := sortedIDs(content)
	bs := make([]backend.Shard, len(shards))
	stagers := make([]*stagingShard, len(shards))
	for i, s := range shards {
		stagers[i] = &stagingShard{shard: s, staged: map[[2]int64]int{}}
		bs[i] = stagers[i]
	}
	plain := make([]backend.Shard, len(shards))
	for i, s := range shards {
		plain[i] = s
	}
	if _, err := newLoader(x, plain, Options{StagePlans: true}, testTickEvery); err == nil {
		t.Fatal("StagePlans over shards that do not stage: no error")
	}
	l, err := newLoader(x, bs, Options{StagePlans: true}, testTickEvery)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	planned := ids[50:200]
	var text strings.Builder
	text.WriteString(plan.HeaderPaths + "\n")
	for _, id := range planned {
		text.WriteString(x.Path(id) + "\n")
	}
	for off, b := 0, text.String(); off < len(b); off += 1000 {
		if err := l.WritePlan(7, off == 0, []byte(b[off:min(off+1000, len(b))])); err != nil {
			t.Fatal(err)
		}
	}
	want := make([]map[[2]int64]int, len(shards))
	for i := range want {
		want[i] = map[[2]int64]int{}
	}
	for _, id := range planned {
		e := x.Entry(id)
		want[e.Shard][[2]int64{int64(e.Offset), int64(e.Size)}]++
	}
	for i, s := range stagers {
		if !maps.Equal(s.staged, want[i]) {
			t.Errorf("shard %d staged %d extents, want %d (the planned samples')", i, len(s.staged), len(want[i]))
		}
	}
}
