package prefetch

import (
	"bytes"
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aifs/aifs/layout"
)

// kernelCache stands for the kernel's page cache under a Loader with Push and Drop: what is
// pushed or read lands in it, what is dropped leaves it, and a sample in it is read there
// without reaching the Loader.
type kernelCache struct {
	t       testing.TB
	mu      sync.Mutex
	content map[layout.ID][]byte
	in      map[layout.ID]bool
	pushes  map[layout.ID]int
	again   int                // pushes of a sample in the cache already
	reading map[layout.ID]bool // READs in flight: their pages are locked, a drop leaves them
	drops   int
	// tickEach, if not 0, makes epoch tick the Loader after every tickEach READs, standing
	// for the clock: a tick is 10 ms, so 20 READs a tick are 2,000 a second.
	tickEach int
}

func newKernelCache(t testing.TB, content map[layout.ID][]byte) *kernelCache {
	return &kernelCache{t: t, content: content, in: map[layout.ID]bool{}, pushes: map[layout.ID]int{}, reading: map[layout.ID]bool{}}
}

func (k *kernelCache) push(id layout.ID, off int64, data []byte) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !bytes.Equal(data, k.content[id][off:]) {
		k.t.Errorf("sample %d pushed from %d with wrong bytes", id, off)
	}
	if off == 0 {
		if k.in[id] {
			k.again++
		}
		k.in[id] = true
		k.pushes[id]++
	}
	return true
}

func (k *kernelCache) drop(id layout.ID) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.reading[id] {
		delete(k.in, id)
	}
	k.drops++
}

// dropAll empties the cache, as drop_caches does.
func (k *kernelCache) dropAll() {
	k.mu.Lock()
	defer k.mu.Unlock()
	clear(k.in)
}

func (k *kernelCache) has(id layout.ID) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.in[id]
}

// pushedIDs returns the samples pushed so far.
func (k *kernelCache) pushedIDs() map[layout.ID]bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	ids := map[layout.ID]bool{}
	for id := range k.pushes {
		ids[id] = true
	}
	return ids
}

func (k *kernelCache) bytes() (n int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for id := range k.in {
		n += int64(len(k.content[id]))
	}
	return n
}

// epoch reads every sample once, in a shuffled order, from the kernel's cache or through l,
// and returns those that reached l.
func (k *kernelCache) epoch(t testing.TB, l *Loader, ids []layout.ID, rng *rand.Rand) map[layout.ID]bool {
	order := append([]layout.ID(nil), ids...)
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	return k.pass(t, l, order)
}

// pass reads the samples of order, in that order, as epoch does.
func (k *kernelCache) pass(t testing.TB, l *Loader, order []layout.ID) map[layout.ID]bool {
	reached := map[layout.ID]bool{}
	for _, id := range order {
		if k.has(id) {
			continue
		}
		reached[id] = true
		k.mu.Lock()
		k.in[id], k.reading[id] = true, true // the READ's pages, locked until its answer
		k.mu.Unlock()
		if got := l.readAll(t, id); !bytes.Equal(got, k.content[id]) {
			t.Fatalf("sample %d: wrong bytes", id)
		}
		k.mu.Lock()
		delete(k.reading, id)
		k.mu.Unlock()
		if k.tickEach > 0 && len(reached)%k.tickEach == 0 {
			l.tick(nil)
		}
	}
	k.settle(t, l)
	l.tick(nil) // a whole tick after the last read: its drops are due
	l.tick(nil)
	return reached
}

// settle waits until l has no fetch queued or in flight and no push under way. A sample whose
// fetch or push is under way is not dropped (Residency.Tick) until a tick after it ends, and
// pass ticks twice at its end only: under GOMAXPROCS=1 the Loader's workers, runnable but not
// run while the reader kept the one CPU, held flights and pushes past those ticks, and 1 run in
// 10 left samples outside the subset in the page cache for the next epoch.
func (k *kernelCache) settle(t testing.TB, l *Loader) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		busy := l.queue.depth() > 0
		l.d.lock()
		for id := range k.content {
			busy = busy || l.flights.Busy(id) || l.d.p.res != nil && l.d.p.res.isPushing(id)
		}
		l.d.unlock()
		if !busy {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("the Loader's fetches and pushes did not end in 10 s")
		}
	}
}

