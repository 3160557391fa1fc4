package prefetch

import (
	"bytes"
	"math/rand/v2"
	"sync"
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
	reading map[layout.ID]bool // READs in flight: their pages are locked, a drop leaves them
	drops   int
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
	}
	l.tick(nil) // a whole tick after the last read: its drops are due
	l.tick(nil)
	return reached
}

// TestLoaderPageCacheSubset: with a budget of half the set, a Loader keeps a stable subset in
// the (simulated) page cache and drops the other samples after their read: from the second
// epoch on exactly the samples outside the subset reach it, and the page cache holds no more
// than the budget once the drops are done.
func TestLoaderPageCacheSubset(t *testing.T) {
	x, shards, content := dataset(t, 400, 16<<10)
	ids := sortedIDs(content)
	data := contentBytes(content)
	k := newKernelCache(t, content)
	defer func(d time.Duration) { tickEvery = d }(tickEvery)
	tickEvery = time.Hour // the test ticks (kernelCache.epoch), so that drops never race its reads
	l := newTestLoader(t, x, shards, Options{Push: k.push, Drop: k.drop,
		PageCache: func([]uint32) (int64, string) { return data / 2, "test" }})
	rng := rand.New(rand.NewPCG(7, 8))
	k.epoch(t, l, ids, rng)
	for e := 2; e <= 3; e++ {
		reached := k.epoch(t, l, ids, rng)
		pushed := k.pushedIDs() // read ahead (a sequential run by chance): they may wait 2 s in the window
		l.lockPlanner()
		for _, id := range ids {
			if keep := l.res.Keeps(id); keep == reached[id] && !(pushed[id] && !keep) {
				t.Errorf("epoch %d: sample %d in the subset %v, reached the Loader %v", e, id, keep, reached[id])
			}
		}
		l.unlockPlanner()
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

// TestLoaderChunkReads: when the set fits, a cold miss reads the other samples of its 4 MiB
// chunk in the background and pushes them, each once and with the right bytes, so that a cold
// shuffled epoch sends a few READs per chunk, not one per sample; nothing is dropped.
func TestLoaderChunkReads(t *testing.T) {
	x, shards, content := dataset(t, 400, 16<<10)
	ids := sortedIDs(content)
	k := newKernelCache(t, content)
	l := newInlineLoader(t, x, shards, Options{Push: k.push, Drop: k.drop, ChunkReads: true})
	reached := k.epoch(t, l, ids, rand.New(rand.NewPCG(9, 10)))
	st := l.Stats()
	t.Logf("%d of %d samples reached the Loader; %+v", len(reached), len(ids), *st.PageCache)
	if len(reached) > len(ids)/10 {
		t.Errorf("%d of %d samples reached the Loader in a cold epoch with chunk reads", len(reached), len(ids))
	}
	for id, n := range k.pushes {
		if n > 1 || reached[id] {
			t.Errorf("sample %d pushed %d times, and read: %v", id, n, reached[id])
		}
	}
	if pc := st.PageCache; !pc.Fits || pc.ChunkReads == 0 || pc.ChunkSamples != uint64(len(k.pushes)) || pc.Drops != 0 || k.drops != 0 {
		t.Errorf("page cache stats %+v, %d samples pushed, %d drops", *pc, len(k.pushes), k.drops)
	}
	if st.Prefetch.HeldBytes != 0 {
		t.Errorf("%d bytes still held after the epoch", st.Prefetch.HeldBytes)
	}
}
