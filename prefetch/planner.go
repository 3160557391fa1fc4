package prefetch

import (
	"slices"

	"github.com/aifs/aifs/internal/bitset"
	"github.com/aifs/aifs/layout"
)

// Catalog is what the planner needs to know about the samples: the index entries, by id, the
// number of regular files, their bytes and the next one in pack order. *layout.Index implements
// it. Nothing here walks every entry at start: a version 3 index reads an entry's block the
// first time it is used, so that a mount of 100 M samples is live in milliseconds.
type Catalog interface {
	Len() int
	Entry(id layout.ID) layout.Entry
	Files() int
	FileBytes() uint64
	NextFile(id layout.ID) layout.ID
}

// PlannerConfig bounds the planner's decisions. The zero value means the defaults named.
type PlannerConfig struct {
	// SeqStart is the first read-ahead window of a sequential run, in bytes (default 1 MiB); it
	// doubles each time the run consumes half of it, up to SeqMax (default 32 MiB).
	SeqStart, SeqMax int64
	// PlanDepth is how many samples past the last one read the planner fetches ahead in a plan
	// (default 64).
	PlanDepth int
	// MaxFetch bounds one coalesced read, in bytes (default 8 MiB; the Loader sets 4 MiB, the
	// local backend's largest pooled buffer, unless Options.Planner sets it).
	MaxFetch int64
	// Gap is the largest hole between two samples that a coalesced read spans rather than
	// issuing two reads (default 64 KiB: reading it costs less than a second request).
	Gap int64
}

func (c *PlannerConfig) defaults() {
	if c.SeqStart <= 0 {
		c.SeqStart = 1 << 20
	}
	if c.SeqMax < c.SeqStart {
		c.SeqMax = max(32<<20, c.SeqStart)
	}
	if c.PlanDepth <= 0 {
		c.PlanDepth = 64
	}
	if c.MaxFetch <= 0 {
		c.MaxFetch = 8 << 20
	}
	if c.Gap < 0 || c.Gap == 0 {
		c.Gap = 64 << 10
	}
}

// Fetch is one read the planner asks for: [Off, Off+Len) of shard Shard, holding the samples
// IDs (ascending offsets) and nothing else but holes of at most PlannerConfig.Gap bytes.
// The Loader's chunk reads (Chunk) are Fetches too, whose holes may be larger. Run marks the
// read-ahead of a long or lost sequential run (Next): it skips only the samples READ this
// epoch (ReadByReader), where other fetches skip all that this epoch read or pushed.
type Fetch struct {
	Shard uint32
	Off   int64
	Len   int64
	IDs   []layout.ID
	Chunk bool
	Run   bool
}

// maxWriters bounds the plans kept at once; a new writer replaces the one idle longest.
const maxWriters = 64

// streamSlots is how many sequential runs are followed at once (one per reader of a sorted
// scan is enough; DataLoader workers of a shard-ordered loader each make one).
const streamSlots = 16

// A second first READ of a sample is a repeat (a retry: the kernel lost the pages of the first
// before its reader copied them) rather than the start of a new epoch when the same reader (the
// READ's pid, a thread) last started reading that sample (see readerSlots), or, whoever sent
// it, when it was among the last recentReads READs with fewer than recentReads samples read or
// pushed since.
//
// The reader rule holds however late the retry comes (docs/bench/prefetch-notes.md, "Repeated
// READs and epochs").
//
// Pushes count in the ring so that a sorted scan, whose read-ahead pushes all but a READ in 32
// (its beacons), starts its next pass at its first READ: counting READs alone, the few READs
// of the pass before were all recent, its first sample read again was taken for a retry, and
// the pass was read as the rest of the last epoch, every sample a miss (nothing is read ahead
// that the epoch has read).
const recentReads = 256

