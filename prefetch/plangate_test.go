package prefetch

import (
	"strings"
	"testing"

	"github.com/aifs/aifs/layout"
)

// TestPlanGate: the gate closes after a span with more than 1/8 of it wasted, not after one
// with 1/8 or less, ignores deliveries while closed, and opens again planGateRetryEpochs
// epochs after it closed.
func TestPlanGate(t *testing.T) {
	var g planGate
	span := func(wasted int, epoch int) {
		for i := range planGateSpan {
			g.delivery(i < wasted, epoch)
		}
	}
	span(planGateSpan/planGateWasteShare, 1) // exactly 1/8: still worth it
	if !g.open(1) {
		t.Fatalf("closed after a span of %d wasted in %d", planGateSpan/planGateWasteShare, planGateSpan)
	}
	span(planGateSpan/planGateWasteShare+1, 2)
	if g.open(2) {
		t.Fatalf("open after a span of %d wasted in %d", planGateSpan/planGateWasteShare+1, planGateSpan)
	}
	st := g.stats()
	if !strings.HasPrefix(st.State, "off") || st.Closed != 1 {
		t.Errorf("stats %+v, want state off, closed once", st)
	}
	span(0, 3) // while closed nothing is counted
	if g.stats() != st {
		t.Errorf("stats changed while closed: %+v, then %+v", st, g.stats())
	}
	if g.open(2 + planGateRetryEpochs - 1) {
		t.Errorf("open %d epochs after closing", planGateRetryEpochs-1)
	}
	if !g.open(2 + planGateRetryEpochs) {
		t.Fatalf("still closed %d epochs after closing", planGateRetryEpochs)
	}
	if g.delivered != 0 || g.wasted != 0 {
		t.Errorf("reopened with a span started: %d delivered, %d wasted", g.delivered, g.wasted)
	}
	if st := g.stats(); st.State != "on" {
		t.Errorf("state %q after reopening, want on", st.State)
	}
}

// gateCatalog: 2,048 samples of 64 KiB, 16 to a shard of 1 MiB.
func gateCatalog() catalog { return newCatalog(2048, 1, 64<<10, 1<<20) }

// planAll gives p a plan from writer 1 of every file of cat, in order, and returns it.
func planAll(p *Policy, cat catalog) []layout.ID {
	plan := cat.files()
	p.Plan(1, true, plan)
	return plan
}

// TestPolicyPlanGateLostPushes: on the FUSE plane, samples a plan pushed ahead whose READs
// come all the same (their pages were gone) close the gate: then plans read nothing ahead, the
// sweep runs while the plan is held, and a plan's beacon is pushed like any other sample.
// Pushes that no READ follows (the reader found them) keep it open.
func TestPolicyPlanGateLostPushes(t *testing.T) {
	for _, lost := range []bool{false, true} {
		cat := gateCatalog()
		cfg := PolicyConfig{Planner: PlannerConfig{MaxFetch: 4 << 20}, MaxWhole: 16 << 20, PageCache: true,
			ChunkReads: true, ChunkBytes: 1 << 20}
		p := NewPolicy(cat, cfg)
		p.Budget(1<<40, "test", nil) // the set fits: every push is taken
		plan := planAll(p, cat)
		none := func(layout.ID) bool { return false }
		// The first 600 samples of the plan: pushed ahead, then (lost) READ.
		for _, id := range plan[:600] {
			if p.planner.IsBeacon(id) {
				continue
			}
			if act := p.PushAhead(id, false); act != PushIt {
				t.Fatalf("sample %d: %v, want PushIt with the set fitting", id, act)
			}
			p.Pushed([]layout.ID{id}, nil)
			if lost {
				p.Read(id, 7)
			}
		}
		st := p.PlanReadAhead()
		if got := strings.HasPrefix(st.State, "off"); got != lost {
			t.Fatalf("lost=%v: plan read-ahead %+v", lost, st)
		}
		ahead := p.ReadAhead(1<<30, 0, none)
		if lost && len(ahead) != 0 {
			t.Errorf("gate closed, yet the plan reads ahead %v", ahead)
		}
		if !lost && len(ahead) == 0 {
			t.Errorf("gate open, yet the plan reads nothing ahead")
		}
		var misses uint64
		for range gateOpenTicks + 1 { // READs miss fast: chunk reads open
			misses += gateOpenMisses
			p.Tick(misses, none, nil)
		}
		sweep := p.Sweep(3, none)
		if lost && len(sweep) == 0 {
			t.Errorf("gate closed, yet no sweep while the plan is held")
		}
		if !lost && len(sweep) != 0 {
			t.Errorf("gate open, yet a sweep %v beside the plan's read-ahead", sweep)
		}
		beacon := plan[len(plan)-planBeaconEvery] // a beacon no READ has passed
		if !p.planner.IsPlanBeacon(beacon) {
			t.Fatalf("sample %d is no beacon of the plan", beacon)
		}
		want := HoldForRead
		if lost {
			want = PushIt
		}
		if act := p.PushAhead(beacon, true); act != want {
			t.Errorf("lost=%v: the plan's beacon, chunk read: %v, want %v", lost, act, want)
		}
	}
}

