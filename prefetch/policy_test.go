package prefetch

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aifs/aifs/layout"
)

// ByExtent and ExtentPos make the test catalog an Extents: its files lie in id order.
func (c catalog) ByExtent(pos int) layout.ID { return c.files()[pos] }

func (c catalog) ExtentPos(shard uint32, off uint64) int {
	files := c.files()
	return sort.Search(len(files), func(i int) bool {
		e := c[files[i]]
		return e.Shard > shard || e.Shard == shard && e.Offset >= off
	})
}

// policyStep is one observation given to a Policy and the actions it must return, written as
// policyReplay.do prints them. The observation is the first field set.
type policyStep struct {
	read    []layout.ID // first READs, by reader 1
	plan    []layout.ID // a new plan from writer 1
	budget  int64       // the page cache's budget
	ticks   int         // ticks, each after missPerTick more misses
	miss    layout.ID   // a READ that missed (chunk reads)
	sweep   int         // the sweep, with this many flights free
	push    []layout.ID // samples fetched ahead, to push or hold
	landed  []layout.ID // pushes the kernel took
	arrived []uint64    // shard, off, end: bytes from a slow source
	want    string
}

// policyReplay drives a Policy as the Loader would, without a FUSE server or a backend: what
// it asks to fetch is held at once (have) until read.
type policyReplay struct {
	p      *Policy
	cat    catalog
	held   map[layout.ID]bool
	misses uint64
}

// missPerTick is the misses counted at each tick of a replay: 1,000 a second, the chunk gate's
// opening rate.
const missPerTick = 10

func (r *policyReplay) have(id layout.ID) bool { return r.held[id] }

func (r *policyReplay) do(s policyStep) string {
	var out []string
	fetches := func(fs []Fetch) {
		for _, f := range fs {
			kind := "ahead"
			if f.Chunk {
				kind = "chunk"
			}
			out = append(out, fmt.Sprintf("%s %d[%d+%d]%v", kind, f.Shard, f.Off>>10, f.Len>>10, f.IDs))
			for _, id := range f.IDs {
				r.held[id] = true
			}
		}
	}
	drops := func(ids []layout.ID) {
		if len(ids) > 0 {
			out = append(out, fmt.Sprintf("drop %v", ids))
		}
	}
	switch {
	case s.read != nil:
		for _, id := range s.read {
			delete(r.held, id)
			r.p.Read(id, 1)
		}
		fetches(r.p.ReadAhead(1<<30, 0, r.have))
	case s.plan != nil:
		r.p.Plan(1, true, s.plan)
		fetches(r.p.ReadAhead(1<<30, 0, r.have))
	case s.budget != 0:
		drops(r.p.Budget(s.budget, "test", nil))
	case s.ticks != 0:
		for range s.ticks {
			r.misses += missPerTick
			drops(r.p.Tick(r.misses, nil, nil))
		}
		out = append(out, fmt.Sprintf("open %v", r.p.ChunksOpen()))
	case s.miss != 0:
		r.misses++
		if f, ok := r.p.Miss(s.miss, r.cat[s.miss], r.have); ok {
			fetches([]Fetch{f})
		}
	case s.sweep != 0:
		fetches(r.p.Sweep(s.sweep, r.have))
	case s.push != nil:
		names := [...]string{PushIt: "push", HoldForRead: "hold", LetGo: "letgo"}
		for _, id := range s.push {
			out = append(out, fmt.Sprintf("%s %d", names[r.p.PushAhead(id, false)], id))
		}
	case s.landed != nil:
		r.p.Pushed(s.landed, nil)
		for _, id := range s.landed {
			delete(r.held, id)
		}
	case s.arrived != nil:
		out = append(out, fmt.Sprintf("push %v", r.p.Arrived(uint32(s.arrived[0]), s.arrived[1], s.arrived[2], r.have)))
	}
	return strings.Join(out, "; ")
}

