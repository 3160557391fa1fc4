package prefetch

import (
	"slices"

	"github.com/aifs/aifs/layout"
)

// Extents is the Catalog of a Policy: it also walks the files in extent order (as they lie in
// the shards), for chunk reads and Arrived. *layout.Index implements it.
type Extents interface {
	Catalog
	// ByExtent returns the file at position pos of extent order (0 <= pos < Files()).
	ByExtent(pos int) layout.ID
	// ExtentPos returns the first position whose file starts in shard at or after off.
	ExtentPos(shard uint32, off uint64) int
}

// PolicyConfig configures a Policy. The Loader fills it from its Options.
type PolicyConfig struct {
	Planner  PlannerConfig
	MaxWhole int64 // the largest sample read whole (Options.MaxWhole); larger ones are never read ahead
	// PageCache turns the page cache's policy (Residency) on: the serving path pushes pages
	// into the kernel's page cache and drops them (Options.Push and Options.Drop).
	PageCache bool
	// ChunkReads, with PageCache, turns chunk reads and the sweep on (Options.ChunkReads), of
	// ChunkBytes at most each.
	ChunkReads bool
	ChunkBytes int64
	// SeesEveryRead: the serving path tells of every sample read, those the page cache
	// served included (the kernel data plane, Options.WillNeed), not only of READs that
	// reach the daemon. No sample read ahead is then held for its READ (a beacon), and a read
	// of a sample believed in the page cache is a hit, not a sign that the kernel evicted it.
	SeesEveryRead bool
}

// Policy holds every decision of the Loader: what to read ahead (the Planner), what to read
// as chunks and when to sweep (chunks.go), what to push and what to hold for its READ, and
// what the page cache keeps and drops (the Residency). It takes observations (a first READ of
// a sample, a plan, a push landed or refused, a budget, a tick with the misses counted so far)
// and returns actions (fetches, samples to push, samples to drop): no I/O of its own, no clock
// (Tick is its clock), no goroutine, no FUSE, so that any serving path can drive it: FUSE READs
// today, page-cache misses of a kernel data plane tomorrow. (Its Extents may read: a
// *layout.Index reads and checks an index block from disk the first time one of its entries is
// used.) It is not safe for concurrent use: the Loader holds it under one mutex (decider) and
// carries out its actions outside it.
//
// Where an action depends on what the serving path holds (a sample cached or being fetched),
// the caller passes have; Policy keeps no copy of it.
type Policy struct {
	cat     Extents
	cfg     PolicyConfig
	planner *Planner
	res     *Residency // nil without PageCache
	source  string     // where the page cache's budget came from (Budget)

	gate       chunkGate // opens chunk reads while READs miss fast (Tick)
	plans      planGate  // closes plans' read-ahead while it does not reach the readers (plangate.go)
	chunksOpen bool
	sweepEpoch int // the epoch the sweep's cursor is in
	sweepPos   int // the sweep's cursor, an extent position

	scopes  [scopeSpan]int64 // the plans' bytes at the last budgets (planScope)
	scopeAt int
}

// NewPolicy returns the decisions for the samples of cat, with no budget yet (Budget).
func NewPolicy(cat Extents, cfg PolicyConfig) *Policy {
	p := &Policy{cat: cat, cfg: cfg, planner: NewPlanner(cat, cfg.Planner)}
	if cfg.PageCache {
		p.res = NewResidency(cat, cfg.MaxWhole)
	}
	return p
}

// Read observes the first READ of sample id by reader (its pid; 0: not known).
func (p *Policy) Read(id layout.ID, reader uint32) {
	if p.planner.inPlan(id) && p.planner.PushedUnread(id) {
		// Pushed ahead of its reader: on the FUSE plane a READ says its pages were gone; on
		// the kernel data plane, which sees every read, it was a hit unless aifs dropped it.
		p.plans.delivery(!p.cfg.SeesEveryRead || p.res == nil || !p.res.Resident(id), p.epoch())
	}
	p.planner.Read(id, reader)
	switch {
	case p.res == nil:
	case p.cfg.SeesEveryRead:
		p.res.Seen(id)
	default:
		p.res.Read(id)
	}
}

// epoch returns the planner's epoch.
func (p *Policy) epoch() int {
	e, _, _ := p.planner.Epoch()
	return e
}

// plansReadAhead reports whether plans read ahead now: not while the page cache's window
// cannot hold what they would read ahead (windowTooSmall), nor while the plan gate is closed.
func (p *Policy) plansReadAhead() bool { return !p.windowTooSmall() && p.plans.open(p.epoch()) }