// halfBudgetLoader returns a Loader made by mk over 400 samples of about 16 KiB, with a
// page-cache budget of half of them, pushing into and dropping from k; only the test ticks it
// (kernelCache.epoch), so that drops never race its reads.
func halfBudgetLoader(t *testing.T, mk func(testing.TB, *layout.Index, []*shard, Options) *Loader) (*Loader, *kernelCache, map[layout.ID][]byte) {
	x, shards, content := dataset(t, 400, 16<<10)
	k := newKernelCache(t, content)
	was := testTickEvery
	t.Cleanup(func() { testTickEvery = was })
	testTickEvery = time.Hour
	l := mk(t, x, shards, Options{Push: k.push, Drop: k.drop,
		PageCache: func([]uint32) (int64, string) { return contentBytes(content) / 2, "test" }})
	return l, k, content
}

// TestLoaderPageCacheSubset: with a budget of half the set, a Loader keeps a stable subset in
// the (simulated) page cache and drops the other samples after their read: from the second
// epoch on exactly the samples outside the subset reach it, and the page cache holds no more
// than the budget once the drops are done.
func TestLoaderPageCacheSubset(t *testing.T) {
	l, k, content := halfBudgetLoader(t, newTestLoader)
	ids := sortedIDs(content)
	data := contentBytes(content)
	rng := rand.New(rand.NewPCG(7, 8))
	k.epoch(t, l, ids, rng)
	for e := 2; e <= 3; e++ {
		reached := k.epoch(t, l, ids, rng)
		pushed := k.pushedIDs() // read ahead (a sequential run by chance): they may wait 2 s in the window
		l.d.lock()
		for _, id := range ids {
			if keep := l.d.p.res.Keeps(id); keep == reached[id] && !(pushed[id] && !keep) {
				t.Errorf("epoch %d: sample %d in the subset %v, reached the Loader %v", e, id, keep, reached[id])
			}
		}
		l.d.unlock()
		if n := k.bytes(); n > data/2 {
			t.Errorf("epoch %d: %d bytes in the page cache, over the budget of %d", e, n, data/2)
		}
	}
	l.Close()
	st := l.Stats()
	if pc := st.PageCache; pc == nil || pc.Fits || pc.Source != "test" || pc.Drops == 0 || int(pc.Drops) != k.drops ||
		st.Epoch.Number != 3 || st.Epoch.PreviousUnseen == 0 {
		t.Errorf("stats %+v, epoch %+v; %d drops seen", pc, st.Epoch, k.drops)
	}
}

// TestLoaderNoReadAheadOfResident: when the set does not fit, a sequential run over the misses
// reads ahead none of the samples the page cache holds (the subset between them): pushed
// again they cost a read for nothing, and a beacon among them waited in the cache for a READ
// that never came.
func TestLoaderNoReadAheadOfResident(t *testing.T) {
	l, k, content := halfBudgetLoader(t, newInlineLoader)
	x := l.x
	k.epoch(t, l, sortedIDs(content), rand.New(rand.NewPCG(9, 10)))
	// Epoch 2 in shard order: each miss follows the one before, over the subset between.
	k.mu.Lock()
	k.again = 0
	k.mu.Unlock()
	issued := l.Stats().Prefetch.Issued
	resident := 0
	for pos := range x.Files() {
		id := x.ByExtent(pos)
		if k.has(id) {
			resident++
			continue
		}
		if got := l.readAll(t, id); !bytes.Equal(got, content[id]) {
			t.Fatalf("sample %d: wrong bytes", id)
		}
	}
	if issued = l.Stats().Prefetch.Issued - issued; resident == 0 || issued == 0 {
		t.Fatalf("%d samples resident, %d reads ahead in epoch 2: the test checks nothing", resident, issued)
	}
	if k.again > 0 {
		t.Errorf("%d samples read ahead and pushed again, the page cache holding them", k.again)
	}
}

