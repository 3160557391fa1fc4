package prefetch

import (
	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/plan"
)

// Plans arrive by WritePlan, in pieces, in the format of docs/plan.md; package plan parses them
// and the Planner reads ahead in their order.

// The plan package's names as the rest of prefetch and its tests use them.
type planParser = plan.Parser

const (
	PlanHeaderPaths   = plan.HeaderPaths   // a plan's first line: paths follow
	PlanHeaderIndices = plan.HeaderIndices // a plan's first line: pack-order indices follow
	maxPlanLine       = plan.MaxLine
)

// ErrBadPlan is wrapped by every error about the content of a plan (plan.ErrBad).
var ErrBadPlan = plan.ErrBad

// stage asks the shards that stage (a disk cache with -o prefetch_shards=on) for the samples
// ids: a plan names what this node will read, so the node stages its own range of the set and
// nothing else (docs/multinode.md). Stage only marks chunks, so this is cheap under the lock.
func (l *Loader) stage(ids []layout.ID) {
	if l.stagers == nil {
		return
	}
	for _, id := range ids {
		e := l.x.Entry(id)
		if st := l.stagers[e.Shard]; st != nil {
			st.Stage(int64(e.Offset), int64(e.Size))
		}
	}
}

// WritePlan takes a piece of a plan from writer (docs/plan.md): with start, the first
// piece of a new plan, which replaces the writer's previous one; otherwise the next piece of
// the plan being sent. The samples are planned as they arrive. An error wraps ErrBadPlan; the
// samples before the bad line stay planned.
func (l *Loader) WritePlan(writer uint32, start bool, data []byte) error {
	l.lockPlanner()
	pp := l.parsers[writer]
	if pp == nil || start {
		if pp == nil && len(l.parsers) >= maxWriters {
			clear(l.parsers) // writers come and go with training runs; a writer mid-plan restarts
		}
		pp = &planParser{}
		l.parsers[writer] = pp
	}
	ids, err := pp.Parse(l.x, data, nil)
	l.stage(ids)
	if start {
		l.planner.SetPlan(writer, ids)
	} else {
		l.planner.AppendPlan(writer, ids)
	}
	if err != nil {
		delete(l.parsers, writer)
	}
	l.unlockPlannerNext(true)
	if err != nil {
		l.stats.planWriteError.Add(1)
	}
	return err
}
