package prefetch

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/aifs/aifs/layout"
)

// catalog is a Catalog of n samples of the given size in pack order: a root directory (id 0),
// then classes directories of n/classes files each, every file laid end to end in shards of
// shardSize bytes, as Pack would lay them.
type catalog []layout.Entry

func newCatalog(n, classes int, size, shardSize uint64) catalog {
	c := catalog{{Mode: 0o040755}}
	for range classes {
		c = append(c, layout.Entry{Mode: 0o040755})
	}
	var shard uint32
	var off uint64
	for range n {
		if off+size > shardSize {
			shard, off = shard+1, 0
		}
		c = append(c, layout.Entry{Mode: 0o100644, Shard: shard, Offset: off, Size: size})
		off += size
	}
	return c
}

func (c catalog) Len() int                        { return len(c) }
func (c catalog) Entry(id layout.ID) layout.Entry { return c[id] }
func (c catalog) Files() int                      { return len(c.files()) }

func (c catalog) FileBytes() (n uint64) {
	for _, e := range c {
		if !e.IsDir() {
			n += e.Size
		}
	}
	return n
}

// NextFile scans, as a reference for the index's runs of directories.
func (c catalog) NextFile(id layout.ID) layout.ID {
	for id++; int(id) < len(c) && c[id].IsDir(); id++ {
	}
	return id
}

func (c catalog) files() []layout.ID {
	var ids []layout.ID
	for id, e := range c {
		if !e.IsDir() {
			ids = append(ids, layout.ID(id))
		}
	}
	return ids
}

// replay is a Loader reduced to bookkeeping: it reads samples in order through a Planner,
// "fetches" what Next asks for at once, holding at most budget bytes of fetched-but-unread
// samples, and counts what was read ahead before it was needed.
type replay struct {
	p       *Planner
	cat     catalog
	budget  int64
	held    map[layout.ID]bool
	heldB   int64
	hits    int
	fetches []Fetch
}

func newReplay(cat catalog, cfg PlannerConfig, budget int64) *replay {
	return &replay{p: NewPlanner(cat, cfg), cat: cat, budget: budget, held: map[layout.ID]bool{}}
}

func (r *replay) have(id layout.ID) bool { return r.held[id] }

func (r *replay) next() {
	for _, f := range r.p.Next(r.budget-r.heldB, r.have) {
		r.fetches = append(r.fetches, f)
		for _, id := range f.IDs {
			if r.held[id] {
				panic("fetched twice")
			}
			r.held[id] = true
			r.heldB += int64(r.cat[id].Size)
		}
	}
}

func (r *replay) read(id layout.ID) {
	if r.held[id] {
		r.hits++
		delete(r.held, id)
		r.heldB -= int64(r.cat[id].Size)
	}
	r.p.Read(id, 0)
	r.next()
}