// readerSlots is how many readers' last samples are kept, by pid modulo readerSlots (a reader
// whose slot another took falls back on the ring). Each keeps its last two: the reads left in
// pendingReads (decider.go) are told to the planner stripe by stripe, not in the order they
// came, so a reader's previous sample may be told after the one it is reading
// (docs/bench/prefetch-notes.md, "Repeated READs and epochs").
const readerSlots = 256

// Planner watches the samples read and the plans written and decides what to fetch ahead. It
// is a pure state machine: no I/O, no clock, no goroutines, and not safe for concurrent use
// (the Loader calls it under one mutex, once per sample read, never once per READ).
//
// It knows three things:
//   - epochs: which samples were read in the current epoch; a sample read a second time (not a
//     repeat, see recentReads, nor the first READ of a sample Pushed into the page cache, which
//     the kernel evicted before it was read) starts the next epoch;
//   - sequential runs: reads of consecutive samples in pack order (a sorted scan) open a run
//     whose read-ahead window grows from SeqStart to SeqMax;
//   - plans: each writer's coming order; the planner keeps PlanDepth samples past the last one
//     read from each plan fetched or in flight.
type Planner struct {
	cat Catalog
	cfg PlannerConfig

	// epoch tracking
	seen    bitset.Bits // bit per id: read in this epoch
	pushed  bitset.Bits // bit per id: Pushed in this epoch and not READ since
	covered int         // samples read in this epoch
	unseen  int         // samples the previous epoch never read (nor pushed): page-cache hits
	epoch   int
	recent  [recentReads]layout.ID
	eventAt [recentReads]uint64 // events when recent[i] was read
	nrecent int
	events  uint64                  // samples read or pushed so far
	last    [readerSlots]readerLast // by reader % readerSlots
	files   int                     // regular files in the catalog

	streams [streamSlots]stream
	tick    uint64 // logical clock for LRU replacement of streams and writers

	writers []*planState
	// where maps a sample to its position in a plan: slot[id] is the writer index + 1 (0: in
	// no plan) and pos[id] its index in that writer's plan. Allocated with the first plan.
	slot    []uint8
	pos     []uint32
	planned int64 // bytes of the samples in some plan (slot != 0)
	// plansOff: plans read nothing ahead (Next); their cursors still move. The Policy sets it
	// from its plan gate (plangate.go).
	plansOff bool
}

// stream is one sequential run.
type stream struct {
	next   layout.ID // the sample a continuing read would read
	hits   int       // consecutive reads so far
	window int64     // current read-ahead window, bytes
	ahead  layout.ID // samples up to (excluding) ahead have been asked for
	// aheadBytes is the bytes of the samples from next up to ahead: what the run has asked for
	// past its reader. It is counted sample by sample, not as a span of a shard, since pack
	// order need not be the order of the bytes (a ZIP made by zip -r).
	aheadBytes int64
	lastUse    uint64
	lost       bool // the run's last READ was of a sample pushed in this epoch: its pages were gone
}

// readerLast is what a reader (a READ's pid) last started reading: the last two samples told,
// the latest first.
type readerLast struct {
	reader uint32
	ids    [2]layout.ID
}

// has reports whether sample id is one of the last two that reader started reading.
func (r readerLast) has(reader uint32, id layout.ID) bool {
	return reader != 0 && r.reader == reader && (r.ids[0] == id || r.ids[1] == id)
}

// add records that reader started reading sample id.
func (r *readerLast) add(reader uint32, id layout.ID) {
	switch {
	case r.reader != reader:
		*r = readerLast{reader, [2]layout.ID{id, id}}
	case r.ids[0] != id:
		r.ids[1], r.ids[0] = r.ids[0], id
	}
}

// planState is one writer's plan.
type planState struct {
	writer  uint32
	ids     []layout.ID
	cursor  int // samples before cursor have been read (or passed)
	issued  int // samples before issued have been asked for
	lastUse uint64
}

