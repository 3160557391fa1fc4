package prefetch

import (
	"sync"
	"sync/atomic"

	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/plan"
)

// decider owns the Loader's one mutex and everything it guards: the Policy, which makes every
// decision, and the plan writers' parsers. Every call into the Policy goes through a method
// here, which takes the lock, asks, lets go, and returns the actions for the Loader to carry
// out outside the lock (fetches, pushes, drops). Lock order: mu → a flight stripe's lock (have,
// busy) or a pending stripe's lock → layout's index block locks (the Policy reads entries:
// Index.Entry may read and check an index block from disk the first time it is used, under
// mu); ristretto's locks (have) come last.
//
// The readers of many samples at once must not queue on mu: a first READ that finds it taken
// (TryLock) is left in pendingReads, in a lock stripe, and its reader goes on. Whoever holds
// mu tells the Policy of the pending reads when it takes it (lock) and again after it lets go
// if readers came meanwhile (unlockNext): a reader checks mu after leaving its read, the holder
// checks the reads after letting go, so one of them always sees the other and no read waits
// past the next unlock. Why: docs/bench/prefetch-notes.md, "The decisions' lock".
type decider struct {
	mu      sync.Mutex // guards p, parsers
	p       *Policy
	parsers map[uint32]*plan.Parser
	pending pendingReads // first READs not yet told to the Policy

	// chunksOpen mirrors Policy.ChunksOpen, written under mu where it changes (tick), read
	// without it on a READ's path.
	chunksOpen atomic.Bool

	// The Loader's side: have, busy and room are called with mu held (a look-up or a load
	// each), queue after mu is let go.
	have  func(layout.ID) bool      // the sample is cached or being fetched
	busy  func(layout.ID) bool      // the sample is being fetched
	room  func() (free, held int64) // the read-ahead budget left, and the bytes read ahead held
	queue func([]Fetch)             // starts fetches (it may shed them: budget, queue full)
}

const (
	pendingStripes = 16
	pendingCap     = 32 // reads a stripe holds; a reader that finds it full takes the mutex
)

// pendingReads are first READs not yet told to the Policy.
type pendingReads struct {
	n     atomic.Int32 // reads held in all stripes, changed under a stripe's lock
	parts [pendingStripes]struct {
		mu    sync.Mutex // guards reads, len
		reads [pendingCap]firstRead
		len   atomic.Int32 // written under mu; read without it to skip an empty stripe
		_     [52]byte
	}
}

// firstRead is a sample's first READ and the reader (pid) that sent it.
type firstRead struct {
	id     layout.ID
	reader uint32
}

// add leaves r for the planner, or reports that its stripe is full.
func (p *pendingReads) add(r firstRead) bool {
	s := &p.parts[r.id%pendingStripes]
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.len.Load()
	if n == pendingCap {
		return false
	}
	s.reads[n] = r
	s.len.Store(n + 1)
	p.n.Add(1)
	return true
}

// observe tells the Policy of a sample's first READ, now or through pendingReads, and queues
// the reads ahead it asks for.
func (d *decider) observe(r firstRead) {
	if d.mu.TryLock() {
		d.drainLocked()
		d.p.Read(r.id, r.reader)
		d.unlockNext(true)
		return
	}
	if !d.pending.add(r) {
		d.lock()
		d.p.Read(r.id, r.reader)
		d.unlockNext(true)
		return
	}
	if d.mu.TryLock() { // the holder may have let go before our read was left
		d.unlockNext(d.drainLocked())
	}
}

// lock takes mu and tells the Policy of the pending reads. Release it with unlock.
func (d *decider) lock() {
	d.mu.Lock()
	if d.drainLocked() {
		// Rare (readers came while mu was held): the fetches these reads call for are asked
		// for at once, as their readers would have.
		d.unlockNext(true)
		d.mu.Lock()
	}
}

// unlock lets go of mu (see unlockNext).
func (d *decider) unlock() { d.unlockNext(false) }

// unlockNext lets go of mu, after asking the Policy, if next, for the reads ahead that fit the
// read-ahead budget, which it then queues; and takes mu again, if it is free, to tell the
// Policy of the reads left meanwhile.
func (d *decider) unlockNext(next bool) {
	for {
		var fetches []Fetch
		if next {
			free, held := d.room()
			fetches = d.p.ReadAhead(free, held, d.have)
		}
		d.mu.Unlock()
		d.queue(fetches)
		if d.pending.n.Load() == 0 || !d.mu.TryLock() {
			return
		}
		next = d.drainLocked()
	}
}

