package view

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/aifs/aifs/layout"
)

// RowSource is a source file of rows, samples with no name of their own: a TFRecord file's
// records (layout/tfrecordindex), a Hugging Face file's rows (layout/hfindex).
type RowSource struct {
	Name    string // the shard's name in the index (layout.Shard.Name)
	Label   string // its path or URL, for messages
	Ext     string // its format's extension, left out of its directory's name (DirName)
	Size    int64
	MTime   int64
	Version string // layout.Shard.Version
	CRC     uint32 // the CRC32C of the whole file (layout.Shard.CRC); 0 without checksums
}

// RowSources returns the RowSource of each file of srcs, its extension ext(its name), the files'
// sizes in order (for Progressor) and their bytes in all.
func RowSources[F io.Closer](srcs []Input[F], ext func(name string) string) (rs []RowSource, sizes []int64, bytes int64) {
	rs, sizes = make([]RowSource, len(srcs)), make([]int64, len(srcs))
	for i, s := range srcs {
		sizes[i] = s.Size
		rs[i] = RowSource{Name: s.Name, Label: s.Label, Ext: ext(s.Name), Size: s.Size, MTime: s.MTime, Version: s.Version}
		bytes += s.Size
	}
	return rs, sizes, bytes
}

// Row is one row of a RowSource.
type Row struct {
	Index    int64 // the row's number in its source, from 0
	HasImage bool
	Offset   int64 // the image's first byte in the source
	Size     int64
	CRC      uint32 // CRC32C of the image's bytes; 0 without checksums
	Ext      string // the image's extension (ImageExt)
	Label    string // ImageFolder: the class label; "" for none
	Name     string // ImageFolder: the image's file name (a valid name); "" for none
}

// RowOptions configure IndexRows.
type RowOptions struct {
	Kind        Kind     // Tree or ImageFolder (Merge is refused: row names repeat across sources)
	ClassNames  []string // Options.ClassNames
	NoChecksums bool
	Unit        string // what a row is called in messages: "record", "row"
	Warn        func(msg string)
}

// RowResult counts the tree IndexRows returns.
type RowResult struct {
	Samples, Dirs, Classes, Replaced int
	Bytes                            int64
	NoImage, NoLabel                 int64 // rows left out, never served
	// FirstMissing names the first few rows left out: "FILE: record N: no image".
	FirstMissing []string
}

// LabelNames gives each numeric label its string (a Row's Label) once, so that rows sharing a
// label share its string; the zero value is ready.
type LabelNames map[int64]string

// Name returns label as a string.
func (n *LabelNames) Name(label int64) string {
	if s, ok := (*n)[label]; ok {
		return s
	}
	if *n == nil {
		*n = LabelNames{}
	}
	s := strconv.FormatInt(label, 10)
	(*n)[label] = s
	return s
}

// maxNamedRows is how many rows left out IndexRows names.
const maxNamedRows = 10

// IndexRows returns the index of the rows of srcs (rows[i] those of srcs[i], all of them, in
// order), the sources being its shards (kind layout.ShardTar, checksums layout.CRC32C). Tree
// puts each source's rows under DirName(Name, Ext) as RowName(Index, len(rows[i]), Ext);
// ImageFolder makes each row with a label CLASS/NAME, NAME its Name, else DIR-ROW.EXT. A row
// with no image, or (ImageFolder) no label, is counted, named (the first few) and left out.
func IndexRows(srcs []RowSource, rows [][]Row, opt RowOptions) ([]byte, RowResult, error) {
	x, err := NewRowIndexer(srcs, opt)
	if err != nil {
		return nil, RowResult{}, err
	}
	for i := range srcs {
		if err := x.Add(i, rows[i], srcs[i].CRC); err != nil {
			return nil, RowResult{}, err
		}
	}
	return x.Index()
}

// RowIndexer builds what IndexRows returns a source at a time, in the order of the sources, so
// that a source's rows can go into the tree while later sources are still being read. It is
// used by one goroutine at a time.
type RowIndexer struct {
	srcs  []RowSource
	vsrcs []Source
	opt   RowOptions
	b     *Builder
	res   RowResult
	recs  []Record  // Add's, reused
	name  []byte    // Add's, reused: the names it makes, end to end
	ends  []nameEnd // Add's, reused
}

