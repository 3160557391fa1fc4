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
//     them); Options.ClassNames names classes by label number instead (TFDS's label.labels.txt).
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
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"time"

	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/layout/tfrecord"
	"github.com/aifs/aifs/layout/view"
)

// Source is one TFRecord file to index in place.
type Source struct {
	// Name is what the index records as the shard's name (layout.Shard.Name).
	Name string
	// Label names the file in messages: its path or URL.
	Label string
	// Size is the file's size in bytes, as listed; a file that reads otherwise fails the index.
	Size int64
	// MTime (nanoseconds) is given to the file's directory in the tree view.
	MTime int64
	// Version is recorded in the index and checked at mount (layout.Shard.Version).
	Version string
	// Open returns the file's bytes from its first; IndexTFRecords closes it.
	Open func(ctx context.Context) (io.ReadCloser, error)
}

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
type Progress struct {
	Files, TotalFiles int
	Bytes, TotalBytes int64 // of the files read, counted whole as each is done
}

// Result summarises a finished IndexTFRecords.
type Result struct {
	Files     int // TFRecord files
	FileBytes int64
	Records   int64
	Samples   int // files in the tree
	Dirs      int
	Bytes     int64 // the samples' sizes
	Classes   int   // ImageFolder
	NoImage   int64 // records without an image: never served
	NoLabel   int64 // ImageFolder: records without a label (or one naming no class): never served
	// FirstMissing names the first few records left out: "FILE: record N: no image".
	FirstMissing []string
	Replaced     int
	Duration     time.Duration
}

// maxNamed is how many records left out are named.
const maxNamed = 10

// scanned is what reading one file keeps of it.
type scanned struct {
	recs    []tfrecord.Record
	summary tfrecord.Summary
}

// IndexTFRecords reads the files in srcs and returns an index presenting their records' images as
// the tree opt.View asks for, with the files as shards (kind layout.ShardTar: a file indexed in
// place) in the order of srcs. The same files and options always give the same bytes.
func IndexTFRecords(ctx context.Context, srcs []Source, opt Options) ([]byte, Result, error) {
	start := time.Now()
	switch {
	case len(srcs) == 0:
		return nil, Result{}, errors.New("no TFRecord files to index")
	case opt.View == view.Merge:
		return nil, Result{}, errors.New("TFRecord records have no names of their own to merge by: use the tree or imagefolder view")
	}
	if opt.Jobs <= 0 {
		opt.Jobs = 4
	}
	if opt.Warn == nil {
		opt.Warn = func(string) {}
	}
	var res Result
	scans := make([]scanned, len(srcs))
	var total, read int64
	for _, s := range srcs {
		total += s.Size
	}
	done := 0
	err := view.Each(ctx, len(srcs), opt.Jobs, func(ctx context.Context, i int) (err error) {
		scans[i], err = readOne(ctx, srcs[i], !opt.NoChecksums)
		return err
	}, func(i int) {
		done++
		read += srcs[i].Size
		if opt.Progress != nil {
			opt.Progress(Progress{Files: done, TotalFiles: len(srcs), Bytes: read, TotalBytes: total})
		}
	})
	if err != nil {
		return nil, Result{}, err
	}
	vsrcs := make([]view.Source, len(srcs))
	shards := make([]layout.Shard, len(srcs))
	for i, s := range srcs {
		vsrcs[i] = view.Source{Label: s.Label, Dir: view.DirName(s.Name, ".tfrecord"), MTime: s.MTime}
		shards[i] = layout.Shard{Name: s.Name, Kind: layout.ShardTar, Size: uint64(s.Size), Version: s.Version, Checksum: layout.CRC32C}
		res.FileBytes += s.Size
	}
	b := view.New(vsrcs, view.Options{Kind: opt.View, ClassNames: opt.ClassNames, Warn: opt.Warn})
	missing := func(label string, rec int64, what string) {
		if len(res.FirstMissing) < maxNamed {
			named := fmt.Sprintf("%s: record %d: %s", label, rec, what)
			res.FirstMissing = append(res.FirstMissing, named)
			opt.Warn(named + "; never served")
		}
	}
	var recs []view.Record
	for i, sc := range scans {
		s := srcs[i]
		recs = recs[:0]
		res.Records += sc.summary.Records
		for _, r := range sc.recs {
			if !r.HasImage {
				res.NoImage++
				missing(s.Label, r.Index, "no image")
				continue
			}
			v := view.Record{Mode: 0o444, MTime: s.MTime, Offset: uint64(r.ImageOff), Size: uint64(r.ImageSize), CRC: r.ImageCRC}
			ext := view.ImageExt(r.ImageHead[:])
			if opt.View != view.ImageFolder {
				v.Path = view.RowName(r.Index, sc.summary.Records, ext)
				recs = append(recs, v)
				continue
			}
			switch {
			case r.Synset != "" && opt.ClassNames == nil:
				v.Label = r.Synset
			case r.HasLabel:
				v.Label = strconv.FormatInt(r.Label, 10)
			default:
				res.NoLabel++
				missing(s.Label, r.Index, "no label")
				continue
			}
			v.Path = vsrcs[i].Dir + "-" + view.RowName(r.Index, sc.summary.Records, ext)
			if r.Filename != "" {
				if base := path.Base(r.Filename); layout.ValidName([]byte(base)) && base != "." && base != ".." && base != "/" {
					v.Path = base
				}
			}
			recs = append(recs, v)
		}
		if err := b.Add(i, recs); err != nil {
			return nil, Result{}, err
		}
	}
	nodes, vres, err := b.Nodes()
	if err != nil {
		return nil, Result{}, err
	}
	res.Files = len(srcs)
	res.Samples, res.Dirs, res.Bytes, res.Replaced, res.Classes = vres.Files, vres.Dirs, vres.Bytes, vres.Replaced, vres.Classes
	res.NoLabel += int64(vres.NoClass)
	index := layout.EncodeIndex(nodes, shards, opt.NoChecksums)
	res.Duration = time.Since(start)
	return index, res, nil
}

// readOne reads the records of one file.
func readOne(ctx context.Context, s Source, checksums bool) (scanned, error) {
	f, err := s.Open(ctx)
	if err != nil {
		return scanned{}, fmt.Errorf("open %s: %w", s.Label, err)
	}
	defer f.Close()
	sc := tfrecord.NewScanner(f, s.Label, tfrecord.Options{Checksums: checksums})
	var out scanned
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
		out.recs = append(out.recs, r)
	}
	if sc.Offset() != s.Size {
		return scanned{}, fmt.Errorf("%s changed while it was indexed (%d bytes when listed, %d read)", s.Label, s.Size, sc.Offset())
	}
	out.summary = sc.Summary()
	return out, nil
}
