package prefetch

import (
	"math"

	"github.com/aifs/aifs/internal/bitset"
	"github.com/aifs/aifs/internal/subset"
	"github.com/aifs/aifs/layout"
)

// Residency decides which samples the kernel's page cache keeps (kernel_cache=on), within a
// budget of bytes (-o page_cache). It is a pure state machine, like the Planner: no I/O, no
// clock (Tick is its clock), not safe for concurrent use. It is part of the Policy, which the
// Loader holds under one mutex (decider) and whose actions (drops, refused pushes) it carries
// out outside it.
//
// The policy (docs/prefetch.md, "The page cache"):
//   - When the samples it tracks (regular files of at most MaxWhole bytes: the dataset) fit
//     the budget, every sample stays: nothing is dropped and nothing refused, as without it.
//   - Otherwise the page cache holds a stable subset, the samples whose hash rank lies below
//     (budget − window) ÷ dataset pages, the same ones every epoch (a shuffled epoch then finds
//     about that fraction of its samples there, where the kernel's LRU finds c²/2), plus a
//     window of at most window bytes of other samples: those just read, dropped at the second
//     Tick after the read (a whole tick later, so that their reader has copied them), and
//     those pushed ahead of their reader, dropped once the reader has passed them (passed, the
//     plan's cursor) or after pushedTicks. A push outside the subset that does not fit the
//     window is refused.
//   - Bytes are the page cache's: a sample's pages (pageBytes), the set's estimated (pages).
//   - Eviction by next use: a sample read has its next use in the next epoch, the furthest of
//     anything held, so it goes first; a sample pushed ahead stays until its read (with a
//     plan) or its time; the subset stays. A budget that falls drops the subset's top ranks.
//
// What it believes resident is an estimate: the kernel may evict pages on its own (memory
// pressure). A READ of a sample it believes resident says so (KernelEvicted), and the sample
// is counted afresh.
type Residency struct {
	cat      Catalog
	maxWhole int64
	data     int64 // bytes of the samples tracked, in whole pages (estimated: pages)
	raw      int64 // bytes of the samples tracked, as the index counts them
	scope    int64 // bytes of the samples this node reads (SetScope), 0: all of them

	budget   int64
	fits     bool
	fraction uint64 // outside fits: a sample is in the subset iff rank(id) < fraction
	window   int64  // outside fits: bytes for samples outside the subset

	resident       bitset.Bits // bit per id: believed in the page cache
	pushing        bitset.Bits // bit per id: counted by Push, the push not landed yet (Landed, Unpush)
	residentBytes  int64
	residentCount  int         // samples believed resident
	subsetBytes    int64       // resident samples that the policy keeps (all of them when fits)
	transient      []transient // resident samples outside the subset, oldest first
	transientBytes int64       // their bytes, those still resident
	tick           uint64
	set            bool // SetBudget has been called

	drops, refused, kernelEvicted uint64
}

// transient is a sample outside the subset, resident since tick.
type transient struct {
	id   layout.ID
	tick uint64
	read bool // it came as a READ (else it was pushed and its read is not known)
}

// pushedTicks is how long a sample pushed outside the subset may wait for its reader once no
// plan says where the reader is: a sequential run's window (32 MiB) is read in well under a
// second. The Loader ticks every 10 ms: 2 s.
const pushedTicks = 200

// The window of samples outside the subset is 1/windowShare of the budget, at most maxWindow:
// what is read ahead and what was just read, at 8-32 readers, is a few MiB to tens of MiB, and
// the subset, the rest of the budget, is what the next epoch finds (the goal: 0.9 of it).
const (
	windowShare = 16
	maxWindow   = 256 << 20
)

// A budget or a scope that changes by 1/budgetSlack or less is ignored (SetBudget, SetScope),
// so that a figure that wanders (free memory) does not move the subset back and forth.
const budgetSlack = 16

// NewResidency returns a Residency for the samples of cat of at most maxWhole bytes, with no
// budget yet (everything fits until SetBudget says otherwise).
func NewResidency(cat Catalog, maxWhole int64) *Residency {
	r := &Residency{cat: cat, maxWhole: maxWhole, fits: true, fraction: subset.All}
	r.resident = bitset.New(cat.Len())
	r.pushing = bitset.New(cat.Len())
	// All the files' bytes, from the index's header, not a walk of every entry: samples larger
	// than maxWhole, which the policy never keeps, are counted too (a set of small samples has
	// none; in a set of videos they make it fit less often, never more).
	r.raw = int64(cat.FileBytes())
	r.data = pages(r.raw, cat.Files())
	r.budget = r.data
	return r
}