func shuffled(ids []layout.ID, seed uint64) []layout.ID {
	out := slices.Clone(ids)
	rand.New(rand.NewPCG(seed, 0)).Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// TestPlannerPushed: a sample Pushed into the page cache counts as read; a READ of it
// later in the epoch (the kernel evicted its pages first) does not start the next epoch, and
// in the next epoch a second read of anything does.
func TestPlannerPushed(t *testing.T) {
	cat := newCatalog(1000, 10, 100<<10, 1<<30)
	order := shuffled(cat.files(), 1)
	p := NewPlanner(cat, PlannerConfig{})
	for i, id := range order {
		if i%2 == 0 {
			p.Pushed(id)
		} else {
			p.Read(id, 0)
		}
	}
	for _, id := range order[:600:600] { // long after their push: READs of dropped pages
		if slices.Index(order, id)%2 == 0 {
			p.Read(id, 0)
		}
	}
	if epoch, covered, _ := p.Epoch(); epoch != 1 || covered != 1000 {
		t.Fatalf("after READs of pushed samples: epoch %d, covered %d; want 1 and 1000", epoch, covered)
	}
	for _, id := range shuffled(cat.files(), 2)[:500] {
		p.Read(id, 0)
	}
	if epoch, covered, _ := p.Epoch(); epoch != 2 || covered < 490 {
		t.Errorf("half of the next epoch: epoch %d, covered %d; want 2 and about 500", epoch, covered)
	}
}

// TestPlannerEpochs replays whole epochs and checks the epoch number and coverage.
func TestPlannerEpochs(t *testing.T) {
	cat := newCatalog(1000, 10, 100<<10, 1<<30)
	files := cat.files()
	tests := []struct {
		name   string
		orders [][]layout.ID
		epoch  int
		cover  int
	}{
		{"one shuffled epoch", [][]layout.ID{shuffled(files, 1)}, 1, 1000},
		{"three shuffled epochs", [][]layout.ID{shuffled(files, 1), shuffled(files, 2), shuffled(files, 3)}, 3, 1000},
		{"sorted then shuffled", [][]layout.ID{files, shuffled(files, 2)}, 2, 1000},
		{"half an epoch", [][]layout.ID{files[:500]}, 1, 500},
		// The reads of the new epoch that were also among the last recentReads of the old one
		// count as repeats: the coverage may be short by those (one here).
		{"an epoch and a half", [][]layout.ID{shuffled(files, 1), shuffled(files, 2)[:300]}, 2, 299},
		// a sample read again among the last reads (a retry, a page evicted mid-read) does not
		// start an epoch
		{"repeats", [][]layout.ID{{files[0], files[1], files[0], files[2], files[1]}}, 1, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPlanner(cat, PlannerConfig{})
			for _, order := range tt.orders {
				for _, id := range order {
					p.Read(id, 0)
				}
			}
			epoch, covered, n := p.Epoch()
			if epoch != tt.epoch || covered != tt.cover || n != 1000 {
				t.Errorf("epoch %d, covered %d of %d; want epoch %d, covered %d of 1000", epoch, covered, n, tt.epoch, tt.cover)
			}
		})
	}
}

// TestPlannerRetries: a reader's second READ of the sample it last started reading is a retry,
// however much came between (other readers' READs, hundreds of pushes: a memory cgroup at its
// limit, TestPageCacheMemoryCgroup); after as much, the READ of a sample by another reader, or
// by the same reader once it has moved on, starts the next epoch.
func TestPlannerRetries(t *testing.T) {
	cat := newCatalog(1000, 10, 100<<10, 1<<30)
	order := shuffled(cat.files(), 1)
	const readers, first = 8, 100 // readers' pids: first, first+1, ...
	epochWithRetries := func(t *testing.T) *Planner {
		t.Helper()
		p := NewPlanner(cat, PlannerConfig{})
		for i := 0; i < 400; i += readers {
			for r := range readers {
				p.Read(order[i+r], first+uint32(r))
			}
			pushMany(p, order[600:900])
			for r := range readers {
				p.Read(order[i+r], first+uint32(r)) // each retries, 300 pushes and 8 READs later
			}
		}
		if epoch, covered, _ := p.Epoch(); epoch != 1 || covered != 700 {
			t.Fatalf("400 samples read, each twice, and 300 pushed: epoch %d, covered %d; want 1 and 700", epoch, covered)
		}
		pushMany(p, order[600:900])
		return p
	}
	t.Run("told out of order", func(t *testing.T) {
		// Reader first reads order[400], then order[401]; the planner is told of them the
		// other way round (pendingReads drains stripe by stripe), then of the retry of 401.
		p := epochWithRetries(t)
		p.Read(order[401], first)
		p.Read(order[400], first)
		pushMany(p, order[600:900])
		p.Read(order[401], first)
		if epoch, covered, _ := p.Epoch(); epoch != 1 || covered != 702 {
			t.Errorf("epoch %d, covered %d; want 1 and 702", epoch, covered)
		}
	})
	for _, tt := range []struct {
		name   string
		id     layout.ID
		reader uint32
	}{
		{"another reader", order[392], first + 1}, // reader first read order[392] last
		{"the same reader, moved on", order[0], first},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := epochWithRetries(t)
			p.Read(tt.id, tt.reader)
			if epoch, covered, _ := p.Epoch(); epoch != 2 || covered != 1 {
				t.Errorf("epoch %d, covered %d; want 2 and 1", epoch, covered)
			}
		})
	}
}

// pushMany tells p of the pushes of ids.
func pushMany(p *Planner, ids []layout.ID) {
	for _, id := range ids {
		p.Pushed(id)
	}
}