// TestLoaderChunkReads: when the set fits, a cold miss reads the samples after it, up to 1 MiB,
// in the background and pushes them, each once and with the right bytes, so that a cold
// shuffled epoch sends a few READs per chunk, not one per sample; nothing is dropped.
func TestLoaderChunkReads(t *testing.T) {
	defer func(d time.Duration) { testTickEvery = d }(testTickEvery)
	testTickEvery = time.Hour // the test ticks (kernelCache.tickEach): the gate sees its rates, not the clock's
	x, shards, content := dataset(t, 400, 16<<10)
	ids := sortedIDs(content)
	k := newKernelCache(t, content)
	k.tickEach = 20 // misses at 2,000 a second: the gate opens at the first tick
	l := newInlineLoader(t, x, shards, Options{Push: k.push, Drop: k.drop, ChunkReads: true})
	reached := k.epoch(t, l, ids, rand.New(rand.NewPCG(9, 10)))
	st := l.Stats()
	t.Logf("%d of %d samples reached the Loader; %+v", len(reached), len(ids), *st.PageCache)
	if len(reached) > len(ids)/10+gateOpenMisses { // those before the gate opened, and a few a chunk
		t.Errorf("%d of %d samples reached the Loader in a cold epoch with chunk reads", len(reached), len(ids))
	}
	for id, n := range k.pushes {
		if n > 1 || reached[id] {
			t.Errorf("sample %d pushed %d times, and read: %v", id, n, reached[id])
		}
	}
	// Read-ahead pushes some too, before the gate opens (a sequential run: this set is 2 chunks).
	if pc := st.PageCache; !pc.Fits || pc.ChunkReads == 0 || pc.ChunkSamples == 0 || pc.ChunkSamples > uint64(len(k.pushes)) ||
		pc.Drops != 0 || k.drops != 0 {
		t.Errorf("page cache stats %+v, %d samples pushed, %d drops", *pc, len(k.pushes), k.drops)
	}
	if st.Prefetch.HeldBytes != 0 {
		t.Errorf("%d bytes still held after the epoch", st.Prefetch.HeldBytes)
	}
}

// sweepLoader returns an inline Loader (with opt, Push and Drop) over a set of 600 samples in
// 3 shards of 9-10 chunks each that fits the page cache, its samples, the kernelCache it
// pushes to and its shards. The test ticks (kernelCache.tickEach): the gate sees its rates,
// not the clock's.
func sweepLoader(t *testing.T, opt Options) (*layout.Index, []layout.ID, *kernelCache, *Loader, []*shard) {
	d := testTickEvery
	t.Cleanup(func() { testTickEvery = d })
	testTickEvery = time.Hour
	x, shards, content := dataset(t, 600, 48<<10)
	k := newKernelCache(t, content)
	opt.Push, opt.Drop = k.push, k.drop
	return x, sortedIDs(content), k, newInlineLoader(t, x, shards, opt), shards
}

// TestLoaderChunkSweep: once the gate opens, the sweep pushes every sample the epoch has not
// read, those across a chunk boundary too (aligned chunks leave them out), each once: no
// READ reaches the Loader after the tick that opened it. No byte is read twice: the samples
// read before the gate opened are not read again inside a chunk read, and no read spans more
// than ChunkBytes.
func TestLoaderChunkSweep(t *testing.T) {
	for _, chunk := range []int64{0, 256 << 10} {
		t.Run(fmt.Sprintf("ChunkBytes=%d", chunk), func(t *testing.T) { testChunkSweep(t, chunk) })
	}
}

func testChunkSweep(t *testing.T, chunk int64) {
	x, ids, k, l, shards := sweepLoader(t, Options{ChunkReads: true, ChunkBytes: chunk})
	k.tickEach = 20 // 2,000 misses a second: the gate opens at the first tick
	reached := k.epoch(t, l, ids, rand.New(rand.NewPCG(11, 12)))
	if len(reached) > k.tickEach {
		t.Errorf("%d of %d samples reached the Loader; want the %d before the gate opened", len(reached), len(ids), k.tickEach)
	}
	for _, id := range ids {
		if n := k.pushes[id]; n > 1 || n == 1 && reached[id] || n == 0 && !reached[id] {
			t.Errorf("sample %d pushed %d times, read %v", id, n, reached[id])
		}
	}
	st := l.Stats()
	if pc := st.PageCache; pc.ChunkReads == 0 || pc.ChunkSamples != uint64(len(ids)-len(reached)) || pc.Drops != 0 {
		t.Errorf("page cache stats %+v", *pc)
	}
	if read, held := st.Backend.Bytes, x.ShardBytes(); read > held {
		t.Errorf("the epoch read %d bytes from shards of %d: some twice", read, held)
	}
	want := cmp.Or(chunk, DefaultChunkBytes)
	for i, sh := range shards {
		if n := sh.largest.Load(); n > want || n < want/2 {
			t.Errorf("shard %d: the longest read was %d bytes; want at most %d, and over half of that", i, n, want)
		}
	}
}

