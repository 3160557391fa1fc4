package prefetch

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"unsafe"

	"github.com/aifs/aifs/layout"
)

// The plan format, sent by a trainer to MOUNTPOINT/.aifs/plan (fs/plan.go; python/aifs_plan.py
// does it for any torch Sampler): a header line, then one sample per line, each line ending in
// "\n", in the order the samples will be read.
//
//	aifs-plan 1 paths     then paths of regular files relative to the mount root (raw bytes)
//	aifs-plan 1 indices   then decimal indices: i is the i-th regular file in pack order
//
// A plan arrives in pieces (WritePlan); the first starts a new plan for its writer (a thread,
// identified by the kernel's request pid), later ones append, and a line may span pieces. A
// line that names no regular file, a bad header, a line longer than maxPlanLine or a plan
// longer than maxPlanFactor times the files is an error (EINVAL to the writer); the samples
// before it stay planned.
const (
	maxPlanLine   = 64 << 10 // 255-byte names, 200 levels deep, fit
	maxPlanFactor = 4        // a plan may repeat samples (DistributedSampler pads) but not without end
)

// ErrBadPlan is wrapped by every error about the content of a plan.
var ErrBadPlan = errors.New("bad plan")

// planParser turns the bytes one writer writes into sample ids.
type planParser struct {
	mode    string // "" before the header, then the header
	partial []byte // the incomplete last line of the previous write
	entries int
}

// parse appends to ids the samples of the complete lines in data (plus the partial line
// carried from the last call) and keeps the incomplete tail for the next call.
func (pp *planParser) parse(x *layout.Index, data []byte, ids []layout.ID) ([]layout.ID, error) {
	limit := maxPlanFactor * max(x.Len(), 1)
	for len(data) > 0 {
		line, rest, complete := bytes.Cut(data, []byte{'\n'})
		data = rest
		if !complete {
			if len(pp.partial)+len(line) > maxPlanLine {
				return ids, fmt.Errorf("%w: a line longer than %d bytes", ErrBadPlan, maxPlanLine)
			}
			pp.partial = append(pp.partial, line...)
			break
		}
		if len(pp.partial) > 0 {
			line = append(pp.partial, line...)
			pp.partial = pp.partial[:0]
		}
		if len(line) > maxPlanLine {
			return ids, fmt.Errorf("%w: a line longer than %d bytes", ErrBadPlan, maxPlanLine)
		}
		if pp.mode == "" {
			switch h := string(line); h {
			case PlanHeaderPaths, PlanHeaderIndices:
				pp.mode = h
				continue
			default:
				return ids, fmt.Errorf("%w: first line %q, want %q or %q", ErrBadPlan, truncate(h), PlanHeaderPaths, PlanHeaderIndices)
			}
		}
		if pp.entries++; pp.entries > limit {
			return ids, fmt.Errorf("%w: more than %d samples", ErrBadPlan, limit)
		}
		id, err := pp.sample(x, line)
		if err != nil {
			return ids, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// sample resolves one line.
func (pp *planParser) sample(x *layout.Index, line []byte) (layout.ID, error) {
	if pp.mode == PlanHeaderIndices {
		i, err := strconv.ParseUint(unsafe.String(unsafe.SliceData(line), len(line)), 10, 32)
		if err != nil || i >= uint64(x.Files()) {
			return 0, fmt.Errorf("%w: %q is not an index below %d", ErrBadPlan, truncate(string(line)), x.Files())
		}
		return x.FileAt(int(i)), nil
	}
	id, err := x.LookupPathBytes(line)
	if errors.Is(err, layout.ErrNotFound) {
		return 0, fmt.Errorf("%w: no sample %q", ErrBadPlan, truncate(string(line)))
	} else if err != nil {
		return 0, fmt.Errorf("sample %q: %w", truncate(string(line)), err)
	}
	if x.Entry(id).IsDir() {
		return 0, fmt.Errorf("%w: %q is a directory", ErrBadPlan, truncate(string(line)))
	}
	return id, nil
}

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

// truncate shortens s for an error message.
func truncate(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// WritePlan takes a piece of a plan from writer (the format is above): with start, the first
// piece of a new plan, which replaces the writer's previous one; otherwise the next piece of
// the plan being sent. The samples are planned as they arrive. An error wraps ErrBadPlan; the
// samples before the bad line stay planned.
func (l *Loader) WritePlan(writer uint32, start bool, data []byte) error {
	err := l.d.writePlan(l.x, writer, start, data, l.stage)
	if err != nil {
		l.stats.planWriteError.Add(1)
	}
	return err
}