// TestPlannerSequential replays a sorted scan: after the second consecutive read the planner
// reads ahead in coalesced fetches whose window grows to SeqMax, and almost every read after
// that is a hit; a shuffled epoch triggers (almost) no read-ahead.
func TestPlannerSequential(t *testing.T) {
	const size = 100 << 10
	cat := newCatalog(2000, 4, size, 64<<20) // crosses shards every 655 samples
	cfg := PlannerConfig{SeqStart: 1 << 20, SeqMax: 8 << 20, MaxFetch: 4 << 20}

	r := newReplay(cat, cfg, 64<<20)
	for _, id := range cat.files() {
		r.read(id)
	}
	if r.hits < 2000-5 {
		t.Errorf("sorted scan: %d hits of 2000, want all but the first few", r.hits)
	}
	var biggest int64
	for _, f := range r.fetches {
		biggest = max(biggest, f.Len)
		if f.Len > cfg.MaxFetch {
			t.Errorf("fetch of %d bytes exceeds MaxFetch %d", f.Len, cfg.MaxFetch)
		}
		e0, e1 := cat[f.IDs[0]], cat[f.IDs[len(f.IDs)-1]]
		if int64(e0.Offset) != f.Off || int64(e1.Offset+e1.Size) != f.Off+f.Len || e0.Shard != f.Shard || e1.Shard != f.Shard {
			t.Errorf("fetch %+v does not span exactly its samples in one shard", f)
		}
	}
	if biggest < 4<<20-size {
		t.Errorf("largest fetch %d bytes: the window did not grow to coalesced reads of MaxFetch", biggest)
	}
	if n := len(r.fetches); n > 2000*size/(2<<20) {
		t.Errorf("%d fetches for 2000 samples: reads are not coalesced", n)
	}

	// In a shuffled epoch a read follows its pack-order predecessor by chance, about once per
	// stream slot per epoch, and each such pair reads one first window ahead (10 samples
	// here): a few hundred samples whatever the dataset's size.
	big := newCatalog(20000, 20, size, 1<<30)
	r = newReplay(big, cfg, 64<<20)
	for _, id := range shuffled(big.files(), 7) {
		r.read(id)
	}
	var fetched int
	for _, f := range r.fetches {
		fetched += len(f.IDs)
	}
	if fetched > 20000/50 {
		t.Errorf("shuffled epoch: %d of 20000 samples read ahead, want under 2%%", fetched)
	}

	// The same when pack order is not the order of the bytes (a ZIP made by zip -r, its members
	// in the order zip walked the tree): a run's window is its samples' bytes, not a span of a
	// shard, so a chance pair reads one window ahead, and a sorted scan holds at most SeqMax.
	for _, sorted := range []bool{false, true} {
		c := scatter(newCatalog(20000, 20, size, 1<<30), 9)
		r = newReplay(c, cfg, 1<<30)
		ids := c.files()
		if !sorted {
			ids = shuffled(ids, 7)
		}
		var held int64
		for _, id := range ids {
			r.read(id)
			held = max(held, r.heldB)
			if !sorted && r.p.Streaming() {
				t.Fatalf("shuffled epoch over scattered extents: a run streams at sample %d", id)
			}
		}
		switch {
		case sorted && r.hits < 20000-5:
			t.Errorf("sorted scan of scattered extents: %d hits of 20000, want all but the first few", r.hits)
		case sorted && held > cfg.SeqMax+size:
			t.Errorf("sorted scan of scattered extents: %d bytes held ahead, want at most SeqMax %d", held, cfg.SeqMax)
		case !sorted && len(r.fetches) > 20000/50:
			t.Errorf("shuffled epoch over scattered extents: %d reads ahead, want under 2%% of the samples", len(r.fetches))
		}
	}
}

// scatter moves the files' bytes of c in each shard to an order shuffled from seed, so that
// pack order is not extent order.
func scatter(c catalog, seed uint64) catalog {
	byShard := map[uint32][]layout.ID{}
	for _, id := range c.files() {
		byShard[c[id].Shard] = append(byShard[c[id].Shard], id)
	}
	for _, ids := range byShard {
		offs := make([]uint64, len(ids))
		for i, id := range ids {
			offs[i] = c[id].Offset
		}
		for i, id := range shuffled(ids, seed) {
			c[id].Offset = offs[i]
		}
	}
	return c
}