// TestLoaderChunkSweepLone: when the set fits, the sweep reads a sample that lies alone
// between two the epoch has read, rather than leave it to a miss: half the samples, every
// other one in the shards, read before the gate opens, and the other half pushed once it has.
func TestLoaderChunkSweepLone(t *testing.T) {
	x, ids, k, l, _ := sweepLoader(t, Options{ChunkReads: true})
	var every2 []layout.ID
	for pos := 0; pos < x.Files(); pos += 2 {
		every2 = append(every2, x.ByExtent(pos))
	}
	rng := rand.New(rand.NewPCG(13, 14))
	k.epoch(t, l, every2, rng) // no tick: the gate stays closed
	k.tickEach = 20
	reached := k.epoch(t, l, ids, rng)
	if len(reached) > k.tickEach {
		t.Errorf("%d of the %d samples left reached the Loader; want the %d before the gate opened",
			len(reached), len(ids)-len(every2), k.tickEach)
	}
	if pc := l.Stats().PageCache; pc.ChunkSamples != uint64(len(ids)-len(every2)-len(reached)) {
		t.Errorf("page cache stats %+v", *pc)
	}
}

// TestLoaderChunkSweepOff: without ChunkReads (chunk_reads=off, or a disk cache, whose
// push_chunks pushes its own chunks) nothing is swept, however fast the misses come.
func TestLoaderChunkSweepOff(t *testing.T) {
	_, ids, k, l, _ := sweepLoader(t, Options{})
	k.tickEach = 20
	k.epoch(t, l, ids, rand.New(rand.NewPCG(11, 12)))
	if pc := l.Stats().PageCache; pc.ChunkReads != 0 || pc.ChunkSamples != 0 {
		t.Errorf("%d chunk reads pushed %d samples with ChunkReads off; want none", pc.ChunkReads, pc.ChunkSamples)
	}
}

// TestLoaderChunkReadsSlowReader: a reader that misses at 300 a second (a DataLoader decoding
// on the CPU) gets no chunk reads.
func TestLoaderChunkReadsSlowReader(t *testing.T) {
	defer func(d time.Duration) { testTickEvery = d }(testTickEvery)
	testTickEvery = time.Hour // the test ticks (kernelCache.tickEach): the gate sees its rates, not the clock's
	x, shards, content := dataset(t, 400, 16<<10)
	ids := sortedIDs(content)
	k := newKernelCache(t, content)
	k.tickEach = 3
	l := newInlineLoader(t, x, shards, Options{Push: k.push, Drop: k.drop, ChunkReads: true})
	k.epoch(t, l, ids, rand.New(rand.NewPCG(9, 10)))
	if pc := l.Stats().PageCache; pc.ChunkReads != 0 || pc.ChunkSamples != 0 {
		t.Errorf("%d chunk reads pushed %d samples; want none", pc.ChunkReads, pc.ChunkSamples)
	}
}

// TestChunkGate replays miss rates tick by tick (a tick is 10 ms).
func TestChunkGate(t *testing.T) {
	type phase struct {
		ticks, perTick int
		open           bool // the gate after the phase
	}
	for _, tc := range []struct {
		name   string
		phases []phase
	}{
		{"closed at start", []phase{{1, 0, false}}},
		{"slow reader never opens", []phase{{1000, 4, false}}}, // 400 a second
		{"a burst under 1,000 a second does not open", []phase{{1, 19, false}, {100, 0, false}}},
		{"fast reader opens within 20 ms", []phase{{2, 10, true}}},
		{"stays open while misses fall to 300 a second", []phase{{10, 30, true}, {500, 3, true}}},
		{"closes a second after misses stop", []phase{{10, 30, true}, {90, 0, true}, {2, 0, false}}},
		{"reopens", []phase{{10, 30, true}, {200, 0, false}, {10, 10, true}}},
		// Chunk reads make misses fewer and slower: the gate holds for a second once open.
		{"stays open a second after it opens", []phase{{2, 10, true}, {99, 0, true}, {1, 0, false}}},
	} {
		var g chunkGate
		var misses uint64
		open := false
		for i, p := range tc.phases {
			for range p.ticks {
				misses += uint64(p.perTick)
				open = g.tick(misses)
			}
			if open != p.open {
				t.Errorf("%s: after phase %d: open %v, want %v", tc.name, i, open, p.open)
			}
		}
	}
}