func (r *policyReplay) run(t *testing.T, steps []policyStep) {
	t.Helper()
	for i, s := range steps {
		if got := r.do(s); got != s.want {
			t.Fatalf("step %d (%+v):\n got  %q\n want %q", i, s, got, s.want)
		}
	}
}

// policyCatalog: 32 samples of 64 KiB (ids 2-33), 16 to a shard of 1 MiB.
func policyCatalog() catalog { return newCatalog(32, 1, 64<<10, 1<<20) }

// TestPolicyReplay drives the Loader's decisions from lists of observations, with no FUSE
// server and no backend, and checks the actions they return.
func TestPolicyReplay(t *testing.T) {
	cfg := PolicyConfig{Planner: PlannerConfig{SeqStart: 256 << 10, MaxFetch: 4 << 20}, MaxWhole: 16 << 20,
		PageCache: true, ChunkReads: true, ChunkBytes: 256 << 10}
	t.Run("sequential", func(t *testing.T) {
		cat := policyCatalog()
		r := &policyReplay{p: NewPolicy(cat, cfg), cat: cat, held: map[layout.ID]bool{}}
		r.run(t, []policyStep{
			{read: []layout.ID{2}, want: ""},
			// Two in pack order open a run: its window (256 KiB) is read ahead, in one read.
			{read: []layout.ID{3}, want: "ahead 0[128+256][4 5 6 7]"},
			// The window doubled (512 KiB) as it was read ahead; half of it read, it is topped up.
			{read: []layout.ID{4, 5}, want: "ahead 0[384+384][8 9 10 11 12 13]"},
			// Sample 7 came ahead: it is pushed (a beacon, every 32nd id, would be held).
			{push: []layout.ID{7, 32}, want: "push 7; hold 32"},
		})
	})
	t.Run("plan", func(t *testing.T) {
		cat := policyCatalog()
		r := &policyReplay{p: NewPolicy(cat, cfg), cat: cat, held: map[layout.ID]bool{}}
		r.run(t, []policyStep{
			// A plan is read ahead in pack order, one read per shard where neighbours are close.
			{plan: []layout.ID{20, 3, 21, 9}, want: "ahead 0[64+64][3]; ahead 0[448+64][9]; ahead 1[128+128][20 21]"},
			// The plan's beacons (every 8th position: the first here) come as a READ.
			{push: []layout.ID{20, 3}, want: "hold 20; push 3"},
			{landed: []layout.ID{3}, want: ""},
			// A sweep never runs while a plan is held.
			{ticks: 2, want: "open true"},
			{sweep: 4, want: ""},
			// A READ of a sample pushed: the kernel evicted it first (counted once, by the
			// Residency), and it is not a new epoch.
			{read: []layout.ID{3}, want: ""},
		})
		if n := r.p.res.Stats().KernelEvicted; n != 1 {
			t.Errorf("%d READs of samples believed in the page cache, want 1", n)
		}
		if epoch, _, _ := r.p.planner.Epoch(); epoch != 1 {
			t.Errorf("epoch %d after a READ of a sample pushed, want 1", epoch)
		}
	})
	t.Run("chunks", func(t *testing.T) {
		cat := policyCatalog()
		r := &policyReplay{p: NewPolicy(cat, cfg), cat: cat, held: map[layout.ID]bool{}}
		r.run(t, []policyStep{
			{budget: 1 << 30, want: ""},
			// Closed until READs miss fast.
			{miss: 10, want: ""},
			{ticks: 2, want: "open true"},
			// A miss reads the samples after it, up to ChunkBytes.
			{read: []layout.ID{10}, want: ""},
			{miss: 10, want: "chunk 0[576+256][11 12 13 14]"},
			// The sweep reads the shards in order, stopping before what the epoch read or holds
			// and at a shard's end.
			{sweep: 3, want: "chunk 0[0+256][2 3 4 5]; chunk 0[256+256][6 7 8 9]; chunk 0[832+192][15 16 17]"},
			{sweep: 3, want: "chunk 1[0+256][18 19 20 21]; chunk 1[256+256][22 23 24 25]; chunk 1[512+256][26 27 28 29]"},
			// Bytes that came from a slow source: the samples not read nor held are pushed.
			{arrived: []uint64{1, 10 << 16, 14 << 16}, want: "push [30 31]"},
		})
	})
	t.Run("page cache", func(t *testing.T) {
		cat := policyCatalog()
		r := &policyReplay{p: NewPolicy(cat, cfg), cat: cat, held: map[layout.ID]bool{}}
		// Half the set fits: the subset is about half of it, the window 1/16 of the budget.
		r.run(t, []policyStep{{budget: 16 * 64 << 10, want: ""}})
		var in, out []layout.ID // two samples the page cache keeps, two it does not
		for _, id := range cat.files() {
			if r.p.res.Keeps(id) && len(in) < 2 {
				in = append(in, id)
			} else if !r.p.res.Keeps(id) && len(out) < 2 {
				out = append(out, id)
			}
		}
		reads := append(append([]layout.ID(nil), in...), out...)
		slices.Sort(reads)
		slices.Reverse(reads) // no two in pack order: no sequential run
		r.run(t, []policyStep{
			{read: reads, want: ""},
			// A sample read outside the subset goes at the second tick after its read, the
			// oldest first.
			{ticks: 1, want: "open false"},
			{ticks: 1, want: fmt.Sprintf("drop [%d %d]; open true", out[1], out[0])},
			// The budget falls to nothing: the samples kept so far go.
			{budget: 1, want: fmt.Sprintf("drop %v", in)},
		})
		if st := r.p.res.Stats(); st.ResidentBytes != 0 {
			t.Errorf("resident %d bytes after the budget fell to nothing, want 0", st.ResidentBytes)
		}
	})
}