// TestPlannerPlans replays epochs with plans: the planner keeps PlanDepth samples ahead in
// plan order within the budget, every read is a hit, several writers each get their share,
// and a new plan replaces the old one.
func TestPlannerPlans(t *testing.T) {
	const size = 100 << 10
	cat := newCatalog(1000, 10, size, 1<<30)
	files := cat.files()
	cfg := PlannerConfig{PlanDepth: 16}

	t.Run("one writer", func(t *testing.T) {
		r := newReplay(cat, cfg, 64<<20)
		// every other file, so that no two reads follow pack order and only the plan reads ahead
		var half []layout.ID
		for i := 0; i < len(files); i += 2 {
			half = append(half, files[i])
		}
		order := shuffled(half, 3)
		r.p.SetPlan(1, order)
		r.next()
		if len(r.held) != 16 {
			t.Fatalf("after the plan: %d samples fetched, want PlanDepth = 16", len(r.held))
		}
		for i, id := range order {
			if !r.held[id] {
				t.Fatalf("read %d (sample %d) was not fetched ahead", i, id)
			}
			r.read(id)
			if len(r.held) > 16 {
				t.Fatalf("%d samples held ahead, more than PlanDepth", len(r.held))
			}
		}
		if r.hits != 500 {
			t.Errorf("%d hits of 500", r.hits)
		}
		pos := r.p.Plans()
		if len(pos) != 1 || pos[0].Read != 500 || pos[0].Samples != 500 {
			t.Errorf("plan positions %+v, want 500 of 500 read", pos)
		}
	})

	t.Run("budget", func(t *testing.T) {
		r := newReplay(cat, cfg, 5*size)
		order := shuffled(files, 4)
		r.p.SetPlan(1, order)
		for _, id := range order {
			r.read(id)
			if r.heldB > 5*size {
				t.Fatalf("%d bytes held, budget %d", r.heldB, 5*size)
			}
		}
		if r.hits < 990 {
			t.Errorf("%d hits of 1000 with a budget of 5 samples", r.hits)
		}
	})

	t.Run("several writers", func(t *testing.T) {
		// Two ranks of a DistributedSampler: disjoint halves, read interleaved.
		r := newReplay(cat, cfg, 64<<20)
		order := shuffled(files, 5)
		a, b := order[:500], order[500:]
		r.p.SetPlan(10, a)
		r.p.SetPlan(20, b)
		r.next()
		if len(r.held) != 32 {
			t.Fatalf("%d samples fetched for two plans, want 2×16", len(r.held))
		}
		for i := range 500 {
			r.read(a[i])
			r.read(b[i])
		}
		if r.hits != 1000 {
			t.Errorf("%d hits of 1000", r.hits)
		}
	})

	t.Run("replaced plan", func(t *testing.T) {
		r := newReplay(cat, cfg, 64<<20)
		old := shuffled(files, 6)
		r.p.SetPlan(1, old)
		for _, id := range old[:100] {
			r.read(id)
		}
		next := shuffled(files, 7)
		r.p.SetPlan(1, next) // next epoch
		r.hits = 0
		for _, id := range next[:100] {
			r.read(id)
		}
		if r.hits < 100-16 { // samples of the old plan held ahead may be read later
			t.Errorf("%d hits of 100 after a new plan", r.hits)
		}
		if pos := r.p.Plans(); len(pos) != 1 || pos[0].Read != 100 {
			t.Errorf("plan positions %+v, want one plan with 100 read", pos)
		}
	})

	t.Run("appended plan", func(t *testing.T) {
		r := newReplay(cat, cfg, 64<<20)
		order := shuffled(files, 8)
		r.p.SetPlan(1, order[:10])
		r.p.AppendPlan(1, order[10:])
		r.next()
		for _, id := range order {
			r.read(id)
		}
		if r.hits != 1000 {
			t.Errorf("%d hits of 1000 with a plan written in two parts", r.hits)
		}
	})
}

