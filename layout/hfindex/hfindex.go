// Package hfindex indexes the files of a Hugging Face `datasets` image set in place: Arrow IPC
// stream files (load_dataset's cache, save_to_disk), Arrow IPC files and Parquet files whose
// image bytes are uncompressed and PLAIN (datasets >= 4.6). IndexHF reads each file's schema
// and rows (layout/hfarrow) and returns an index whose files point at the images' bytes inside
// the files, the files being the shards. With checksums (the default) each image's CRC32C is
// computed while indexing (layout.CRC32C), which reads every image's bytes, and the whole
// file's (the shard's checksum, which aifs verify checks) from the same reads. Options.View
// chooses the tree (layout/view builds it):
//
//   - view.Tree: each file's rows under a directory named after it less its extension, as
//     ROW.EXT (the row's number from 0, zero-padded to the file's widest; EXT from the image's
//     magic: jpg, png, webp, else bin). view.Merge is refused: row names repeat across files.
//   - view.ImageFolder: CLASS/NAME. CLASS is the row's label (the label column), zero-padded to
//     one width so that sorted order is label order; with Options.SchemaClassNames it is the
//     class name the schema gives the label (ClassNames of the sanitized names), and with
//     Options.ClassNames the name that list gives. NAME is the base name of the image's path
//     when the row has one, else FILE-ROW.EXT (FILE the file's directory name in the tree view).
//
// Sanitized class names (SanitizeNames): '/' and NUL become '_', and a name that is empty, "."
// or "..", or that two labels share once sanitized (ImageNet's "crane" is labels 134 and 517),
// takes the label as a prefix, zero-padded to the widest label: "0134-crane", "0517-crane".
// ImageFolder then orders classes by name, not by label.
//
// A file whose image bytes cannot be served where they lie (compressed Arrow bodies, compressed
// or dictionary-encoded Parquet image pages) fails the index with an error wrapping
// hfarrow.ErrRefused that says what to do. Rows whose image is null, or (ImageFolder) whose
// label is null, are counted, the first few named in Result.FirstMissing and warned of, and
// never served. When rows take one path, the last wins (in file order, then in the order of the
// sources), the others counted in Result.Replaced.
package hfindex

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/layout/hfarrow"
	"github.com/aifs/aifs/layout/view"
)

// Source is one Arrow or Parquet file to index in place.
type Source = view.Input[File]

// File is an opened source file.
type File = view.File

// Options configure IndexHF. The zero value indexes with the defaults given on each field.
type Options struct {
	// View is view.Tree or view.ImageFolder. Default view.Tree.
	View view.Kind
	// NoChecksums leaves the images' CRC32Cs out (layout.Index.Checksums), and the image bytes
	// of Arrow files unread but for their first bytes. Default false.
	NoChecksums bool
	// Jobs is the number of files read in parallel. Default 4.
	Jobs int
	// ImageColumn and LabelColumn name the columns (hfarrow.Options). Default: the first Image
	// feature, the first ClassLabel feature.
	ImageColumn, LabelColumn string
	// SchemaClassNames names class directories by the schema's class names, sanitized (package
	// doc). Default false: by the label, zero-padded.
	SchemaClassNames bool
	// ClassNames, if set, names the class of label i ClassNames[i] (ImageFolder).
	ClassNames []string
	// Warn receives a line for each of the first few rows left out. Default: discard.
	Warn func(msg string)
	// Progress, if set, is called (serialised) as files are read.
	Progress func(Progress)
}

// Progress is a snapshot of a running IndexHF.
type Progress = view.Progress

// Result summarises a finished IndexHF.
type Result struct {
	Files                    int // Arrow and Parquet files
	FileBytes                int64
	Format                   hfarrow.Format // the first file's
	ImageColumn, LabelColumn string         // the first file's
	Rows                     int64
	view.RowResult
	Duration time.Duration
}

// scanned is what reading one file keeps of it.
type scanned struct {
	schema hfarrow.Schema
	rows   []view.Row
	crc    uint32 // the file's CRC32C, with checksums
}

