package prefetch

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"github.com/aifs/aifs/layout"
)

// The plan format, written by a trainer into MOUNTPOINT/.aifs/plan (python/aifs_plan.py does
// it for any torch Sampler): a header line, then one sample per line, each line ending in
// "\n", in the order the samples will be read.
//
//	aifs-plan 1 paths     then paths of regular files relative to the mount root (raw bytes)
//	aifs-plan 1 indices   then decimal indices: i is the i-th regular file in pack order
//
// A write at offset 0 starts a new plan for its writer (a thread, identified by the kernel's
// request pid); later writes append. A line that names no regular file, a bad header, a line
// longer than maxPlanLine or a plan longer than maxPlanFactor times the files is an error
// (EINVAL to the writer); the samples before it stay planned.
const (
	planHeaderPaths   = "aifs-plan 1 paths"
	planHeaderIndices = "aifs-plan 1 indices"
	maxPlanLine       = 64 << 10 // 255-byte names, 200 levels deep, fit
	maxPlanFactor     = 4        // a plan may repeat samples (DistributedSampler pads) but not without end
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
// carried from the last call) and keeps the incomplete tail for the next call. files lists
// the regular files in pack order (for indices); it is called only when needed.
func (pp *planParser) parse(x *layout.Index, files func() []layout.ID, data []byte, ids []layout.ID) ([]layout.ID, error) {
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
			case planHeaderPaths, planHeaderIndices:
				pp.mode = h
				continue
			default:
				return ids, fmt.Errorf("%w: first line %q, want %q or %q", ErrBadPlan, truncate(h), planHeaderPaths, planHeaderIndices)
			}
		}
		if pp.entries++; pp.entries > limit {
			return ids, fmt.Errorf("%w: more than %d samples", ErrBadPlan, limit)
		}
		id, err := pp.sample(x, files, line)
		if err != nil {
			return ids, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// sample resolves one line.
func (pp *planParser) sample(x *layout.Index, files func() []layout.ID, line []byte) (layout.ID, error) {
	if pp.mode == planHeaderIndices {
		i, err := strconv.ParseUint(unsafe.String(unsafe.SliceData(line), len(line)), 10, 32)
		f := files()
		if err != nil || i >= uint64(len(f)) {
			return 0, fmt.Errorf("%w: %q is not an index below %d", ErrBadPlan, truncate(string(line)), len(f))
		}
		return f[i], nil
	}
	path := unsafe.String(unsafe.SliceData(line), len(line)) // Lookup keeps no reference
	id := layout.Root
	for path != "" {
		var part string
		part, path, _ = strings.Cut(path, "/")
		if part == "" || part == "." {
			continue
		}
		var ok bool
		if id, ok = x.Lookup(id, part); !ok {
			return 0, fmt.Errorf("%w: no sample %q", ErrBadPlan, truncate(string(line)))
		}
	}
	if x.Entry(id).IsDir() {
		return 0, fmt.Errorf("%w: %q is a directory", ErrBadPlan, truncate(string(line)))
	}
	return id, nil
}

// truncate shortens s for an error message.
func truncate(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// WritePlan takes bytes written at offset off of the plan file by writer (see the plan format
// in plan.go): off 0 starts the writer's new plan. The samples are planned as they arrive.
// An error wraps ErrBadPlan; the samples before the bad line stay planned.
func (l *Loader) WritePlan(writer uint32, off int64, data []byte) error {
	l.lockPlanner()
	pp := l.parsers[writer]
	if pp == nil || off == 0 {
		if pp == nil && len(l.parsers) >= maxWriters {
			clear(l.parsers) // writers come and go with training runs; a writer mid-plan restarts
		}
		pp = &planParser{}
		l.parsers[writer] = pp
	}
	fresh := off == 0
	ids, err := pp.parse(l.x, l.fileIDs, data, nil)
	if fresh {
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

// fileIDs returns the regular files in pack order (built once).
func (l *Loader) fileIDs() []layout.ID {
	l.filesMu.Do(func() {
		for id := range l.x.Len() {
			if !l.x.Entry(layout.ID(id)).IsDir() {
				l.files = append(l.files, layout.ID(id))
			}
		}
	})
	return l.files
}