// TestPolicyPlanWindow: when the set does not fit the page cache, a plan is read ahead only as
// far as the window takes what it fetches, so that no push of it is refused and let go unread
// (its READ would read it from the shards again: issue 46, a plan that made training slower).
func TestPolicyPlanWindow(t *testing.T) {
	cat := policyCatalog()
	// A depth of one sample: the window (one sample) holds it, so plans read ahead
	// (windowTooSmall), and what they read ahead must fit the window's room.
	cfg := PolicyConfig{Planner: PlannerConfig{SeqStart: 256 << 10, MaxFetch: 4 << 20, PlanDepth: 1}, MaxWhole: 16 << 20, PageCache: true}
	p := NewPolicy(cat, cfg)
	p.Budget(16*64<<10, "test", nil) // half the set: a window of 64 KiB, one sample
	var plan []layout.ID
	for _, id := range cat.files() {
		if !p.res.Keeps(id) {
			plan = append(plan, id)
		}
	}
	if len(plan) < 4 {
		t.Fatalf("%d samples outside the subset, want 4 or more", len(plan))
	}
	p.Plan(1, true, plan)
	held := map[layout.ID]bool{}
	have := func(id layout.ID) bool { return held[id] }
	var fetched []layout.ID
	for _, f := range p.ReadAhead(1<<30, 0, have) {
		fetched = append(fetched, f.IDs...)
	}
	if len(fetched) == 0 || len(fetched) >= len(plan) {
		t.Fatalf("read ahead %v of a plan of %d samples with a window of one sample", fetched, len(plan))
	}
	var bytes int64
	for _, id := range fetched {
		held[id] = true
		bytes += int64(cat[id].Size)
	}
	// What was fetched is held, not yet pushed: nothing more fits.
	if fs := p.ReadAhead(1<<30, bytes, have); len(fs) != 0 {
		t.Errorf("read ahead %v more with the window's room held", fs)
	}
	for _, id := range fetched {
		if act := p.PushAhead(id, false); act == LetGo {
			t.Errorf("sample %d read ahead, then let go unread: the window refused its push", id)
		}
	}
}