// pages estimates the page-cache bytes of files files of n bytes in all: the page cache holds
// whole pages, so a file of a page or less takes one, and a larger file's last page is half
// full on average. Counting bytes alone undercounts a set of small files badly (a 3 KB file
// takes a 4 KiB page: 37% more) and ImageNet's JPEGs by ~2% (110 KB each): a subset sized by
// bytes would hold more pages than its budget.
func pages(n int64, files int) int64 {
	if f := int64(files); n <= f*pageSize {
		return f * pageSize
	}
	return n + int64(files)*pageSize/2
}

// pageBytes returns the page-cache bytes of a file of n bytes: its pages.
func pageBytes(n int64) int64 { return (n + pageSize - 1) &^ (pageSize - 1) }

// size returns the page-cache bytes of sample id (its pages) and whether the policy tracks it.
func (r *Residency) size(id layout.ID) (int64, bool) {
	e := r.cat.Entry(id)
	n := int64(e.Size)
	return pageBytes(n), !e.IsDir() && n <= r.maxWhole
}

func (r *Residency) isResident(id layout.ID) bool { return r.resident.Has(uint64(id)) }

// Keeps reports whether the policy keeps sample id in the page cache for later epochs: all of
// them when the set fits, else the subset's.
func (r *Residency) Keeps(id layout.ID) bool { return r.fits || subset.Rank(uint64(id)) < r.fraction }

// Fits reports whether every sample fits the budget.
func (r *Residency) Fits() bool { return r.fits }

// AllResident reports whether every sample is believed to be in the page cache (never in a set
// with samples larger than the policy tracks).
func (r *Residency) AllResident() bool { return r.residentCount == r.cat.Files() }

// WindowRoom returns the bytes of samples outside the subset that the window takes now: what
// a read ahead may fetch, since a push the window refuses is let go unread (Policy.PushAhead).
// Without a limit (the set fits) it is maxInt64.
func (r *Residency) WindowRoom() int64 {
	if r.fits {
		return math.MaxInt64
	}
	return max(r.window-r.transientBytes, 0)
}

// SetBudget sets the budget to b bytes and appends to drop the resident samples that the new
// budget leaves out, which are no longer counted; the caller drops them from the page cache.
// A budget that grows by 1/budgetSlack or less is ignored, so that a figure that wanders (free
// memory) does not move the subset back and forth.
func (r *Residency) SetBudget(b int64, drop []layout.ID) []layout.ID {
	b = max(b, 0)
	if r.set && b >= r.budget && b-r.budget <= r.budget/budgetSlack {
		return drop
	}
	r.set = true
	r.budget = b
	return r.apply(drop)
}

// SetScope says how many bytes of samples this node reads: on a cluster whose sampler gives
// each node a range of the set (python/aifs_plan.DistributedSampler), the union of the plans
// it was sent; 0 for all of them. The budget is weighed against the scope, so a node whose
// range fits keeps all of it even where the set does not fit, and otherwise the subset is
// the same fraction of its range. Like SetBudget it appends to drop what a smaller subset
// leaves out; a change of 1/budgetSlack or less is ignored, as are plans that name more than the set.
func (r *Residency) SetScope(n int64, drop []layout.ID) []layout.ID {
	if n >= r.raw {
		n = 0
	}
	if n == r.scope || n != 0 && r.scope != 0 && max(n-r.scope, r.scope-n) <= r.scope/budgetSlack {
		return drop
	}
	r.scope = n
	return r.apply(drop)
}

// reads returns the page-cache bytes the budget is weighed against: the scope's (at the set's
// own ratio of pages to bytes), or all the samples'.
func (r *Residency) reads() int64 {
	if r.scope > 0 {
		return int64(float64(r.scope) * float64(r.data) / float64(r.raw))
	}
	return r.data
}