// windowTooSmall reports whether the set does not fit the page cache and its window (the
// samples outside the subset) holds less than the plans held would read ahead: PlanDepth
// samples of the set's mean size each. Their read-ahead would be let go or pushed out before
// its readers come, and each such sample read twice; in the MLPerf-style runs it was never
// faster than no plan there (docs/bench/mlperf.md, "Findings").
func (p *Policy) windowTooSmall() bool {
	if p.res == nil || p.res.Fits() || p.cat.Files() == 0 {
		return false
	}
	mean := int64(p.cat.FileBytes()) / int64(p.cat.Files())
	return p.res.window < int64(p.planner.planCount()*p.planner.cfg.PlanDepth)*mean
}

// PlanReadAhead returns the plan gate's figures (PlanReadAheadStats).
func (p *Policy) PlanReadAhead() PlanReadAheadStats {
	p.plans.open(p.epoch())
	s := p.plans.stats()
	if s.State == "on" && p.windowTooSmall() {
		s.State = "off: the page cache's window holds less than the plans would read ahead"
	}
	return s
}

// Plan observes a plan from writer: with start a new one, which replaces the writer's last;
// otherwise more of the one being sent.
func (p *Policy) Plan(writer uint32, start bool, ids []layout.ID) {
	if start {
		p.planner.SetPlan(writer, ids)
	} else {
		p.planner.AppendPlan(writer, ids)
	}
}

// ReadAhead returns the reads ahead to start now: at most free bytes of samples (the
// read-ahead budget left) and, when the set does not fit the page cache, at most what its
// window takes (Residency.WindowRoom) less held, the bytes read ahead and not yet pushed or
// read. A sample fetched past the window would find its push refused and be let go unread
// (PushAhead), and its READ would fetch it again: 4 ranks with plans in a memory cgroup read
// 6.0 GB from the shards in 3 epochs of a 1.4 GB set, against 5.1 GB once bounded and 4.2 GB
// with no plan (docs/prefetch.md, "The page cache"; docs/bench/README.md, MLPerf). It
// skips the samples have reports (cached or being fetched) and those the page cache holds
// (inPageCache): such a sample, read ahead again by a sequential run over the misses, was
// pushed again for nothing, and a beacon among them waited in the cache for a READ that its
// page-cache hit never sends.
func (p *Policy) ReadAhead(free, held int64, have func(layout.ID) bool) []Fetch {
	if p.res != nil {
		free = min(free, p.res.WindowRoom()-held)
	}
	if free <= 0 {
		return nil
	}
	p.planner.plansOff = !p.plansReadAhead()
	return p.planner.Next(free, func(id layout.ID) bool { return p.skip(id, have) || p.inPageCache(id) })
}

// skip reports whether sample id is not to be read ahead by anyone: over MaxWhole (read range
// by range and never from memory, so one fetched whole ahead would be read twice and held whole
// until evicted: after md5sum of files of hundreds of MB, 436 MB of live heap, issue 28), or
// held by the serving path (have).
func (p *Policy) skip(id layout.ID, have func(layout.ID) bool) bool {
	return int64(p.cat.Entry(id).Size) > p.cfg.MaxWhole || have(id)
}

// inPageCache reports whether the page cache's policy believes sample id resident and the set
// does not fit. When the set fits the belief is stale after drop_caches (a miss says the epoch
// is cold), so read-ahead and chunk reads do not trust it there.
func (p *Policy) inPageCache(id layout.ID) bool {
	return p.res != nil && !p.res.Fits() && p.res.Resident(id)
}

// Late reports, for each sample of fetch f about to be read, whether the readers got there
// first (it was read this epoch; for a run's read-ahead, READ this epoch: ReadByReader), so
// that the fetch leaves it out.
func (p *Policy) Late(f Fetch, late []bool) []bool {
	for _, id := range f.IDs {
		if f.Run {
			late = append(late, p.planner.ReadByReader(id))
		} else {
			late = append(late, p.planner.ReadThisEpoch(id))
		}
	}
	return late
}

// Push is what to do with a sample read ahead.
type Push uint8

const (
	// PushIt: push it into the page cache; it was counted there (Pushed says how it went).
	PushIt Push = iota
	// HoldForRead: keep it in memory for its READ: a beacon, whose READ shows the planner how
	// far the readers have got, or a sample of one page or less, which costs one READ anyway.
	HoldForRead
	// LetGo: neither: the page cache's window is full (Residency.Push), and held in memory
	// it would count against the same memory cgroup as the page cache, past the budget.
	LetGo
)

// PushAhead decides what to do with sample id, fetched ahead (chunk: by a chunk read, which
// only a plan's beacons skip).
func (p *Policy) PushAhead(id layout.ID, chunk bool) Push {
	beacon := p.planner.IsBeacon(id)
	if chunk {
		beacon = p.isPlanBeacon(id)
	}
	planned := !chunk && p.planner.inPlan(id)
	act := p.pushAhead(id, beacon)
	if planned {
		p.plans.delivery(act == LetGo, p.epoch())
	}
	return act
}