// TestSplitMemory: the memory budget's split between the stable subset and read-ahead.
func TestSplitMemory(t *testing.T) {
	for _, c := range []struct {
		cache, data int64
		keepRead    bool
		keep, ahead int64
		fraction    float64
	}{
		{cache: 1 << 30, data: 4 << 30, keep: 0, ahead: 1 << 30, fraction: 0},
		{cache: 1 << 30, data: 256 << 20, keepRead: true, keep: 256 << 20, ahead: 768 << 20, fraction: 1},
		{cache: 1 << 30, data: 4 << 30, keepRead: true, keep: 960 << 20, ahead: 64 << 20, fraction: 960.0 / 4096},
		{cache: 8 << 30, data: 64 << 30, keepRead: true, keep: 8<<30 - 256<<20, ahead: 256 << 20, fraction: (8192 - 256) / 65536.0},
	} {
		keep, ahead, fraction := splitMemory(c.cache, c.data, c.keepRead)
		if f := float64(fraction) / (1 << 64); keep != c.keep || ahead != c.ahead || math.Abs(f-c.fraction) > 1e-9 {
			t.Errorf("splitMemory(%d, %d, %v) = %d, %d, %g; want %d, %d, %g", c.cache, c.data, c.keepRead, keep, ahead, f, c.keep, c.ahead, c.fraction)
		}
		if keep+ahead != c.cache {
			t.Errorf("splitMemory(%d, %d, %v): %d + %d is not the budget", c.cache, c.data, c.keepRead, keep, ahead)
		}
	}
}

// TestPolicyColdEpoch replays a cold shuffled epoch through a Policy as the Loader and the
// kernel would, with chunk reads on and a page cache that holds the set: a sample in the page
// cache is read there, any other comes as a READ, which misses unless a read ahead holds it;
// every 10 READs the clock ticks and the sweep fills 4 flights. Every sample is read from the
// shards once, and most come from the page cache, pushed by chunk reads.
func TestPolicyColdEpoch(t *testing.T) {
	cat := newCatalog(2000, 4, 48<<10, 1<<20)
	p := NewPolicy(cat, PolicyConfig{MaxWhole: 16 << 20, PageCache: true, ChunkReads: true, ChunkBytes: DefaultChunkBytes})
	p.Budget(1<<40, "test", nil)
	inPC := map[layout.ID]bool{}
	held := map[layout.ID]bool{}
	reads := map[layout.ID]int{} // from the shards
	have := func(id layout.ID) bool { return held[id] }
	run := func(fs []Fetch) {
		for _, f := range fs {
			var pushed []layout.ID
			late := p.Late(f, nil)
			for i, id := range f.IDs {
				if late[i] { // the readers got there first: the Loader leaves it out
					continue
				}
				reads[id]++
				switch p.PushAhead(id, f.Chunk) {
				case PushIt:
					inPC[id] = true
					pushed = append(pushed, id)
				case HoldForRead:
					held[id] = true
				}
			}
			p.Pushed(pushed, nil)
		}
	}
	order := cat.files()
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	var misses, requests uint64
	for _, id := range order {
		if inPC[id] {
			continue
		}
		requests++
		p.Read(id, 1)
		run(p.ReadAhead(1<<30, 0, have))
		if !held[id] {
			misses++
			reads[id]++
			if f, ok := p.Miss(id, cat[id], have); ok {
				run([]Fetch{f})
			}
		}
		delete(held, id)
		inPC[id] = true
		if requests%10 == 0 {
			p.Tick(misses, nil, nil)
			run(p.Sweep(4, have))
		}
	}
	for _, id := range cat.files() {
		if reads[id] != 1 {
			t.Fatalf("sample %d read %d times from the shards, want 1", id, reads[id])
		}
	}
	if requests > uint64(len(order))/8 {
		t.Errorf("%d of %d samples came as a READ, want an eighth at most: chunk reads pushed the rest", requests, len(order))
	}
	t.Logf("%d samples: %d READs, %d misses", len(order), requests, misses)
}