// NewPlanner returns a planner for the samples of cat.
func NewPlanner(cat Catalog, cfg PlannerConfig) *Planner {
	cfg.defaults()
	p := &Planner{cat: cat, cfg: cfg, seen: bitset.New(cat.Len()), pushed: bitset.New(cat.Len()), epoch: 1}
	p.files = cat.Files()
	return p
}

// ReadThisEpoch reports whether sample id has been read in the current epoch: fetching it
// ahead would be wasted (its next use is in the next epoch).
func (p *Planner) ReadThisEpoch(id layout.ID) bool { return p.seen.Has(uint64(id)) }

// ReadByReader reports whether sample id has come as a READ in the current epoch, not only
// been pushed. A long or lost sequential run's read-ahead skips only those: the samples
// ahead of its reader that the epoch pushed may be gone, as at the start of a sorted pass
// after drop_caches, whose first READs are of samples pushed in the last pass; the planner
// takes them for pushes the kernel evicted until it sees the epoch begin. Skipping every
// sample the epoch had read or pushed, every other such pass was a miss a sample
// (TestLoaderSortedPasses). Those READ are skipped still: another reader of the same scan
// has read them.
func (p *Planner) ReadByReader(id layout.ID) bool {
	return p.seen.Has(uint64(id)) && !p.pushed.Has(uint64(id))
}

// How often a sample read ahead is a beacon (see Options.Push): every 8th of a plan, whose
// cursor lags the readers by up to that many samples of a 64-sample depth; every 32nd of a
// sequential run, a few MiB of a window of up to 32 MiB. The measurements that chose them:
// docs/bench/README.md, "Beacon frequencies".
const (
	planBeaconEvery = 8
	runBeaconEvery  = 32
)

// IsBeacon reports whether sample id must still come as a READ when read ahead, so that the
// planner sees the readers' progress.
func (p *Planner) IsBeacon(id layout.ID) bool {
	if p.inPlan(id) {
		return p.pos[id]%planBeaconEvery == 0
	}
	return id%runBeaconEvery == 0
}

// IsPlanBeacon reports whether sample id is a beacon of a plan: one that must come as a READ
// however it reaches the page cache, or the plan's cursor would stop.
func (p *Planner) IsPlanBeacon(id layout.ID) bool {
	return p.inPlan(id) && p.pos[id]%planBeaconEvery == 0
}

func (p *Planner) inPlan(id layout.ID) bool { return int(id) < len(p.slot) && p.slot[id] > 0 }

// Epoch returns the current epoch (from 1) and how many distinct samples it has read.
func (p *Planner) Epoch() (epoch, covered, files int) { return p.epoch, p.covered, p.files }

// PreviousUnseen returns how many samples the previous epoch neither read nor pushed: with
// kernel_cache=on, those its readers found in the page cache, kept there from earlier epochs
// (0 in the first epoch).
func (p *Planner) PreviousUnseen() int { return p.unseen }

// PushedUnread reports whether sample id was Pushed in this epoch and has not come as a READ
// since.
func (p *Planner) PushedUnread(id layout.ID) bool { return p.pushed.Has(uint64(id)) }

// Passed reports whether the readers of a plan have passed sample id: it lies before its
// writer's cursor, so it has been read (or skipped) in this pass of the plan.
func (p *Planner) Passed(id layout.ID) bool {
	return p.inPlan(id) && int(p.pos[id]) < p.writers[p.slot[id]-1].cursor
}

// Read records that reader (the READ's pid; 0: not known) started reading sample id (its
// first READ).
//
// A READ of a sample that a plan names moves that plan's cursor and nothing else: the plan says
// what comes next, and the sequential runs are for reads no plan explains. (Taken for a run,
// the dense shuffled READs of one node's range, python/aifs_plan.DistributedSampler, kept a run
// alive and read up to 32 MiB past the range: other nodes' data, fetched from S3 and cached.)
func (p *Planner) Read(id layout.ID, reader uint32) {
	p.tick++
	lost := p.trackEpoch(id, reader)
	if int(id) < len(p.slot) {
		if s := p.slot[id]; s > 0 {
			w := p.writers[s-1]
			if at := int(p.pos[id]); at < len(w.ids) && w.ids[at] == id && at >= w.cursor {
				w.cursor = at + 1
				w.lastUse = p.tick
			}
			return
		}
	}
	p.trackStream(id, lost)
}

