package prefetch

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aifs/aifs/layout"
)

// pageCache replays epochs through a Residency as the kernel and the Loader would: a sample
// in the page cache is read there (it never reaches aifs), any other comes as a READ; the
// Residency ticks every tickReads reads and its drops leave the page cache.
type pageCache struct {
	r         *Residency
	cat       catalog
	in        map[layout.ID]bool
	inBytes   int64 // in whole pages, as the kernel holds them
	peak      int64 // the most bytes in the page cache after a tick's drops
	tickReads int
	reads     int
	only      []layout.ID // the samples an epoch reads; nil: every file
}

func newPageCache(cat catalog, budget int64) *pageCache {
	r := NewResidency(cat, 16<<20)
	pc := &pageCache{r: r, cat: cat, in: map[layout.ID]bool{}, tickReads: 8}
	pc.apply(r.SetBudget(budget, nil))
	return pc
}

func (pc *pageCache) apply(drop []layout.ID) {
	for _, id := range drop {
		if !pc.in[id] {
			panic("dropped a sample not in the page cache")
		}
		delete(pc.in, id)
		pc.inBytes -= pageBytes(int64(pc.cat[id].Size))
	}
}

// epoch reads every file once in a shuffled order and returns the samples that reached aifs.
func (pc *pageCache) epoch(rng *rand.Rand) map[layout.ID]bool {
	files := pc.cat.files()
	if pc.only != nil {
		files = append([]layout.ID(nil), pc.only...)
	}
	rng.Shuffle(len(files), func(i, j int) { files[i], files[j] = files[j], files[i] })
	reached := map[layout.ID]bool{}
	for _, id := range files {
		if !pc.in[id] {
			reached[id] = true
			pc.r.Read(id)
			pc.in[id] = true
			pc.inBytes += pageBytes(int64(pc.cat[id].Size))
		}
		if pc.reads++; pc.reads%pc.tickReads == 0 {
			pc.tick(nil)
		}
	}
	return reached
}

func (pc *pageCache) tick(passed func(layout.ID) bool) {
	pc.apply(pc.r.Tick(passed, nil, nil))
	pc.peak = max(pc.peak, pc.inBytes)
}

// TestResidencyFits: when the set fits the budget nothing is ever dropped or refused, and the
// second epoch finds every sample in the page cache.
func TestResidencyFits(t *testing.T) {
	cat := newCatalog(1000, 10, 100<<10, 64<<20)
	pc := newPageCache(cat, 200<<20) // 100 MiB of samples
	rng := rand.New(rand.NewPCG(1, 2))
	if got := len(pc.epoch(rng)); got != 1000 {
		t.Fatalf("the cold epoch brought %d samples to aifs, want 1000", got)
	}
	if got := len(pc.epoch(rng)); got != 0 {
		t.Errorf("%d samples reached aifs in the second epoch, want 0", got)
	}
	st := pc.r.Stats()
	if !st.Fits || st.Drops != 0 || st.SubsetFraction != 1 || st.ResidentBytes != 1000*100<<10 {
		t.Errorf("stats %+v, want everything resident and nothing dropped", st)
	}
}

// TestResidencySubset replays shuffled epochs with a budget of half the set: from the second
// epoch on, the samples that reach aifs are exactly those outside the subset (the subset stays
// resident), their share is about the subset's, and the page cache never holds more than the
// budget once a tick has dropped what it lets go.
func TestResidencySubset(t *testing.T) {
	const n, size = 4000, 100 << 10
	cat := newCatalog(n, 40, size, 64<<20)
	data := int64(n * size)
	budget := data / 2
	pc := newPageCache(cat, budget)
	rng := rand.New(rand.NewPCG(3, 4))
	pc.epoch(rng)
	st := pc.r.Stats()
	// The policy weighs the budget against the set's pages: each file's last page half full.
	want := (1 - 1.0/16) / 2 * float64(data) / float64(data+n*pageSize/2)
	if st.Fits || math.Abs(st.SubsetFraction-want) > 0.005 {
		t.Fatalf("subset fraction %.3f for a budget of half the set, want (1-1/16)/2 of its pages, %.3f", st.SubsetFraction, want)
	}
	var subset int
	for _, id := range cat.files() {
		if pc.r.Keeps(id) {
			subset++
		}
	}
	for e := 2; e <= 4; e++ {
		reached := pc.epoch(rng)
		for _, id := range cat.files() {
			if pc.r.Keeps(id) == reached[id] {
				t.Fatalf("epoch %d: sample %d in the subset %v, reached aifs %v", e, id, pc.r.Keeps(id), reached[id])
			}
		}
		if hit := 1 - float64(len(reached))/n; hit < 0.9*float64(budget)/float64(data) {
			t.Errorf("epoch %d: hit rate %.3f", e, hit)
		}
	}
	if len(cat.files())-subset < 1 || subset < n*2/5 {
		t.Errorf("%d of %d samples in the subset", subset, n)
	}
	if pc.peak > budget {
		t.Errorf("the page cache held %d bytes after a tick, over the %d-byte budget", pc.peak, budget)
	}
	st = pc.r.Stats()
	if st.KernelEvicted != 0 || st.SubsetBytes != int64(subset)*size || st.ResidentBytes != pc.inBytes {
		t.Errorf("stats %+v; %d subset samples, %d bytes in the page cache", st, subset, pc.inBytes)
	}
}

