package prefetch

// The plan gate: a plan's read-ahead must never make the workload slower than the same
// workload with no plan. It reads samples ahead of their readers and puts them in the page
// cache, which pays when they are still there at their read. When the page cache has little
// room for them (a set several times the budget, whose window of samples outside the subset
// is 1/16 of it, shared with the samples just read), many are let go unpushed, refused by the
// kernel, or dropped before their reader comes, and each is then read twice: in a memory
// cgroup of 1/5 of a 1.4 GB set, 4 ranks of aifs.DistributedSampler read 4.86 GB from the
// shards in 3 epochs against 4.07 GB with torch's sampler, which sends no plan, with 617 MB of
// read-ahead let go unread, and ran at 0.87× its samples/s (docs/bench/mlperf.md, "Findings").
// A plan also stops the sweep of chunk reads (Policy.Sweep), which would read those samples
// in large reads.
//
// So the Policy counts, for the samples that plans read ahead, how many reached the page cache
// or memory for their reader (delivered) and how many did not or were gone at their read
// (wasted): let go (LetGo), refused by the kernel, or read through a READ after their push
// (on the kernel data plane, read while not believed resident). Each planGateSpan samples so
// counted, the gate closes when more than 1/planGateWasteShare of them were wasted: plans then
// read nothing ahead and the sweep runs as if no plan were held (plans still set the page
// cache's scope and move their cursors). A closed gate opens again planGateRetryEpochs epochs
// later, to try once more (the budget, or the readers' pace, may have changed since).

// planGateSpan is how many samples read ahead by plans one verdict of the gate counts.
const planGateSpan = 512

// planGateWasteShare: the gate closes when more than 1/planGateWasteShare of a span was wasted. In
// the harness run that opened issue 46, plans delivered ~96% of their read-ahead where they
// matched torch's sampler (a step after each batch) and ~50% where they ran at 0.87× of it
// (no compute).
const planGateWasteShare = 8

// planGateRetryEpochs is how many epochs a closed gate stays closed.
const planGateRetryEpochs = 4

// planGate decides whether plans read ahead (see above). It is part of the Policy: a pure
// state machine, no clock but the planner's epochs.
type planGate struct {
	closed     bool
	closedAt   int // the epoch it closed in
	delivered  uint64
	wasted     uint64 // of the current span
	totalSent  uint64 // over the mount's life
	totalWaste uint64
	closings   uint64
}

// delivery observes the fate of one sample a plan read ahead: wasted or not. A delivered
// sample may be counted wasted later as well (its push was dropped before its read), which
// counts against the span it falls in.
func (g *planGate) delivery(wasted bool, epoch int) {
	if g.closed {
		return
	}
	if wasted {
		g.wasted++
		g.totalWaste++
	} else {
		g.delivered++
		g.totalSent++
	}
	if g.delivered+g.wasted < planGateSpan {
		return
	}
	if g.wasted*planGateWasteShare > g.delivered+g.wasted {
		g.closed, g.closedAt = true, epoch
		g.closings++
	}
	g.delivered, g.wasted = 0, 0
}

// open reports whether plans read ahead in epoch, opening a gate closed planGateRetryEpochs
// epochs ago.
func (g *planGate) open(epoch int) bool {
	if g.closed && epoch >= g.closedAt+planGateRetryEpochs {
		g.closed = false
	}
	return !g.closed
}

// PlanReadAheadStats say whether plans read ahead now (State: "on", or "off: ..." with the
// reason), and the samples plans read ahead that reached their reader (Delivered) or did not
// (Wasted), over the mount's life while the gate was open; Closed counts the times the gate
// closed.
type PlanReadAheadStats struct {
	State     string `json:"state"`
	Delivered uint64 `json:"delivered"`
	Wasted    uint64 `json:"wasted"`
	Closed    uint64 `json:"closed"`
}

func (g *planGate) stats() PlanReadAheadStats {
	s := PlanReadAheadStats{State: "on", Delivered: g.totalSent, Wasted: g.totalWaste, Closed: g.closings}
	if g.closed {
		s.State = "off: more than 1/8 of the last 512 samples read ahead by plans did not reach their reader; " +
			"the sweep runs as without a plan"
	}
	return s
}