// IndexHF reads the files in srcs and returns an index presenting their rows' images as the tree
// opt.View asks for, with the files as shards (kind layout.ShardTar: a file indexed in place) in
// the order of srcs. The same files and options always give the same bytes.
func IndexHF(ctx context.Context, srcs []Source, opt Options) ([]byte, Result, error) {
	start := time.Now()
	if len(srcs) == 0 {
		return nil, Result{}, errors.New("no Arrow or Parquet files to index")
	}
	if opt.Jobs <= 0 {
		opt.Jobs = 4
	}
	rsrcs, sizes, bytes := view.RowSources(srcs, path.Ext)
	res := Result{Files: len(srcs), FileBytes: bytes}
	hopt := hfarrow.Options{ImageColumn: opt.ImageColumn, LabelColumn: opt.LabelColumn, Checksums: !opt.NoChecksums}
	// Each file's rows go into the tree in the order of srcs while later files are read; the
	// first file's schema gives the class names. A file's reader (its scanner's buffers) and,
	// once added, its rows are reused by a later file.
	scans := make([]scanned, len(srcs))
	var first hfarrow.Schema
	var x *view.RowIndexer
	readers, free := view.NewFree[*reader](opt.Jobs), view.NewFree[[]view.Row](2*opt.Jobs)
	err := view.EachInOrder(ctx, len(srcs), opt.Jobs, func(ctx context.Context, i int) (err error) {
		r, ok := readers.Get()
		if !ok {
			r = &reader{}
		}
		buf, _ := free.Get()
		scans[i], err = r.read(ctx, srcs[i], hopt, opt.View == view.ImageFolder, buf[:0])
		readers.Put(r)
		return err
	}, func(i int) (err error) {
		sc := scans[i]
		scans[i] = scanned{}
		if i == 0 {
			first = sc.schema
			res.Format, res.ImageColumn, res.LabelColumn = first.Format, first.ImageColumn, first.LabelColumn
		}
		if opt.View == view.ImageFolder {
			if sc.schema.LabelColumn == "" {
				return fmt.Errorf("%s has no label column (no ClassLabel feature): give --label-column, or use --view tree", srcs[i].Label)
			}
			if opt.SchemaClassNames && !slices.Equal(sc.schema.ClassNames, first.ClassNames) {
				return fmt.Errorf("%s and %s name their classes differently in their schemas", srcs[0].Label, srcs[i].Label)
			}
		}
		if i == 0 {
			classNames := opt.ClassNames
			if opt.View == view.ImageFolder && opt.SchemaClassNames {
				if len(first.ClassNames) == 0 {
					return fmt.Errorf("%s: the schema names no classes for column %q", srcs[0].Label, first.LabelColumn)
				}
				classNames = SanitizeNames(first.ClassNames)
			}
			if x, err = view.NewRowIndexer(rsrcs, view.RowOptions{Kind: opt.View, ClassNames: classNames, NoChecksums: opt.NoChecksums, Unit: "row", Warn: opt.Warn}); err != nil {
				return err
			}
		}
		res.Rows += int64(len(sc.rows))
		err = x.Add(i, sc.rows, sc.crc)
		free.Put(sc.rows)
		return err
	}, view.Progressor(sizes, opt.Progress))
	if err != nil {
		return nil, Result{}, err
	}
	index, rres, err := x.Index()
	if err != nil {
		return nil, Result{}, err
	}
	res.RowResult = rres
	res.Duration = time.Since(start)
	return index, res, nil
}

// SanitizeNames returns class directory names for the class names of a schema (package doc):
// '/' and NUL become '_', and a name that is empty, "." or "..", or shared by two labels, takes
// its label as a prefix, zero-padded to the widest label.
func SanitizeNames(names []string) []string {
	out := make([]string, len(names))
	count := map[string]int{}
	for i, n := range names {
		out[i] = strings.Map(func(r rune) rune {
			if r == '/' || r == 0 {
				return '_'
			}
			return r
		}, n)
		count[out[i]]++
	}
	width := len(strconv.Itoa(max(len(names)-1, 0)))
	for i, n := range out {
		if count[n] > 1 || n == "" || n == "." || n == ".." {
			out[i] = fmt.Sprintf("%0*d-%s", width, i, n)
		}
	}
	return out
}

// reader reads one file at a time, keeping its scanner's and its own buffers for the next.
type reader struct {
	sc     *hfarrow.Scanner
	summed summingReader
	heads  headReader
	labels view.LabelNames
	names  []byte // the rows' names, end to end
	ends   []int  // where each row's name ends in names
}