// apply sets the subset for the budget and scope, and appends to drop the resident samples
// a smaller subset leaves out.
func (r *Residency) apply(drop []layout.ID) []layout.ID {
	b, old := r.budget, r.fraction
	if r.reads() <= b {
		r.fits, r.fraction, r.window = true, subset.All, 0
	} else {
		r.fits = false
		r.window = min(b/windowShare, maxWindow)
		r.fraction = subset.Threshold(b-r.window, r.reads())
	}
	if r.fraction < old { // the subset shrank: its samples now outside it go
		r.resident.Each(func(i uint64) {
			if k := subset.Rank(i); r.fraction <= k && k < old {
				drop = r.evict(layout.ID(i), drop)
			}
		})
	}
	r.recount()
	return drop
}

// recount splits the resident bytes between the subset and the window anew, after the subset
// changed.
func (r *Residency) recount() {
	r.subsetBytes = 0
	r.resident.Each(func(i uint64) {
		if n, _ := r.size(layout.ID(i)); r.Keeps(layout.ID(i)) {
			r.subsetBytes += n
		}
	})
	r.transientBytes = r.residentBytes - r.subsetBytes
}

// Read records that a READ of sample id reached aifs: the sample is now in the page cache.
func (r *Residency) Read(id layout.ID) {
	n, ok := r.size(id)
	if !ok {
		return
	}
	if r.isResident(id) { // the kernel evicted it on its own
		r.kernelEvicted++
		r.forget(id, n)
	}
	r.add(id, n, true)
}

// Seen records that sample id was read on a serving path that tells of every read, the page
// cache's hits included (PolicyConfig.SeesEveryRead): one believed resident was a hit; any
// other is resident now, as a READ's.
func (r *Residency) Seen(id layout.ID) {
	if n, ok := r.size(id); ok && !r.isResident(id) {
		r.add(id, n, true)
	}
}

// Push reports whether sample id may be pushed into the page cache, and if so counts it
// there: a sample the policy keeps always may be, another only if it fits the window (else
// the push is refused and counted). A sample believed resident may be pushed again, counted
// once: the belief may be stale (the kernel evicts pages on its own, drop_caches evicts all).
// Once the kernel has taken the push call Landed; if it refused it, Unpush. Until then Tick
// does not drop the sample: a drop sent before the push lands would leave the pushed pages in
// the page cache, uncounted (under load, a test's page cache ended 3-18% over its budget so).
func (r *Residency) Push(id layout.ID) bool {
	n, ok := r.size(id)
	if !ok {
		return false
	}
	if !r.isResident(id) {
		if !r.Keeps(id) && r.transientBytes+n > r.window {
			r.refused++
			return false
		}
		r.add(id, n, false)
	}
	r.pushing.Add(uint64(id))
	return true
}

// Landed records that the kernel took the push of sample id: it may be dropped from now on.
func (r *Residency) Landed(id layout.ID) {
	if _, ok := r.size(id); ok {
		r.pushing.Remove(uint64(id))
	}
}

// Unpush takes back a Push that the kernel refused.
func (r *Residency) Unpush(id layout.ID) {
	n, ok := r.size(id)
	if !ok {
		return
	}
	r.pushing.Remove(uint64(id))
	if r.isResident(id) {
		r.forget(id, n)
	}
}

func (r *Residency) isPushing(id layout.ID) bool { return r.pushing.Has(uint64(id)) }

// Resident reports whether sample id is believed to be in the page cache.
func (r *Residency) Resident(id layout.ID) bool { return r.isResident(id) }

// add counts sample id (n bytes) as resident, pushed or read.
func (r *Residency) add(id layout.ID, n int64, read bool) {
	r.resident.Add(uint64(id))
	r.residentBytes += n
	r.residentCount++
	if r.Keeps(id) {
		r.subsetBytes += n
		return
	}
	r.transientBytes += n
	r.transient = append(r.transient, transient{id: id, tick: r.tick, read: read})
}

// forget stops counting sample id (n bytes) as resident. A transient entry for it stays in
// the queue and is skipped when its turn comes.
func (r *Residency) forget(id layout.ID, n int64) {
	r.resident.Remove(uint64(id))
	r.residentBytes -= n
	r.residentCount--
	if r.Keeps(id) {
		r.subsetBytes -= n
	} else {
		r.transientBytes -= n
	}
}

// evict forgets sample id and appends it to drop.
func (r *Residency) evict(id layout.ID, drop []layout.ID) []layout.ID {
	n, _ := r.size(id)
	r.forget(id, n)
	r.drops++
	return append(drop, id)
}