// isPlanBeacon reports whether sample id is a beacon of a plan that reads ahead: with the plan
// gate closed no plan reads ahead, and nothing is held back for its cursor.
func (p *Policy) isPlanBeacon(id layout.ID) bool {
	return p.planner.IsPlanBeacon(id) && p.plansReadAhead()
}

func (p *Policy) pushAhead(id layout.ID, beacon bool) Push {
	switch {
	case p.cfg.SeesEveryRead:
		if !p.mayPush(id) {
			return LetGo
		}
		return PushIt
	case int64(p.cat.Entry(id).Size) <= pageSize || beacon:
		return HoldForRead
	case !p.mayPush(id):
		return LetGo
	}
	return PushIt
}

// mayPush asks the page cache's policy, if any, whether sample id may be pushed, and counts it
// there if so.
func (p *Policy) mayPush(id layout.ID) bool { return p.res == nil || p.res.Push(id) }

// Arrived returns the samples to push among those lying wholly in [off, end) of shard, bytes
// that have just come from a slow source: those of more than a page that this epoch has not
// read, that are not a plan's beacon, nor held (have), and that the page cache takes. The
// others of a chunk fetched for one of them are read later in the same epoch (a shuffled epoch
// reads every sample once), and from the page cache they cost no request.
func (p *Policy) Arrived(shard uint32, off, end uint64, have func(layout.ID) bool) []layout.ID {
	var ids []layout.ID
	for pos := p.cat.ExtentPos(shard, off); pos < p.cat.Files(); pos++ {
		id := p.cat.ByExtent(pos)
		e := p.cat.Entry(id)
		if e.Shard != shard || e.Offset+e.Size > end {
			break
		}
		if e.Size > pageSize && !p.planner.ReadThisEpoch(id) && !p.isPlanBeacon(id) && !p.skip(id, have) && p.mayPush(id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// Pushed observes how the pushes it allowed went: the kernel took pushed, it refused refused
// (under memory pressure it reclaims the inode of a file with no pages: ENOENT). It returns
// the refused samples to let go of from memory, for the reason of LetGo, when the set does not
// fit the page cache.
func (p *Policy) Pushed(pushed, refused []layout.ID) (letGo []layout.ID) {
	for _, id := range pushed {
		p.planner.Pushed(id)
		if p.res != nil {
			p.res.Landed(id)
		}
	}
	if p.res == nil {
		return nil
	}
	for _, id := range refused {
		p.res.Unpush(id)
		if p.planner.inPlan(id) {
			p.plans.delivery(true, p.epoch())
		}
	}
	if p.res.Fits() {
		return nil
	}
	return refused
}

// Budget observes the page cache's budget, b bytes, from source, and appends to drop what a
// smaller budget (or a smaller scope: the plans held name this node's range) leaves out.
func (p *Policy) Budget(b int64, source string, drop []layout.ID) []layout.ID {
	drop = p.res.SetBudget(b, drop)
	drop = p.res.SetScope(p.planScope(), drop)
	p.source = source
	return drop
}

// scopeSpan is how many budgets (seconds) the scope is the largest of: a trainer replaces its
// plan each epoch, and the plans of a node's ranks come over a second or more, so the plans
// held dip at an epoch's start; the scope must not follow the dip.
const scopeSpan = 10

// planScope returns the largest bytes the plans held named at the last scopeSpan budgets
// (Residency.SetScope).
func (p *Policy) planScope() int64 {
	p.scopes[p.scopeAt%scopeSpan] = p.planner.PlannedBytes()
	p.scopeAt++
	return slices.Max(p.scopes[:])
}

// Tick observes the clock (every tickEvery) and the READs that have missed so far, misses: it
// opens or closes chunk reads (chunkGate) and appends to drop what the page cache lets go.
// busy reports a sample still being fetched for a READ (its pages are held: not dropped yet).
func (p *Policy) Tick(misses uint64, busy func(layout.ID) bool, drop []layout.ID) []layout.ID {
	open := p.gate.tick(misses)
	if open && !p.chunksOpen {
		p.sweepPos = 0 // the gate opens: the sweep starts again
	}
	p.chunksOpen = open
	return p.res.Tick(p.planner.Passed, busy, drop)
}

// Settled reports whether the policy has nothing left to decide from reads: every sample fits
// the budget and is believed resident, no plan is held and chunk reads are closed. A serving
// path that tells of every read may then stop telling (Options.Quiet).
func (p *Policy) Settled() bool {
	return p.res != nil && p.res.Fits() && p.res.AllResident() && !p.chunksOpen && p.planner.PlannedBytes() == 0
}

// ChunksOpen reports whether chunk reads may start (Tick).
func (p *Policy) ChunksOpen() bool { return p.cfg.ChunkReads && p.res != nil && p.chunksOpen }
