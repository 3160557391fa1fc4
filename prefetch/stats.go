package prefetch

import "sync/atomic"

// loaderStats are the Loader's counters, read by Stats.
type loaderStats struct {
	hits, misses, waits        atomic.Uint64
	backendBytes, backendReads atomic.Uint64
	aheadUsed, aheadWasted     atomic.Uint64 // bytes
	aheadShed, aheadIssued     atomic.Uint64 // samples
	planWriteError             atomic.Uint64
	pushedAhead                atomic.Uint64 // samples read ahead and pushed into the kernel's page cache
	pushedArrived              atomic.Uint64 // samples pushed into the kernel's page cache by Arrived
	corrupt, corruptReads      atomic.Uint64 // samples that failed Options.Verify (Loader.corrupt), and the checks that failed
	chunkReads, chunkSamples   atomic.Uint64 // chunk reads queued, and the samples they pushed
}

// Stats is a snapshot of the Loader's counters, as they appear in the stats file.
type Stats struct {
	Cache    CacheStats     `json:"cache"`
	Backend  BackendStats   `json:"backend"`
	Prefetch PrefetchStats  `json:"prefetch"`
	Epoch    EpochStats     `json:"epoch"`
	Plans    []PlanPosition `json:"plans"` // one per writer
	// PlanReadAhead says whether plans read ahead (the plan gate, plangate.go) and how much of
	// what they read ahead reached its reader.
	PlanReadAhead PlanReadAheadStats `json:"plan_readahead"`
	// PageCache is the page cache's policy (Options.Drop); absent without one.
	PageCache *ResidencyStats `json:"page_cache,omitempty"`
	// Quiet is whether the serving path tells of its reads (Options.Quiet); absent without it.
	Quiet *QuietStats `json:"quiet,omitempty"`
}

// QuietStats: whether the serving path is quiet now (Options.Quiet: its reads are not told),
// how many times it went quiet, and how many times it was woken.
type QuietStats struct {
	Now    bool   `json:"now"`
	Quiets uint64 `json:"quiets"`
	Wakes  uint64 `json:"wakes"`
}

// CacheStats count samples found in memory (hits: cached or fetched ahead), not found
// (misses), and found being fetched by another reader (shared, among the misses).
type CacheStats struct {
	Hits        uint64 `json:"hits"`
	Misses      uint64 `json:"misses"`
	Shared      uint64 `json:"shared"`
	KeptBytes   int64  `json:"kept_bytes"` // the stable subset (kernel_cache=off)
	BudgetBytes int64  `json:"budget_bytes"`
}

// BackendStats count the reads sent to the shards (samples over MaxWhole included: each
// ReadRange, and the reads that verify one), the samples that failed Options.Verify, each
// counted once, and the reads of them that failed it: a corrupt sample is never cached, so
// each READ of it, a retry of one that failed among them, reads and checks it again.
type BackendStats struct {
	Reads        uint64 `json:"reads"`
	Bytes        uint64 `json:"bytes"`
	Corrupt      uint64 `json:"corrupt"`       // samples
	CorruptReads uint64 `json:"corrupt_reads"` // reads of them, or chunks holding them, that failed the check
}

// PrefetchStats count read-ahead: samples queued and shed (Shed: queue or budget full), bytes
// held now, and bytes later read (used) or let go unread (wasted).
type PrefetchStats struct {
	Issued      uint64 `json:"issued"`
	Shed        uint64 `json:"shed"`
	HeldBytes   int64  `json:"held_bytes"`
	UsedBytes   uint64 `json:"used_bytes"`
	WastedBytes uint64 `json:"wasted_bytes"`
	QueueDepth  int    `json:"queue_depth"`
	Stored      uint64 `json:"stored"`      // samples read ahead and pushed into the kernel's page cache
	Arrived     uint64 `json:"arrived"`     // samples pushed into the page cache as their chunk arrived (Loader.Arrived)
	PlanErrors  uint64 `json:"plan_errors"` // plans (or pieces of them) refused (EINVAL)
}

// EpochStats say which epoch the reads are in and what fraction of the files it has read
// (read or pushed), and how many files the previous epoch never read: its readers found them in
// the page cache (kernel_cache=on), kept there from earlier epochs.
type EpochStats struct {
	Number         int     `json:"number"`
	Coverage       float64 `json:"coverage"`
	PreviousUnseen int     `json:"previous_unseen"`
}

// Stats returns the current counters.
func (l *Loader) Stats() Stats {
	ps := l.d.stats()
	epoch, covered, files, pc := ps.epoch, ps.covered, ps.files, ps.pageCache
	st := &l.stats
	s := Stats{
		Cache: CacheStats{Hits: st.hits.Load(), Misses: st.misses.Load(), Shared: st.waits.Load(),
			KeptBytes: l.mem.keptBytes.Load(), BudgetBytes: l.opt.CacheBytes},
		Backend: BackendStats{Reads: st.backendReads.Load(), Bytes: st.backendBytes.Load(), Corrupt: st.corrupt.Load(),
			CorruptReads: st.corruptReads.Load()},
		Prefetch: PrefetchStats{Issued: st.aheadIssued.Load(), Shed: st.aheadShed.Load(),
			HeldBytes: l.mem.aheadBytes.Load(), UsedBytes: st.aheadUsed.Load(), WastedBytes: st.aheadWasted.Load(),
			QueueDepth: l.queue.depth(), PlanErrors: st.planWriteError.Load(), Stored: st.pushedAhead.Load(),
			Arrived: st.pushedArrived.Load()},
		Epoch:         EpochStats{Number: epoch, PreviousUnseen: ps.unseen},
		Plans:         ps.plans,
		PlanReadAhead: ps.planReadAhead,
		PageCache:     pc,
	}
	if pc != nil {
		pc.ChunkReads, pc.ChunkSamples = st.chunkReads.Load(), st.chunkSamples.Load()
	}
	if l.opt.Quiet != nil {
		s.Quiet = &QuietStats{Now: l.quiet.Load(), Quiets: l.quiets.Load(), Wakes: l.wakes.Load()}
	}
	if files > 0 {
		s.Epoch.Coverage = float64(covered) / float64(files)
	}
	return s
}