// TestResidencySmallFiles: a set of files under a page each (CIFAR's PNGs are 2-3 KB) takes a
// page a file in the page cache; a subset sized by their bytes would hold a third more pages
// than a budget of half the set's pages.
func TestResidencySmallFiles(t *testing.T) {
	const n, size = 4000, 3000
	cat := newCatalog(n, 40, size, 64<<20)
	budget := int64(n) * pageSize / 2
	pc := newPageCache(cat, budget)
	rng := rand.New(rand.NewPCG(7, 8))
	for e := 1; e <= 3; e++ {
		reached := pc.epoch(rng)
		if hit := 1 - float64(len(reached))/n; e > 1 && hit < 0.4 {
			t.Errorf("epoch %d: hit rate %.3f, want about (1-1/16)/2 of the files", e, hit)
		}
	}
	if pc.peak > budget {
		t.Errorf("the page cache held %d bytes after a tick, over the %d-byte budget", pc.peak, budget)
	}
}

// TestResidencyScope: a node that reads a quarter of the set (its range, named by its plans)
// keeps all of it under a budget of half the set once the scope says so, where without the
// scope the subset would be half of it; under a budget smaller than its range, the subset is
// that share of the range, not of the set.
func TestResidencyScope(t *testing.T) {
	const n, size = 4000, 100 << 10
	cat := newCatalog(n, 40, size, 64<<20)
	data, rangeBytes := int64(n*size), int64(n/4*size)
	rng := rand.New(rand.NewPCG(5, 6))
	for _, tc := range []struct {
		budget int64
		scope  bool
		hit    [2]float64 // the bounds of the node's later epochs' hit rate
	}{
		{data / 2, false, [2]float64{0.40, 0.53}},
		{data / 2, true, [2]float64{1, 1}},
		{rangeBytes / 2, false, [2]float64{0.05, 0.18}},
		{rangeBytes / 2, true, [2]float64{0.40, 0.53}},
	} {
		pc := newPageCache(cat, tc.budget)
		pc.only = cat.files()[n/2 : n/2+n/4]
		if tc.scope {
			pc.apply(pc.r.SetScope(rangeBytes, nil))
		}
		pc.epoch(rng)
		for e := 2; e <= 3; e++ {
			hit := 1 - float64(len(pc.epoch(rng)))/float64(len(pc.only))
			if hit < tc.hit[0] || hit > tc.hit[1] {
				t.Errorf("budget %d MiB, scope %v, epoch %d: hit rate %.3f, want %.2f-%.2f", tc.budget>>20, tc.scope, e, hit, tc.hit[0], tc.hit[1])
			}
		}
		if st := pc.r.Stats(); tc.scope && st.ScopeBytes != rangeBytes || pc.peak > tc.budget {
			t.Errorf("budget %d MiB, scope %v: stats %+v, page cache peak %d", tc.budget>>20, tc.scope, st, pc.peak)
		}
	}
	// The scope follows the plans: a change of less than 1/16 is ignored, and a scope of the
	// whole set or more (or 0) means the whole set.
	r := NewResidency(cat, 16<<20)
	r.SetBudget(data/2, nil)
	if r.SetScope(rangeBytes, nil); !r.Fits() {
		t.Error("a range of a quarter of the set does not fit a budget of half")
	}
	if r.SetScope(rangeBytes+rangeBytes/20, nil); r.Stats().ScopeBytes != rangeBytes {
		t.Errorf("a scope 5%% larger was taken: %d", r.Stats().ScopeBytes)
	}
	if r.SetScope(2*data, nil); r.Fits() || r.Stats().ScopeBytes != 0 {
		t.Errorf("a scope over the set: fits %v, scope %d", r.Fits(), r.Stats().ScopeBytes)
	}
}