// Pushed records that sample id was pushed into the kernel's page cache ahead of its reader
// (Options.Push): it counts as read in this epoch (no READ will come for it, and reading it
// ahead again would be wasted) but moves no plan cursor or run, which only READs do.
//
// If a READ of it comes after all (the kernel evicted its pages before the reader came: memory
// pressure), that READ is its read in this epoch, not the start of the next. The cost: when
// the next epoch's READs begin, those of samples pushed in this one are taken for such
// READs until one of a sample READ in this one starts the epoch (with a fraction f of the
// samples READ, about (1-f)/f of them: 12 when push_chunks pushes 92%).
func (p *Planner) Pushed(id layout.ID) {
	p.events++
	if !p.seen.Has(uint64(id)) {
		p.seen.Add(uint64(id))
		p.pushed.Add(uint64(id))
		p.covered++
	}
}

// trackEpoch counts the READ of id by reader in the epoch and reports whether it was of a
// sample pushed in this epoch (its pages were gone).
func (p *Planner) trackEpoch(id layout.ID, reader uint32) (lost bool) {
	last := &p.last[reader%readerSlots]
	if p.pushed.Has(uint64(id)) {
		p.pushed.Remove(uint64(id)) // read at last: seen in this epoch already
		lost = true
	} else if p.seen.Has(uint64(id)) && !p.isRepeat(id, reader, *last) {
		p.seen.Clear()
		p.pushed.Clear()
		p.unseen = p.files - p.covered
		p.covered = 0
		p.epoch++
	}
	if !p.seen.Has(uint64(id)) {
		p.seen.Add(uint64(id))
		p.covered++
	}
	if reader != 0 {
		last.add(reader, id)
	}
	p.events++
	p.recent[p.nrecent%recentReads] = id
	p.eventAt[p.nrecent%recentReads] = p.events
	p.nrecent++
	return lost
}

// isRepeat reports whether a READ of id by reader, whose slot holds last, repeats an earlier
// one (see recentReads).
func (p *Planner) isRepeat(id layout.ID, reader uint32, last readerLast) bool {
	if last.has(reader, id) {
		return true
	}
	n := min(p.nrecent, recentReads)
	for i := range n {
		if p.recent[i] == id && p.events-p.eventAt[i] < recentReads {
			return true
		}
	}
	return false
}

// trackStream continues the run that expected id, or starts a new one in the slot idle longest;
// lost says whether the READ of id was of a sample pushed in this epoch.
func (p *Planner) trackStream(id layout.ID, lost bool) {
	for i := range p.streams {
		s := &p.streams[i]
		// A confirmed run also continues at a sample it read ahead: the samples in between
		// may have been read from the kernel's page cache (Options.Push) without a READ.
		// (Continuing only near the sample expected wastes less read-ahead on shuffled reads
		// of a small dataset, but was tried and left: docs/prefetch.md, "Limits".)
		if s.hits > 0 && s.next == id || s.hits >= 2 && id > s.next && id < s.ahead {
			s.hits++
			s.passTo(p.cat, p.cat.NextFile(id))
			s.lastUse, s.lost = p.tick, lost
			return
		}
	}
	victim := &p.streams[0]
	for i := range p.streams {
		if p.streams[i].lastUse < victim.lastUse {
			victim = &p.streams[i]
		}
	}
	next := p.cat.NextFile(id)
	*victim = stream{next: next, hits: 1, window: p.cfg.SeqStart, ahead: next, lastUse: p.tick, lost: lost}
}

