package prefetch

import (
	"github.com/aifs/aifs/layout"
)

// Plans arrive by WritePlan, in pieces, in the format of docs/plan.md; package plan parses them
// and the Planner reads ahead in their order.

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
// the plan being sent. The samples are planned as they arrive. An error wraps plan.ErrBad; the
// samples before the bad line stay planned.
func (l *Loader) WritePlan(writer uint32, start bool, data []byte) error {
	err := l.d.writePlan(l.x, writer, start, data, l.stage)
	if err != nil {
		l.stats.planWriteError.Add(1)
	}
	return err
}