// TestPolicyPlanGateWindow: pushes the page cache's window refuses (LetGo) count as wasted,
// and close the gate when they are more than 1/8 of a span.
func TestPolicyPlanGateWindow(t *testing.T) {
	cat := gateCatalog()
	// A depth of 4 samples, which the window holds (windowTooSmall does not apply).
	p := NewPolicy(cat, PolicyConfig{Planner: PlannerConfig{MaxFetch: 4 << 20, PlanDepth: 4}, MaxWhole: 16 << 20, PageCache: true})
	p.Budget(64*64<<10, "test", nil) // 1/32 of the set: a window of 4 samples
	plan := planAll(p, cat)
	var letGo int
	for _, id := range plan {
		if p.planner.IsBeacon(id) || p.res.Keeps(id) {
			continue
		}
		if p.PushAhead(id, false) == LetGo {
			letGo++
		}
		if !strings.HasPrefix(p.PlanReadAhead().State, "on") {
			break
		}
	}
	if st := p.PlanReadAhead(); !strings.HasPrefix(st.State, "off") || st.Wasted == 0 {
		t.Fatalf("%d pushes let go by the window; plan read-ahead %+v, want off", letGo, st)
	}
}

// TestPolicyPlanGateKernelPlane: on the kernel data plane every read is seen, so a read of a
// sample pushed ahead and still believed resident is a hit, not waste; one of a sample not
// resident any more (dropped before its read) is waste.
func TestPolicyPlanGateKernelPlane(t *testing.T) {
	for _, dropped := range []bool{false, true} {
		cat := gateCatalog()
		p := NewPolicy(cat, PolicyConfig{Planner: PlannerConfig{MaxFetch: 4 << 20}, MaxWhole: 16 << 20, PageCache: true,
			SeesEveryRead: true})
		p.Budget(1<<40, "test", nil)
		plan := planAll(p, cat)
		for _, id := range plan[:600] {
			if p.PushAhead(id, false) != PushIt {
				t.Fatalf("sample %d not pushed with the set fitting", id)
			}
			p.Pushed([]layout.ID{id}, nil)
			if dropped {
				p.res.forget(id, pageBytes(int64(cat[id].Size)))
			}
			p.Read(id, 7)
		}
		if st := p.PlanReadAhead(); strings.HasPrefix(st.State, "off") != dropped {
			t.Errorf("dropped=%v: plan read-ahead %+v", dropped, st)
		}
	}
}

// TestPolicyPlanWindowTooSmall: when the set does not fit and the page cache's window holds
// less than the plans would read ahead (PlanDepth samples each), plans read nothing ahead and
// the stats say why; with a window that holds it, or a set that fits, they read ahead.
func TestPolicyPlanWindowTooSmall(t *testing.T) {
	none := func(layout.ID) bool { return false }
	for _, c := range []struct {
		budget int64
		depth  int
		ahead  bool
	}{
		{64 * 64 << 10, 64, false}, // a window of 4 samples, a depth of 64
		{64 * 64 << 10, 4, true},   // a window of 4 samples, a depth of 4
		{1 << 40, 64, true},        // the set fits
	} {
		cat := gateCatalog()
		p := NewPolicy(cat, PolicyConfig{Planner: PlannerConfig{MaxFetch: 4 << 20, PlanDepth: c.depth}, MaxWhole: 16 << 20,
			PageCache: true})
		p.Budget(c.budget, "test", nil)
		var plan []layout.ID
		for _, id := range cat.files() {
			if !p.res.Keeps(id) || p.res.Fits() {
				plan = append(plan, id)
			}
		}
		p.Plan(1, true, plan)
		ahead := p.ReadAhead(1<<30, 0, none)
		if (len(ahead) > 0) != c.ahead {
			t.Errorf("budget %d, depth %d: read ahead %v, want any: %v", c.budget, c.depth, ahead, c.ahead)
		}
		st := p.PlanReadAhead()
		if off := strings.Contains(st.State, "window"); off == c.ahead {
			t.Errorf("budget %d, depth %d: state %q", c.budget, c.depth, st.State)
		}
	}
}