// TestPlannerCoalesce checks the grouping of planned samples into reads.
func TestPlannerCoalesce(t *testing.T) {
	cat := catalog{
		{Mode: 0o040755},
		{Mode: 0o100644, Shard: 0, Offset: 0, Size: 100},
		{Mode: 0o100644, Shard: 0, Offset: 100, Size: 100},
		{Mode: 0o100644, Shard: 0, Offset: 10000, Size: 100}, // 9,800 bytes after the last
		{Mode: 0o100644, Shard: 1, Offset: 0, Size: 100},
		{Mode: 0o100644, Shard: 1, Offset: 200, Size: 5000},
	}
	p := NewPlanner(cat, PlannerConfig{Gap: 1000, MaxFetch: 4000})
	got := p.coalesce([]layout.ID{5, 3, 1, 4, 2})
	want := []Fetch{
		{Shard: 0, Off: 0, Len: 200, IDs: []layout.ID{1, 2}},
		{Shard: 0, Off: 10000, Len: 100, IDs: []layout.ID{3}},
		{Shard: 1, Off: 0, Len: 100, IDs: []layout.ID{4}},
		{Shard: 1, Off: 200, Len: 5000, IDs: []layout.ID{5}}, // over MaxFetch alone: its own read
	}
	if !slices.EqualFunc(got, want, func(a, b Fetch) bool {
		return a.Shard == b.Shard && a.Off == b.Off && a.Len == b.Len && slices.Equal(a.IDs, b.IDs)
	}) {
		t.Errorf("coalesce:\n got %+v\nwant %+v", got, want)
	}
}

// TestPlannerPlannedBytes: the plans' bytes count each sample once, however many plans name
// it, and follow plans replaced, appended to and taken over by a new writer.
func TestPlannerPlannedBytes(t *testing.T) {
	const size = 100 << 10
	cat := newCatalog(100, 10, size, 1<<30)
	files := cat.files()
	p := NewPlanner(cat, PlannerConfig{})
	for _, step := range []struct {
		do   func()
		want int
	}{
		{func() { p.SetPlan(1, files[:40]) }, 40},
		{func() { p.AppendPlan(1, files[40:50]) }, 50},
		{func() { p.SetPlan(2, files[30:60]) }, 60}, // 30-49 in both plans
		{func() { p.SetPlan(1, files[:10]) }, 40},   // 0-9 and 2's 30-59
		{func() { p.SetPlan(2, nil) }, 10},
	} {
		step.do()
		if got := p.PlannedBytes(); got != int64(step.want*size) {
			t.Fatalf("planned %d samples' bytes, want %d", got/size, step.want)
		}
	}
	for w := uint32(10); w < 10+maxWriters; w++ { // writer 1's plan is taken over
		p.SetPlan(w, files[90:91])
	}
	if got := p.PlannedBytes(); got != size {
		t.Errorf("after writer 1's plan was taken over: %d samples' bytes planned, want 1", got/size)
	}
}

// TestPlannerPlannedRange: two plans that shuffle one contiguous range between them (a node's
// range, read by its two ranks) fetch nothing outside it, however the READs interleave: a READ a
// plan explains never opens or continues a sequential run, whose read-ahead would run past the
// range's end into another node's data.
func TestPlannerPlannedRange(t *testing.T) {
	const size = 100 << 10
	cat := newCatalog(1000, 10, size, 1<<30)
	files := cat.files()
	inRange := map[layout.ID]bool{}
	for _, id := range files[300:600] {
		inRange[id] = true
	}
	order := shuffled(files[300:598], 9)
	// An adjacent pair at the range's end first, as a shuffle sometimes puts it, to start a run.
	a, b := append([]layout.ID{files[598], files[599]}, order[:149]...), order[149:]
	r := newReplay(cat, PlannerConfig{PlanDepth: 16}, 64<<20)
	r.p.SetPlan(1, a)
	r.p.SetPlan(2, b)
	for i := 0; i < len(b); i++ {
		for _, id := range [2][]layout.ID{a, b} {
			if i < len(id) {
				r.read(id[i])
			}
		}
	}
	for _, f := range r.fetches {
		for _, id := range f.IDs {
			if !inRange[id] {
				t.Fatalf("fetched sample %d, outside the planned range", id)
			}
		}
	}
	if r.hits < 250 {
		t.Errorf("%d of 300 reads found read ahead", r.hits)
	}
}