// drainLocked tells the Policy, under mu, of the pending reads, and reports whether there
// were any.
func (d *decider) drainLocked() bool {
	if d.pending.n.Load() == 0 {
		return false
	}
	for i := range d.pending.parts {
		s := &d.pending.parts[i]
		if s.len.Load() == 0 {
			continue
		}
		s.mu.Lock()
		n := s.len.Load()
		for _, r := range s.reads[:n] {
			d.p.Read(r.id, r.reader)
		}
		d.pending.n.Add(-n)
		s.len.Store(0)
		s.mu.Unlock()
	}
	return true
}

// miss asks the Policy for the chunk read that a READ of sample id (entry e) that missed calls
// for (Policy.Miss), if mu is free: a READ never waits for it.
func (d *decider) miss(id layout.ID, e layout.Entry) (Fetch, bool) {
	if !d.mu.TryLock() {
		return Fetch{}, false
	}
	next := d.drainLocked()
	f, ok := d.p.Miss(id, e, d.have)
	d.unlockNext(next)
	return f, ok
}

// sweep asks the Policy for up to room chunk reads (Policy.Sweep).
func (d *decider) sweep(room int) []Fetch {
	d.lock()
	defer d.unlock()
	return d.p.Sweep(room, d.have)
}

// tick tells the Policy of a tick and the misses so far, and appends to drop what the page
// cache lets go (Policy.Tick); it reports whether the Policy is settled after (Policy.Settled).
func (d *decider) tick(misses uint64, drop []layout.ID) ([]layout.ID, bool) {
	d.lock()
	defer d.unlock()
	drop = d.p.Tick(misses, d.busy, drop)
	d.chunksOpen.Store(d.p.ChunksOpen())
	return drop, d.p.Settled()
}

// budget tells the Policy of the page cache's budget and returns what it drops (Policy.Budget).
func (d *decider) budget(b int64, source string) []layout.ID {
	d.lock()
	defer d.unlock()
	return d.p.Budget(b, source, nil)
}

// late returns, for each sample of f, whether the readers got there first (Policy.Late).
func (d *decider) late(f Fetch) []bool {
	d.lock()
	defer d.unlock()
	return d.p.Late(f, make([]bool, 0, len(f.IDs)))
}

// pushAhead decides, under one lock, what to do with each sample of ids, fetched ahead
// (Policy.PushAhead), and appends the decisions to acts.
func (d *decider) pushAhead(ids []layout.ID, chunk bool, acts []Push) []Push {
	d.lock()
	defer d.unlock()
	for _, id := range ids {
		acts = append(acts, d.p.PushAhead(id, chunk))
	}
	return acts
}

// arrived returns the samples of [off, end) of shard to push (Policy.Arrived).
func (d *decider) arrived(shard uint32, off, end uint64) []layout.ID {
	d.lock()
	defer d.unlock()
	return d.p.Arrived(shard, off, end, d.have)
}

// pushed tells the Policy how the pushes went and returns the samples to let go of from memory
// (Policy.Pushed).
func (d *decider) pushed(pushed, refused []layout.ID) []layout.ID {
	if len(pushed) == 0 && len(refused) == 0 {
		return nil
	}
	d.lock()
	defer d.unlock()
	return d.p.Pushed(pushed, refused)
}

// writePlan parses a piece of writer's plan (start: the first of a new plan) with the writer's
// parser, passes its samples to stage, still under mu, and tells the Policy of them; then it
// queues the reads ahead they call for. The error is the parser's; the samples before the bad
// line stay planned.
func (d *decider) writePlan(x *layout.Index, writer uint32, start bool, data []byte, stage func([]layout.ID)) error {
	d.lock()
	pp := d.parsers[writer]
	if pp == nil || start {
		if pp == nil && len(d.parsers) >= maxWriters {
			clear(d.parsers) // writers come and go with training runs; a writer mid-plan restarts
		}
		pp = &plan.Parser{}
		d.parsers[writer] = pp
	}
	ids, err := pp.Parse(x, data, nil)
	stage(ids)
	d.p.Plan(writer, start, ids)
	if err != nil {
		delete(d.parsers, writer)
	}
	d.unlockNext(true)
	return err
}

// policyStats are the Policy's figures for Loader.Stats.
type policyStats struct {
	epoch, covered, files int
	plans                 []PlanPosition
	unseen                int
	pageCache             *ResidencyStats
	planReadAhead         PlanReadAheadStats
}

// stats returns the Policy's figures.
func (d *decider) stats() policyStats {
	d.lock()
	defer d.unlock()
	p := d.p
	var s policyStats
	s.epoch, s.covered, s.files = p.planner.Epoch()
	s.plans = p.planner.Plans()
	s.unseen = p.planner.PreviousUnseen()
	s.planReadAhead = p.PlanReadAhead()
	if p.res != nil {
		r := p.res.Stats()
		r.Source = p.source
		s.pageCache = &r
	}
	return s
}
