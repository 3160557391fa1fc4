// Package plan is the Go side of the plan protocol, specified in docs/plan.md: how a trainer
// tells an aifs mount the order in which it will read the samples of the coming epoch. It holds
// the protocol's constants, the parser of the plan format (Parser, which the daemon's Loader
// runs on the pieces it takes) and a sender (Send, used by `aifs plan` and `aifs bench --plan`).
// python/aifs_plan.py is the other sender; tests on both sides check their constants against
// the table in docs/plan.md.
package plan

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"unsafe"

	"github.com/aifs/aifs/layout"
)

// The control file, found by LOOKUP in the mount root and never listed.
const (
	// ControlDir is the control directory in the mount root (it also holds stats and locations).
	ControlDir = ".aifs"
	// ControlFile is the plan file in ControlDir, which takes plans by ioctl.
	ControlFile = "plan"
	// KernelControlRoot holds the control mount of each kernel data plane mount (aifs mount
	// -o data=kernel), at KernelControlRoot/MAJOR:MINOR, the plane's device number: the kernel's
	// EROFS tree cannot hide a ControlDir, so the control files live in a FUSE mount there
	// (Control finds them).
	KernelControlRoot = "/run/aifs"
)

// Protocol is the version of the plan protocol (the number in the header lines). The stats file
// says it as "plan_protocol", and the Python package refuses a mount whose number is not its own.
const Protocol = 1

// The header lines of the format: a plan is one of these, "\n", then one sample per line.
const (
	// HeaderPaths starts a plan of paths of regular files relative to the mount root.
	HeaderPaths = "aifs-plan 1 paths"
	// HeaderIndices starts a plan of decimal indices: i is the i-th regular file in pack order.
	HeaderIndices = "aifs-plan 1 indices"
)

// The ioctl that carries a plan, one piece at a time: its argument is
// struct { uint32 len; uint32 flags; uint8 data[PieceBytes]; }, little-endian.
const (
	// PieceBytes is the most plan bytes one Ioctl carries.
	PieceBytes = 16368
	// ArgBytes is the size of Ioctl's argument: len and flags, then the piece.
	ArgBytes = 8 + PieceBytes
	// Ioctl is _IOW(0xA1, 1, ArgBytes) in Linux's generic encoding (x86-64, arm64).
	Ioctl = 1<<30 | ArgBytes<<16 | 0xA1<<8 | 1
	// FlagStart, in the flags of a piece, starts a new plan; no other flag exists.
	FlagStart = 1
)

// The bounds of a plan.
const (
	// MaxLine is the longest line, in bytes without the "\n": 255-byte names, 200 levels deep, fit.
	MaxLine = 64 << 10
	// MaxFactor bounds a plan to this many samples per regular file: a plan may repeat samples
	// (DistributedSampler pads) but not without end.
	MaxFactor = 4
)

// ErrBad is wrapped by every error about the content of a plan.
var ErrBad = errors.New("bad plan")

// Parser turns the bytes of one plan, given piece by piece, into sample ids. The zero value
// expects the header. A Parser is not safe for concurrent use.
type Parser struct {
	mode    string // "" before the header, then the header
	partial []byte // the incomplete last line of the previous piece
	entries int
}

// Parse appends to ids the samples of x named by the complete lines in data (plus the partial
// line carried from the last call) and keeps the incomplete tail for the next call. An error
// wraps ErrBad, unless the index failed to read; ids then holds the samples before the bad line,
// and the Parser must not be used again.
func (pp *Parser) Parse(x *layout.Index, data []byte, ids []layout.ID) ([]layout.ID, error) {
	limit := MaxFactor * max(x.Len(), 1)
	for len(data) > 0 {
		line, rest, complete := bytes.Cut(data, []byte{'\n'})
		data = rest
		if !complete {
			if len(pp.partial)+len(line) > MaxLine {
				return ids, fmt.Errorf("%w: a line longer than %d bytes", ErrBad, MaxLine)
			}
			pp.partial = append(pp.partial, line...)
			break
		}
		if len(pp.partial) > 0 {
			line = append(pp.partial, line...)
			pp.partial = pp.partial[:0]
		}
		if len(line) > MaxLine {
			return ids, fmt.Errorf("%w: a line longer than %d bytes", ErrBad, MaxLine)
		}
		if pp.mode == "" {
			switch h := string(line); h {
			case HeaderPaths, HeaderIndices:
				pp.mode = h
				continue
			default:
				return ids, fmt.Errorf("%w: first line %q, want %q or %q", ErrBad, truncate(h), HeaderPaths, HeaderIndices)
			}
		}
		if pp.entries++; pp.entries > limit {
			return ids, fmt.Errorf("%w: more than %d samples", ErrBad, limit)
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
func (pp *Parser) sample(x *layout.Index, line []byte) (layout.ID, error) {
	if pp.mode == HeaderIndices {
		i, err := strconv.ParseUint(unsafe.String(unsafe.SliceData(line), len(line)), 10, 32)
		if err != nil || i >= uint64(x.Files()) {
			return 0, fmt.Errorf("%w: %q is not an index below %d", ErrBad, truncate(string(line)), x.Files())
		}
		return x.FileAt(int(i)), nil
	}
	id, err := x.LookupPathBytes(line)
	if errors.Is(err, layout.ErrNotFound) {
		return 0, fmt.Errorf("%w: no sample %q", ErrBad, truncate(string(line)))
	} else if err != nil {
		return 0, fmt.Errorf("sample %q: %w", truncate(string(line)), err)
	}
	if x.Entry(id).IsDir() {
		return 0, fmt.Errorf("%w: %q is a directory", ErrBad, truncate(string(line)))
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