// SetPlan replaces writer's plan with ids (which must be regular files) and returns nothing:
// the fetches come from Next. AppendPlan adds to the plan being written.
func (p *Planner) SetPlan(writer uint32, ids []layout.ID) {
	p.tick++
	w := p.writerState(writer)
	p.unplan(w)
	w.ids, w.cursor, w.issued, w.lastUse = w.ids[:0], 0, 0, p.tick
	p.AppendPlan(writer, ids)
}

// AppendPlan adds ids to the end of writer's plan.
func (p *Planner) AppendPlan(writer uint32, ids []layout.ID) {
	p.tick++
	w := p.writerState(writer)
	if p.slot == nil {
		p.slot = make([]uint8, p.cat.Len())
		p.pos = make([]uint32, p.cat.Len())
	}
	s := uint8(p.writerIndex(w) + 1)
	for _, id := range ids {
		if p.slot[id] == 0 {
			p.planned += int64(p.cat.Entry(id).Size)
		}
		p.slot[id], p.pos[id] = s, uint32(len(w.ids))
		w.ids = append(w.ids, id)
	}
	w.lastUse = p.tick
}

// unplan takes w's samples out of the plans, those that no later plan took.
func (p *Planner) unplan(w *planState) {
	s := uint8(p.writerIndex(w) + 1)
	for _, id := range w.ids {
		if p.slot[id] == s {
			p.slot[id] = 0
			p.planned -= int64(p.cat.Entry(id).Size)
		}
	}
}

// PlannedBytes returns the bytes of the samples in the plans held: on a cluster, this node's
// range of the set (Residency.SetScope).
func (p *Planner) PlannedBytes() int64 { return p.planned }

// streamingHits is how many reads in a row make a run that Streaming reports: in a shuffled
// epoch two consecutive samples come one read in several hundred (16 runs followed, 10,000
// samples), four almost never.
const streamingHits = 4

// Streaming reports whether a sequential run is being read: one of streamingHits reads or
// more, continued by one of the last recentReads READs.
func (p *Planner) Streaming() bool {
	for i := range p.streams {
		if s := &p.streams[i]; s.hits >= streamingHits && s.lastUse+recentReads > p.tick {
			return true
		}
	}
	return false
}

// writerState returns writer's plan, making one (in place of the one idle longest if there
// are maxWriters already).
func (p *Planner) writerState(writer uint32) *planState {
	for _, w := range p.writers {
		if w.writer == writer {
			return w
		}
	}
	if len(p.writers) < maxWriters {
		w := &planState{writer: writer}
		p.writers = append(p.writers, w)
		return w
	}
	victim := p.writers[0]
	for _, w := range p.writers {
		if w.lastUse < victim.lastUse {
			victim = w
		}
	}
	p.unplan(victim)
	*victim = planState{writer: writer, ids: victim.ids[:0]}
	return victim
}

func (p *Planner) writerIndex(w *planState) int { return slices.Index(p.writers, w) }

// PlanPosition is one writer's progress through its plan.
type PlanPosition struct {
	Writer  uint32 `json:"writer"`
	Samples int    `json:"samples"`
	Read    int    `json:"read"`
	Fetched int    `json:"fetched"`
}

// planCount returns how many writers hold a plan with samples.
func (p *Planner) planCount() int {
	n := 0
	for _, w := range p.writers {
		if len(w.ids) > 0 {
			n++
		}
	}
	return n
}

// Plans returns each writer's progress. A writer whose plan is empty (a refused plan file
// leaves one) has no plan to report.
func (p *Planner) Plans() []PlanPosition {
	out := make([]PlanPosition, 0, len(p.writers))
	for _, w := range p.writers {
		if len(w.ids) == 0 {
			continue
		}
		out = append(out, PlanPosition{Writer: w.writer, Samples: len(w.ids), Read: w.cursor, Fetched: w.issued})
	}
	return out
}