// NewRowIndexer returns a RowIndexer of srcs (their CRCs set by Add).
func NewRowIndexer(srcs []RowSource, opt RowOptions) (*RowIndexer, error) {
	if opt.Kind == Merge {
		return nil, fmt.Errorf("%ss have no names of their own to merge by: use the tree or imagefolder view", opt.Unit)
	}
	if opt.Warn == nil {
		opt.Warn = func(string) {}
	}
	x := &RowIndexer{srcs: slices.Clone(srcs), vsrcs: make([]Source, len(srcs)), opt: opt}
	for i, s := range srcs {
		x.vsrcs[i] = Source{Label: s.Label, Dir: DirName(s.Name, s.Ext), MTime: s.MTime}
	}
	x.b = New(x.vsrcs, Options{Kind: opt.Kind, ClassNames: opt.ClassNames, Warn: opt.Warn})
	return x, nil
}

// missing counts nothing; it names the first few rows left out.
func (x *RowIndexer) missing(label string, row int64, what string) {
	if len(x.res.FirstMissing) < maxNamedRows {
		named := fmt.Sprintf("%s: %s %d: %s", label, x.opt.Unit, row, what)
		x.res.FirstMissing = append(x.res.FirstMissing, named)
		x.opt.Warn(named + "; never served")
	}
}

// Add places the rows of source i, whose whole CRC32C is crc; sources are added in order, each
// once. The names it makes (ROW.EXT, DIR-ROW.EXT) are one string a source, not one a row.
func (x *RowIndexer) Add(i int, rows []Row, crc uint32) error {
	src, opt := x.srcs[i], x.opt
	x.srcs[i].CRC = crc
	x.recs, x.name, x.ends = x.recs[:0], x.name[:0], x.ends[:0]
	width := rowWidth(int64(len(rows)))
	for _, r := range rows {
		if !r.HasImage {
			x.res.NoImage++
			x.missing(src.Label, r.Index, "no image")
			continue
		}
		v := Record{Mode: 0o444, MTime: src.MTime, Offset: uint64(r.Offset), Size: uint64(r.Size), CRC: r.CRC, Path: r.Name}
		if opt.Kind == ImageFolder {
			if r.Label == "" {
				x.res.NoLabel++
				x.missing(src.Label, r.Index, "no label")
				continue
			}
			v.Label = r.Label
		}
		if opt.Kind != ImageFolder || r.Name == "" { // ROW.EXT; in ImageFolder, DIR-ROW.EXT
			if opt.Kind == ImageFolder {
				x.name = append(append(x.name, x.vsrcs[i].Dir...), '-')
			}
			x.name = appendRowName(x.name, r.Index, width, r.Ext)
			x.ends = append(x.ends, nameEnd{len(x.recs), len(x.name)})
		}
		if opt.NoChecksums {
			v.CRC = 0
		}
		x.recs = append(x.recs, v)
	}
	names, start := string(x.name), 0
	for _, e := range x.ends {
		x.recs[e.rec].Path, start = names[start:e.end], e.end
	}
	return x.b.Add(i, x.recs)
}

// nameEnd says that the name of record rec of RowIndexer.Add ends at end in its names.
type nameEnd struct{ rec, end int }

// Index finishes the tree and returns the index and its counts.
func (x *RowIndexer) Index() ([]byte, RowResult, error) {
	shards := make([]layout.Shard, len(x.srcs))
	for i, s := range x.srcs {
		shards[i] = layout.Shard{Name: s.Name, Kind: layout.ShardTar, Size: uint64(s.Size), Version: s.Version, Checksum: layout.CRC32C, CRC: s.CRC}
		if x.opt.NoChecksums {
			shards[i].CRC = 0
		}
	}
	index, vres, err := x.b.Index(shards, x.opt.NoChecksums)
	if err != nil {
		return nil, RowResult{}, err
	}
	res := x.res
	res.Samples, res.Dirs, res.Bytes, res.Replaced, res.Classes = vres.Files, vres.Dirs, vres.Bytes, vres.Replaced, vres.Classes
	res.NoLabel += int64(vres.NoClass)
	return index, res, nil
}

// Progressor returns the done function of Each or EachInOrder over sources of sizes that calls
// progress (if set) with the files done and their bytes.
func Progressor(sizes []int64, progress func(Progress)) func(i int) {
	var p Progress
	p.TotalFiles = len(sizes)
	for _, n := range sizes {
		p.TotalBytes += n
	}
	return func(i int) {
		p.Files++
		p.Bytes += sizes[i]
		if progress != nil {
			progress(p)
		}
	}
}

// ReadEach calls read for each of the sources of sizes, jobs at once (Each), and returns the
// results in their order; progress, if set, is called (serialised) after each.
func ReadEach[T any](ctx context.Context, sizes []int64, jobs int, read func(ctx context.Context, i int) (T, error),
	progress func(Progress)) ([]T, error) {
	out := make([]T, len(sizes))
	err := Each(ctx, len(sizes), jobs, func(ctx context.Context, i int) (err error) {
		out[i], err = read(ctx, i)
		return err
	}, Progressor(sizes, progress))
	return out, err
}
