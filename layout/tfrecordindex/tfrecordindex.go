// Package tfrecordindex indexes uncompressed TFRecord files of tf.train.Example records in place:
// IndexTFRecords reads each file once (layout/tfrecord) and returns an index whose files point
// at the records' image bytes inside the files, the files being the shards. With checksums (the
// default) each image's CRC32C is computed in that pass (layout.CRC32C). Options.View chooses
// the tree (layout/view builds it):
//
//   - view.Tree: each file's records under a directory named after it less ".tfrecord", as
//     ROW.EXT (the record's number from 0, zero-padded to the file's widest; EXT from the image's
//     magic: jpg, png, webp, else bin). view.Merge is refused: row names repeat across files.
//   - view.ImageFolder: CLASS/NAME. CLASS is the record's image/class/synset when it has one
//     (which reproduces torchvision's ImageNet class order), else its label as stored: numbers
//     zero-padded to one width, so the ImageNet scripts' labels 1..1000 give directories
//     0001..1000, in the order of their synsets (label 0, "background", is never written by
//     them; in a set whose records mix synsets and bare labels, labels are not padded);
//     Options.ClassNames names classes by label number instead (TFDS's label.labels.txt).
//     NAME is the base name of image/filename (TFDS file_name) when the record has one, else
//     FILE-ROW.EXT (FILE the file's directory name in the tree view).
//
// A compressed file (GZIP, ZLIB) fails the index with an error wrapping tfrecord.ErrCompressed.
// Records with no image, or (ImageFolder) no label, are counted, the first few named in
// Result.FirstMissing and warned of, and never served. When records take one path, the last
// wins (in file order, then in the order of the sources), the others counted in
// Result.Replaced.
package tfrecordindex

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"time"

	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/layout/tfrecord"
	"github.com/aifs/aifs/layout/view"
)

// Source is one TFRecord file to index in place, read once from its first byte.
type Source = view.Input[io.ReadCloser]

// Options configure IndexTFRecords. The zero value indexes with the defaults given on each field.
type Options struct {
	// View is view.Tree or view.ImageFolder. Default view.Tree.
	View view.Kind
	// NoChecksums leaves the images' CRC32Cs out (layout.Index.Checksums). Default false.
	NoChecksums bool
	// Jobs is the number of files read in parallel. Default 4.
	Jobs int
	// ClassNames, if set, names the class of label i ClassNames[i] (ImageFolder; the synset is
	// then not used). Default: the synset, else the label zero-padded.
	ClassNames []string
	// Warn receives a line for each of the first few records left out. Default: discard.
	Warn func(msg string)
	// Progress, if set, is called (serialised) as files are read.
	Progress func(Progress)
}

// Progress is a snapshot of a running IndexTFRecords.
type Progress = view.Progress

// Result summarises a finished IndexTFRecords.
type Result struct {
	Files     int // TFRecord files
	FileBytes int64
	Records   int64
	view.RowResult
	Duration time.Duration
}