// Next returns the reads to start now, at most room bytes of samples in all. have reports
// whether a sample is already cached or being fetched; those are skipped. Plans come before
// sequential runs; each plan is topped up to PlanDepth samples past its cursor, in plan order,
// and each confirmed run (two consecutive reads or more) to its window.
func (p *Planner) Next(room int64, have func(layout.ID) bool) []Fetch {
	var want []layout.ID
	for _, w := range p.writers {
		w.issued = max(w.issued, w.cursor)
		for !p.plansOff && w.issued < len(w.ids) && w.issued < w.cursor+p.cfg.PlanDepth {
			id := w.ids[w.issued]
			if !have(id) && !p.ReadThisEpoch(id) {
				size := int64(p.cat.Entry(id).Size)
				if size > room {
					break
				}
				room -= size
				want = append(want, id)
			}
			w.issued++
		}
	}
	fetches := p.coalesce(want)
	for i := range p.streams {
		s := &p.streams[i]
		if s.hits < 2 {
			continue
		}
		if s.aheadBytes > s.window/2 || int(s.ahead) >= p.cat.Len() {
			continue
		}
		var run []layout.ID
		for want := s.window - s.aheadBytes; want > 0 && int(s.ahead) < p.cat.Len() && len(run) < maxRun; s.ahead = p.cat.NextFile(s.ahead) {
			e := p.cat.Entry(s.ahead)
			size := int64(e.Size)
			if size > room {
				break
			}
			if !have(s.ahead) {
				run = append(run, s.ahead)
				room -= size
			}
			want -= size
			s.aheadBytes += size
		}
		if s.window < p.cfg.SeqMax {
			s.window = min(2*s.window, p.cfg.SeqMax)
		}
		// A long run (one that stops chunk reads, which would have pushed samples ahead of it
		// in this pass: Streaming) or a lost one fetches the samples the epoch only pushed: they
		// may be gone (ReadByReader). A short one may be two shuffled reads in a row, beside
		// chunk reads.
		for _, f := range p.coalesce(run) {
			f.Run = s.lost || s.hits >= streamingHits
			fetches = append(fetches, f)
		}
	}
	return fetches
}

// maxRun bounds the samples one run asks for at a time, so that a window of tiny samples
// does not become a list of millions.
const maxRun = 1024

// passTo moves the reader's place in the run to next, the samples passed taken off the bytes
// ahead. Each sample is passed once, so a run costs a step a sample however far a read jumps
// within what was asked for.
func (s *stream) passTo(cat Catalog, next layout.ID) {
	if next >= s.ahead {
		s.next, s.ahead, s.aheadBytes = next, next, 0
		return
	}
	for id := s.next; id < next; id = cat.NextFile(id) {
		s.aheadBytes -= int64(cat.Entry(id).Size)
	}
	s.next = next
}

// coalesce groups samples into reads: sorted by shard and offset, neighbours closer than Gap
// share one read of at most MaxFetch bytes.
func (p *Planner) coalesce(ids []layout.ID) []Fetch {
	if len(ids) == 0 {
		return nil
	}
	slices.SortFunc(ids, func(a, b layout.ID) int {
		ea, eb := p.cat.Entry(a), p.cat.Entry(b)
		if ea.Shard != eb.Shard {
			return int(ea.Shard) - int(eb.Shard)
		}
		if ea.Offset < eb.Offset {
			return -1
		}
		if ea.Offset > eb.Offset {
			return 1
		}
		return 0
	})
	var out []Fetch
	for _, id := range ids {
		e := p.cat.Entry(id)
		off, end := int64(e.Offset), int64(e.Offset+e.Size)
		if n := len(out); n > 0 {
			f := &out[n-1]
			if f.Shard == e.Shard && off >= f.Off+f.Len && off-(f.Off+f.Len) <= p.cfg.Gap && end-f.Off <= p.cfg.MaxFetch {
				f.Len = end - f.Off
				f.IDs = append(f.IDs, id)
				continue
			}
		}
		out = append(out, Fetch{Shard: e.Shard, Off: off, Len: end - off, IDs: []layout.ID{id}})
	}
	return out
}