// read reads the rows of one file, appended to rows, and the first bytes of each image for its
// extension; named (ImageFolder) keeps the images' names. Per row it allocates nothing: a
// file's names are made one string, and each label is made a string once.
func (rd *reader) read(ctx context.Context, s Source, opt hfarrow.Options, named bool, rows []view.Row) (scanned, error) {
	f, err := s.Open(ctx)
	if err != nil {
		return scanned{}, fmt.Errorf("open %s: %w", s.Label, err)
	}
	defer f.Close()
	var r io.ReaderAt = f
	rd.summed = summingReader{r: f, size: s.Size, gap: rd.summed.gap}
	if opt.Checksums {
		r = &rd.summed
	}
	if rd.sc == nil {
		rd.sc, err = hfarrow.NewScanner(r, s.Size, s.Label, opt)
	} else {
		err = rd.sc.Reset(r, s.Size, s.Label, opt)
	}
	if err != nil {
		return scanned{}, err
	}
	sc := rd.sc
	out := scanned{schema: sc.Schema(), rows: rows}
	rd.heads = headReader{r: r, size: s.Size, buf: rd.heads.buf[:0]}
	rd.names, rd.ends = rd.names[:0], rd.ends[:0]
	for n := 0; ; n++ {
		if n%1024 == 0 && ctx.Err() != nil {
			return scanned{}, ctx.Err()
		}
		r, err := sc.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return scanned{}, err
		}
		row := view.Row{Index: r.Index, HasImage: r.HasImage, Offset: r.ImageOff, Size: r.ImageSize, CRC: r.ImageCRC}
		switch {
		case r.HasHead:
			row.Ext = view.ImageExt(r.ImageHead[:])
		case r.HasImage:
			head, err := rd.heads.head(r.ImageOff, r.ImageSize)
			if err != nil {
				return scanned{}, fmt.Errorf("%s: row %d: read the image's first bytes: %w", s.Label, r.Index, err)
			}
			row.Ext = view.ImageExt(head)
		}
		if r.HasLabel {
			row.Label = rd.labels.Name(r.Label)
		}
		if named {
			if layout.ValidName(r.Path) {
				rd.names = append(rd.names, r.Path...)
			}
			rd.ends = append(rd.ends, len(rd.names))
		}
		out.rows = append(out.rows, row)
	}
	if named {
		all, start := string(rd.names), 0
		for i, end := range rd.ends {
			out.rows[i].Name, start = all[start:end], end
		}
	}
	if opt.Checksums {
		if out.crc, err = rd.summed.sum(); err != nil {
			return scanned{}, fmt.Errorf("%s: %w", s.Label, err)
		}
	}
	return out, nil
}

// summingReader computes the CRC32C of a file (the shard's checksum, which aifs verify checks
// beside the images') from the reads made through it, so that the file is read once: the sum
// covers the prefix [0, done), which grows with each read that starts in it or a little after
// it (the bytes between read first, maxGap at the most). The scanner reads a file mostly in
// order of offset; what it skipped or read out of order (an Arrow file's or Parquet file's
// footer, read first) is read by sum. It is used by one goroutine.
type summingReader struct {
	r    io.ReaderAt
	size int64
	done int64
	crc  uint32
	gap  []byte
}

// maxGap is the most bytes summingReader reads to join a read to the prefix it has summed.
const maxGap = 1 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (s *summingReader) ReadAt(p []byte, off int64) (int, error) {
	if off > s.done && off-s.done <= maxGap {
		if err := s.readTo(off); err != nil {
			return 0, err
		}
	}
	n, err := s.r.ReadAt(p, off)
	if off <= s.done && off+int64(n) > s.done {
		s.crc = crc32.Update(s.crc, castagnoli, p[s.done-off:n])
		s.done = off + int64(n)
	}
	return n, err
}

// readTo sums the file's bytes [done, end).
func (s *summingReader) readTo(end int64) error {
	for s.done < end {
		if s.gap == nil {
			s.gap = make([]byte, maxGap)
		}
		b := s.gap[:min(int64(len(s.gap)), end-s.done)]
		n, err := s.r.ReadAt(b, s.done)
		s.crc = crc32.Update(s.crc, castagnoli, b[:n])
		s.done += int64(n)
		if n < len(b) {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("read the file for its checksum: %w", err)
		}
	}
	return nil
}

// sum returns the CRC32C of the whole file, reading what the reads through s did not cover.
func (s *summingReader) sum() (uint32, error) {
	if err := s.readTo(s.size); err != nil {
		return 0, err
	}
	return s.crc, nil
}

// headReader reads the first bytes of images through 1 MiB reads: the images of a batch lie in
// order, so one read serves many small ones.
type headReader struct {
	r    io.ReaderAt
	size int64
	off  int64
	buf  []byte
}

// head returns up to 12 first bytes of the image [off, off+n), valid until the next call.
func (h *headReader) head(off, n int64) ([]byte, error) {
	n = min(n, 12)
	if off >= h.off && off+n <= h.off+int64(len(h.buf)) {
		return h.buf[off-h.off : off-h.off+n], nil
	}
	if off < 0 || n < 0 || off > h.size-n {
		return nil, fmt.Errorf("[%d,+%d) is outside the file's %d bytes", off, n, h.size)
	}
	want := min(1<<20, h.size-off)
	if cap(h.buf) < int(want) {
		h.buf = make([]byte, want)
	}
	h.buf = h.buf[:want]
	if k, err := h.r.ReadAt(h.buf, off); int64(k) < want {
		h.buf = h.buf[:0]
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	h.off = off
	return h.buf[:n], nil
}