// IndexTFRecords reads the files in srcs and returns an index presenting their records' images as
// the tree opt.View asks for, with the files as shards (kind layout.ShardTar: a file indexed in
// place, its checksum the file's CRC32C, computed in the same pass) in the order of srcs. The
// same files and options always give the same bytes.
func IndexTFRecords(ctx context.Context, srcs []Source, opt Options) ([]byte, Result, error) {
	start := time.Now()
	if len(srcs) == 0 {
		return nil, Result{}, errors.New("no TFRecord files to index")
	}
	if opt.Jobs <= 0 {
		opt.Jobs = 4
	}
	rsrcs, sizes, bytes := view.RowSources(srcs, func(string) string { return ".tfrecord" })
	res := Result{Files: len(srcs), FileBytes: bytes}
	x, err := view.NewRowIndexer(rsrcs, view.RowOptions{Kind: opt.View, ClassNames: opt.ClassNames, NoChecksums: opt.NoChecksums, Unit: "record", Warn: opt.Warn})
	if err != nil {
		return nil, Result{}, err
	}
	// Each file's records go into the tree in the order of srcs while later files are read. A
	// file's reader (its scanner's 4 MiB buffer) and, once added, its rows are reused by a later
	// file.
	rows := make([][]view.Row, len(srcs))
	crcs := make([]uint32, len(srcs))
	readers, free := view.NewFree[*reader](opt.Jobs), view.NewFree[[]view.Row](2*opt.Jobs)
	err = view.EachInOrder(ctx, len(srcs), opt.Jobs, func(ctx context.Context, i int) (err error) {
		r, ok := readers.Get()
		if !ok {
			r = &reader{}
		}
		buf, _ := free.Get()
		rows[i], crcs[i], err = r.read(ctx, srcs[i], opt, buf[:0])
		readers.Put(r)
		return err
	}, func(i int) error {
		res.Records += int64(len(rows[i]))
		err := x.Add(i, rows[i], crcs[i])
		free.Put(rows[i])
		rows[i] = nil
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

// reader reads one file at a time, keeping its scanner's buffer and its maps for the next.
type reader struct {
	sc      *tfrecord.Scanner
	labels  view.LabelNames
	synsets map[string]string // each synset's string, made once
	names   []byte            // the file names of a file's rows, end to end
	ends    []int             // where each row's name ends in names
}

// read reads the records of one file as rows, appended to rows, and with checksums the file's
// CRC32C (as it passes, for the shard's checksum). Per record it allocates nothing: a file's
// names are made one string, and each synset and label is made a string once.
func (rd *reader) read(ctx context.Context, s Source, opt Options, rows []view.Row) ([]view.Row, uint32, error) {
	f, err := s.Open(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("open %s: %w", s.Label, err)
	}
	defer f.Close()
	var r io.Reader = f
	sum := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	if !opt.NoChecksums {
		r = io.TeeReader(f, sum)
	}
	sopt := tfrecord.Options{Checksums: !opt.NoChecksums}
	if rd.sc == nil {
		rd.sc = tfrecord.NewScanner(r, s.Label, sopt)
		rd.synsets = map[string]string{}
	} else {
		rd.sc.Reset(r, s.Label, sopt)
	}
	sc := rd.sc
	named := opt.View == view.ImageFolder
	rd.names, rd.ends = rd.names[:0], rd.ends[:0]
	for n := 0; ; n++ {
		if n%1024 == 0 && ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
		r, err := sc.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, 0, err
		}
		row := view.Row{Index: r.Index, HasImage: r.HasImage, Offset: r.ImageOff, Size: r.ImageSize, CRC: r.ImageCRC, Ext: view.ImageExt(r.ImageHead[:])}
		switch {
		case r.Synset != nil && opt.ClassNames == nil:
			row.Label = rd.synset(r.Synset)
		case r.HasLabel:
			row.Label = rd.labels.Name(r.Label)
		}
		if named {
			if base := baseName(r.Filename); layout.ValidName(base) {
				rd.names = append(rd.names, base...)
			}
			rd.ends = append(rd.ends, len(rd.names))
		}
		rows = append(rows, row)
	}
	if sc.Offset() != s.Size {
		return nil, 0, fmt.Errorf("%s changed while it was indexed (%d bytes when listed, %d read)", s.Label, s.Size, sc.Offset())
	}
	if named {
		all, start := string(rd.names), 0
		for i, end := range rd.ends {
			rows[i].Name, start = all[start:end], end
		}
	}
	return rows, sum.Sum32(), nil
}

// synset returns b as a string, made once per synset.
func (rd *reader) synset(b []byte) string {
	if s, ok := rd.synsets[string(b)]; ok {
		return s
	}
	s := string(b)
	rd.synsets[s] = s
	return s
}

// baseName returns the last element of a file name as path.Base does, but "" for an empty
// name and "/" for one of slashes only (which ValidName then refuses).
func baseName(p []byte) []byte {
	for len(p) > 1 && p[len(p)-1] == '/' {
		p = p[:len(p)-1]
	}
	if i := bytes.LastIndexByte(p, '/'); i >= 0 && len(p) > 1 {
		p = p[i+1:]
	}
	return p
}