// TestLoaderSortedPasses: sorted scans after cold shuffled epochs, the page cache emptied
// before each (drop_caches), as a validation pass between training epochs is read. Each pass
// reads ahead of its reader from its first READs, so that only the run's first samples and
// its beacons (one in runBeaconEvery) reach the Loader; no chunk read runs beside the run's
// read-ahead, and almost no sample is read twice. (A pass's first READs are of samples
// pushed in the last one, which the planner takes for dropped pushes until it sees the epoch
// begin: the read-ahead skipped every sample of that epoch, and every other pass was a miss
// per sample; the sweep, reading the same samples beside the run's read-ahead, read each
// pass twice.)
func TestLoaderSortedPasses(t *testing.T) {
	x, ids, k, l, _ := sweepLoader(t, Options{ChunkReads: true})
	k.tickEach = 20 // 2,000 misses a second: the gate opens
	rng := rand.New(rand.NewPCG(21, 22))
	for range 3 {
		k.dropAll()
		k.epoch(t, l, ids, rng)
	}
	if l.Stats().PageCache.ChunkReads == 0 {
		t.Fatal("no chunk reads in the cold shuffled epochs")
	}
	var sorted []layout.ID
	for pos := range x.Files() {
		sorted = append(sorted, x.ByExtent(pos))
	}
	start := l.Stats().Backend.Bytes
	const passes = 6
	for pass := range passes {
		before := l.Stats()
		epoch, _, _ := l.d.p.planner.Epoch()
		k.dropAll()
		reached := k.pass(t, l, sorted)
		st := l.Stats()
		if max := len(sorted)/runBeaconEvery + 4; len(reached) > max {
			t.Errorf("pass %d: %d of %d samples reached the Loader; want at most %d", pass, len(reached), len(sorted), max)
		}
		if n := st.PageCache.ChunkReads - before.PageCache.ChunkReads; n != 0 {
			t.Errorf("pass %d: %d chunk reads beside the run's read-ahead", pass, n)
		}
		if e, _, _ := l.d.p.planner.Epoch(); e != epoch+1 {
			t.Errorf("pass %d: epoch %d after %d; want one more", pass, e, epoch)
		}
	}
	// About 2% of the bytes are read twice here, each pass alike (which samples was not traced;
	// a pass's first READs and beacons miss and are read on their own); with the sweep beside
	// the run, 2×.
	if read, set := l.Stats().Backend.Bytes-start, passes*x.ShardBytes(); read > set*33/32 {
		t.Errorf("%d sorted passes read %d bytes from shards of %d: many twice", passes, read, set/passes)
	}
}