// Tick advances the clock by one and appends to drop the samples outside the subset whose
// time is up: those read before the previous tick whose READ is over (busy: still being
// fetched for it; the kernel would not drop the pages a READ holds, and the drop would be
// lost), those pushed that the readers have passed (passed; nil: none known) or that waited
// pushedTicks, and the oldest others while the resident bytes exceed the budget; never one
// whose push has not landed (Push). The caller drops them from the page cache.
func (r *Residency) Tick(passed, busy func(layout.ID) bool, drop []layout.ID) []layout.ID {
	r.tick++
	keep := r.transient[:0]
	for _, t := range r.transient {
		switch {
		case !r.isResident(t.id) || r.Keeps(t.id): // gone, or read again and queued again, or now kept
		case r.isPushing(t.id):
			keep = append(keep, t)
		case t.read && r.tick-t.tick >= 2 && (busy == nil || !busy(t.id)),
			!t.read && (r.tick-t.tick >= pushedTicks || passed != nil && passed(t.id)):
			drop = r.evict(t.id, drop)
		default:
			keep = append(keep, t)
		}
	}
	clear(r.transient[len(keep):])
	r.transient = keep
	if r.residentBytes > r.budget && !r.fits {
		// Over the budget (the budget fell, or reads came faster than the window): the oldest
		// others go now, but not one whose READ is still being fetched (see above).
		keep = r.transient[:0]
		for _, t := range r.transient {
			if r.residentBytes > r.budget && !r.isPushing(t.id) && (busy == nil || !busy(t.id)) {
				drop = r.evict(t.id, drop)
				continue
			}
			keep = append(keep, t)
		}
		clear(r.transient[len(keep):])
		r.transient = keep
	}
	return drop
}

// ResidencyStats are the policy's figures, as they appear in the stats file.
type ResidencyStats struct {
	BudgetBytes  int64  `json:"budget_bytes"`
	Source       string `json:"budget_source"` // where the budget came from
	DatasetBytes int64  `json:"dataset_bytes"` // the pages of the samples it applies to (estimated: pages)
	// ScopeBytes are the bytes of the samples the plans name, which the budget is weighed
	// against when a node reads only its range of the set (SetScope); 0: no plan, all of them.
	ScopeBytes int64 `json:"scope_bytes"`
	Fits       bool  `json:"fits"` // all of them fit: nothing is dropped
	// SubsetFraction is the share of the samples (by hash rank) kept across epochs: 1 when
	// they all fit.
	SubsetFraction float64 `json:"subset_fraction"`
	// ResidentBytes estimates the sample bytes in the page cache: SubsetBytes of the subset,
	// WindowBytes of others (read or pushed, to be dropped).
	ResidentBytes int64 `json:"resident_bytes"`
	SubsetBytes   int64 `json:"subset_bytes"`
	WindowBytes   int64 `json:"window_bytes"`
	// Drops counts the samples dropped from the page cache (NOTIFY_INVAL_INODE); PushesRefused
	// the pushes (read-ahead, chunk reads) left out because they did not fit the window;
	// KernelEvicted the READs of samples believed resident, pushed or read before: the kernel
	// evicted their pages itself (memory pressure, drop_caches). It is the one count of that
	// fact; a large share of the samples pushed says that the page cache cannot hold what is
	// pushed ahead (push_chunks=off).
	Drops         uint64 `json:"drops"`
	PushesRefused uint64 `json:"pushes_refused"`
	KernelEvicted uint64 `json:"kernel_evicted"`
	// ChunkReads counts the background reads of chunks.go (Options.ChunkReads), and
	// ChunkSamples the samples they pushed into the page cache.
	ChunkReads   uint64 `json:"chunk_reads"`
	ChunkSamples uint64 `json:"chunk_samples"`
}

// Stats returns the policy's figures (Source and the chunk counts are the Loader's).
func (r *Residency) Stats() ResidencyStats {
	s := ResidencyStats{BudgetBytes: r.budget, DatasetBytes: r.data, ScopeBytes: r.scope, Fits: r.fits, SubsetFraction: 1,
		ResidentBytes: r.residentBytes, SubsetBytes: r.subsetBytes, WindowBytes: r.transientBytes,
		Drops: r.drops, PushesRefused: r.refused, KernelEvicted: r.kernelEvicted}
	if !r.fits {
		s.SubsetFraction = float64(r.fraction) / (1 << 64)
	}
	return s
}