// TestResidencyReadDropped: a sample read outside the subset is dropped a whole tick after its
// read, not in the tick it was read in (its reader copies it first); a second READ of a sample
// believed resident is counted as the kernel's drop.
func TestResidencyReadDropped(t *testing.T) {
	cat := newCatalog(100, 1, 100<<10, 64<<20)
	r := NewResidency(cat, 16<<20)
	r.SetBudget(5<<20, nil) // half the set
	var out layout.ID
	for _, id := range cat.files() {
		if !r.Keeps(id) {
			out = id
			break
		}
	}
	r.Read(out)
	r.Read(out)
	if drop := r.Tick(nil, nil, nil); len(drop) != 0 {
		t.Fatalf("dropped %v in the tick of its read", drop)
	}
	if drop := r.Tick(nil, nil, nil); len(drop) != 1 || drop[0] != out {
		t.Fatalf("dropped %v, want [%d]", drop, out)
	}
	if st := r.Stats(); st.Drops != 1 || st.KernelEvicted != 1 || st.ResidentBytes != 0 || st.WindowBytes != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestResidencyPushes: a push outside the subset waits in the window until a plan's readers
// pass it or its time is up, and never goes before it has landed; pushes past the window are
// refused; the subset's are always taken.
func TestResidencyPushes(t *testing.T) {
	const size = 100 << 10
	cat := newCatalog(1000, 1, size, 64<<20)
	r := NewResidency(cat, 16<<20)
	budget := int64(32 << 20) // window 2 MiB: 20 samples
	r.SetBudget(budget, nil)
	var in, out []layout.ID
	for _, id := range cat.files() {
		if r.Keeps(id) {
			in = append(in, id)
		} else {
			out = append(out, id)
		}
	}
	for _, id := range in[:10] {
		if !r.Push(id) {
			t.Fatalf("push of subset sample %d refused", id)
		}
	}
	pushed := 0
	for _, id := range out[:30] {
		if r.Push(id) {
			pushed++
		}
	}
	if want := int(r.window / size); pushed != want {
		t.Errorf("%d pushes outside the subset taken, want %d (the window)", pushed, want)
	}
	if st := r.Stats(); st.PushesRefused != uint64(30-pushed) || st.WindowBytes != int64(pushed)*size {
		t.Errorf("stats %+v", st)
	}
	passed := map[layout.ID]bool{out[0]: true, out[1]: true}
	// Until the kernel has taken a push (Landed), its sample is not dropped: a drop sent first
	// would leave the pushed pages behind, uncounted.
	if drop := r.Tick(func(id layout.ID) bool { return passed[id] }, nil, nil); len(drop) != 0 {
		t.Fatalf("dropped %v, pushes that had not landed", drop)
	}
	for _, id := range append(in[:10:10], out[:30]...) {
		r.Landed(id)
	}
	drop := r.Tick(func(id layout.ID) bool { return passed[id] }, nil, nil)
	if len(drop) != 2 || drop[0] != out[0] || drop[1] != out[1] {
		t.Fatalf("dropped %v, want the two the readers passed", drop)
	}
	for range pushedTicks - 3 {
		if drop := r.Tick(nil, nil, nil); len(drop) != 0 {
			t.Fatalf("dropped %v before their time", drop)
		}
	}
	if drop := r.Tick(nil, nil, nil); len(drop) != pushed-2 {
		t.Fatalf("dropped %d at their time, want %d", len(drop), pushed-2)
	}
	r.Unpush(in[0])
	if st := r.Stats(); st.ResidentBytes != 9*size || st.SubsetBytes != 9*size || st.WindowBytes != 0 {
		t.Errorf("after the drops and an Unpush: %+v", st)
	}
}

// TestResidencyBudgetChanges: a budget that falls drops the subset's samples it leaves out, and
// only those; one that rises by less than 1/16 changes nothing; one that covers the set keeps
// everything.
func TestResidencyBudgetChanges(t *testing.T) {
	const n, size = 2000, 100 << 10
	cat := newCatalog(n, 4, size, 64<<20)
	pc := newPageCache(cat, n*size/2)
	rng := rand.New(rand.NewPCG(5, 6))
	pc.epoch(rng)
	pc.tick(nil)
	before := map[layout.ID]bool{}
	for id := range pc.in {
		before[id] = true
	}
	pc.apply(pc.r.SetBudget(n*size/4, nil))
	for id := range before {
		if pc.in[id] != pc.r.Keeps(id) {
			t.Fatalf("sample %d: in the page cache %v, in the smaller subset %v", id, pc.in[id], pc.r.Keeps(id))
		}
	}
	if pc.inBytes > n*size/4 || pc.r.Stats().ResidentBytes != pc.inBytes {
		t.Errorf("%d bytes in the page cache (estimate %d) after the budget fell to %d", pc.inBytes, pc.r.Stats().ResidentBytes, n*size/4)
	}
	f := pc.r.Stats().SubsetFraction
	if drop := pc.r.SetBudget(n*size/4+n*size/100, nil); len(drop) != 0 || pc.r.Stats().SubsetFraction != f {
		t.Errorf("a 4%% rise changed the subset (%d drops, fraction %.3f -> %.3f)", len(drop), f, pc.r.Stats().SubsetFraction)
	}
	pc.apply(pc.r.SetBudget(2*n*size, nil))
	pc.epoch(rng)
	if got := len(pc.epoch(rng)); got != 0 || !pc.r.Fits() {
		t.Errorf("%d samples reached aifs once the set fits", got)
	}
}