// TestLoaderChunkSweepWillNeed: on a serving path of its own (WillNeed, the kernel plane) the
// sweep runs once the path's misses (Options.Misses) come fast: it asks WillNeed for every
// sample the epoch has not read, each once, and waits for each of a chunk read's; while they
// come slowly, or come fast with no reads seen (others reading the shards' devices), it asks
// for nothing.
func TestLoaderChunkSweepWillNeed(t *testing.T) {
	for _, c := range []struct {
		name       string
		fast, seen bool
	}{{"fast", true, true}, {"slow", false, true}, {"unseen", true, false}} {
		fast := c.fast && c.seen
		t.Run(c.name, func(t *testing.T) {
			defer func(d time.Duration) { testTickEvery = d }(testTickEvery)
			testTickEvery = time.Hour // the test ticks
			x, shards, content := dataset(t, 600, 48<<10)
			var (
				mu     sync.Mutex
				asked  = map[layout.ID]int{}
				waits  int
				misses atomic.Uint64
			)
			willNeed := func(id layout.ID, wait bool) bool {
				mu.Lock()
				defer mu.Unlock()
				asked[id]++
				if wait {
					waits++
				}
				return true
			}
			l := newInlineLoader(t, x, shards, Options{WillNeed: willNeed, Drop: func(layout.ID) {}, Misses: misses.Load, ChunkReads: true})
			ids := sortedIDs(content)
			shuffled := slices.Clone(ids)
			rand.New(rand.NewPCG(15, 16)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			seen := map[layout.ID]bool{}
			for i, id := range shuffled[:40] { // 40 reads of a shuffled epoch seen, each a miss of the path's
				if c.seen {
					l.Seen(1, id)
					seen[id] = true
				}
				if c.fast || i%10 == 0 {
					misses.Add(1)
				}
			}
			for range 50 { // the sweep tops its reads up at each tick
				l.tick(nil)
			}
			mu.Lock()
			defer mu.Unlock()
			if !fast {
				if len(asked) != 0 {
					t.Fatalf("%d samples asked for (%s); want none", len(asked), c.name)
				}
				return
			}
			if len(asked) != len(ids)-len(seen) || waits == 0 {
				t.Fatalf("%d samples asked for (%d waits); want the %d the epoch has not read", len(asked), waits, len(ids)-len(seen))
			}
			if pc := l.Stats().PageCache; pc.ChunkReads == 0 || pc.ChunkSamples == 0 || pc.ChunkSamples > uint64(len(asked)) {
				t.Errorf("page cache stats %+v: want chunk reads and the samples they asked for", *pc)
			}
			for id, n := range asked {
				if n != 1 || seen[id] {
					t.Errorf("sample %d asked for %d times, seen %v", id, n, seen[id])
				}
			}
		})
	}
}

// TestLoaderQuiet: on a serving path of its own, the Loader quiets the path's reports of reads
// (Options.Quiet) once the policy has been settled for quietTicks (the set fits and every
// sample was read), wakes it when the storage under the shards is read or a plan comes, and
// quiets it again once settled; never while a sample is still to be read.
func TestLoaderQuiet(t *testing.T) {
	defer func(d time.Duration) { testTickEvery = d }(testTickEvery)
	testTickEvery = time.Hour // the test ticks
	x, shards, content := dataset(t, 60, 8<<10)
	var calls []bool
	var storage atomic.Uint64
	l := newInlineLoader(t, x, shards, Options{WillNeed: func(layout.ID, bool) bool { return true }, Drop: func(layout.ID) {},
		Misses: func() uint64 { return 0 }, Quiet: func(on bool) { calls = append(calls, on) }, StorageReads: storage.Load})
	ids := sortedIDs(content)
	rand.New(rand.NewPCG(17, 18)).Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] }) // no run to read ahead
	ticks := func(n int) {
		for range n {
			l.tick(nil)
		}
	}
	for _, id := range ids[:30] {
		l.Seen(1, id)
	}
	ticks(3 * quietTicks)
	if len(calls) != 0 {
		t.Fatalf("Quiet called %v with half the set read", calls)
	}
	for _, id := range ids[30:] {
		l.Seen(1, id)
	}
	ticks(quietTicks - 1)
	if len(calls) != 0 {
		t.Fatalf("Quiet called %v before the policy was settled for %d ticks", calls, quietTicks)
	}
	ticks(1)
	if !slices.Equal(calls, []bool{true}) {
		t.Fatalf("Quiet called %v once settled for %d ticks; want [true]", calls, quietTicks)
	}
	storage.Add(x.FileBytes() / uint64(x.Files())) // a sample's read from storage
	ticks(1)
	if !slices.Equal(calls, []bool{true, false}) {
		t.Fatalf("Quiet called %v after the storage was read; want [true false]", calls)
	}
	ticks(quietTicks)
	if !slices.Equal(calls, []bool{true, false, true}) {
		t.Fatalf("Quiet called %v a second after; want [true false true]", calls)
	}
	writePathPlan(t, l, ids[:5])
	ticks(3 * quietTicks)
	if !slices.Equal(calls, []bool{true, false, true, false}) {
		t.Fatalf("Quiet called %v after a plan came; want [true false true false]", calls)
	}
	if q := l.Stats().Quiet; q == nil || *q != (QuietStats{Now: false, Quiets: 2, Wakes: 2}) {
		t.Errorf("quiet stats %+v, want now false, 2 quiets, 2 wakes", q)
	}
}
