// Package tarindex indexes tar files in place: IndexTars reads the tars (with layout/tar) and
// returns an index whose files point at the members' data inside them, the tars being the shards.
// Options.View chooses the tree (layout/view builds it): each tar's members under its name, all
// merged, or WebDataset samples as an ImageFolder (CLASS/KEY.EXT) with labels from their members
// (LabelOptions). It imports layout, layout/tar, layout/view and the standard library.
//
// IndexTars reads opt.Jobs tars at once and calls opt.Warn and opt.Progress one at a time, each
// holding a mutex of the call (warnMu, indexer.mu), from any of its goroutines.
package tarindex

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/layout/view"
)

// Source is one tar file to index in place: IndexTars reads it once, from its first byte. If
// Open's reader is an io.Seeker, indexing without checksums seeks over large members' data
// instead of reading it.
type Source = view.Input[io.ReadCloser]

// Options configure IndexTars. The zero value indexes with the defaults given on each field.
type Options struct {
	// View is the tree the index presents: view.Tree puts each tar's members under a directory
	// named after the tar, less ".tar"; view.Merge all in one tree; view.ImageFolder makes each
	// WebDataset sample a file CLASS/KEY.EXT (LabelOptions). Default view.Tree.
	View view.Kind
	// NoChecksums reads only the tars' headers (and labels), skipping the CRC32C of each member
	// and tar; the index is flagged so (Index.Checksums). Default false: every byte is read.
	NoChecksums bool
	// Jobs is the number of tars read in parallel. Default 4.
	Jobs int
	// Labels configures view.ImageFolder (labels.go).
	Labels LabelOptions
	// Warn receives one line for each member skipped (symlinks, devices, FIFOs, sparse files, hard
	// links to nothing before them) and for the first few samples the image-folder view leaves
	// out. Default: discard. Calls are serialised.
	Warn func(msg string)
	// Progress, if set, is called (serialised, from the reading goroutines) as tars are read.
	Progress func(Progress)
}

// Progress is a snapshot of a running IndexTars.
type Progress = view.Progress

// Result summarises a finished IndexTars.
type Result struct {
	Tars     int
	TarBytes int64
	Members  int // members read, of every type
	Files    int // regular files in the tree, hard links included
	Links    int // hard links among Files
	Dirs     int
	Bytes    int64 // the files' sizes
	Skipped  int   // members of a type the tree cannot hold (Warn named each)
	Replaced int   // files or samples whose path a later one took (the last one wins)
	// view.ImageFolder: samples in the tree and classes, and samples left out (labels.go).
	Samples, Classes, NoLabel, NoImage, NoKey int
	Duration                                  time.Duration
}

// maxLabelBytes bounds what is read of a member holding a label (.cls, .json).
const maxLabelBytes = 1 << 20

// IndexTars reads the tars in srcs (each once, several in parallel) and returns an index that
// presents their members as the tree opt.View asks for, each file's extent lying in its tar,
// with the tars as shards of kind ShardTar in the order of srcs. The same tars and options
// always give the same bytes.
//
// Members are taken as tar writes them (ustar, GNU, PAX, v7: layout/tar). Names are cleaned: leading
// "/" and "." components dropped; a name with a ".." component, or one whose component cannot be
// stored, fails the index naming the tar and member. Regular files become files; a hard link
// shares its target's extent (an earlier file of the same tar); directories are kept and
// implied; symlinks, devices, FIFOs and sparse members are skipped with a warning. When two
// members (in the same or different tars) take the same path, the last in tar order, then in
// the order of srcs, wins, as tar -x would leave it, and the others are counted in Replaced; a
// file and a directory at the same path fail the index. A truncated, corrupt or compressed tar,
// or one whose size differs from Size, fails it too (tar.ErrCompressed for the compressed).
func IndexTars(ctx context.Context, srcs []Source, opt Options) ([]byte, Result, error) {
	start := time.Now()
	if len(srcs) == 0 {
		return nil, Result{}, errors.New("no tars to index")
	}
	if opt.Jobs <= 0 {
		opt.Jobs = 4
	}
	var warnMu sync.Mutex
	warn := opt.Warn
	opt.Warn = func(msg string) {
		if warn != nil {
			warnMu.Lock()
			defer warnMu.Unlock()
			warn(msg)
		}
	}
	ix := &indexer{opt: opt, srcs: srcs}
	vsrcs := make([]view.Source, len(srcs))
	for i, s := range srcs {
		ix.total += s.Size
		vsrcs[i] = view.Source{Label: s.Label, Dir: view.DirName(s.Name, ".tar"), MTime: s.MTime}
	}
	b := view.New(vsrcs, view.Options{Kind: opt.View, ClassNames: opt.Labels.ClassNames, Warn: opt.Warn})
	shards := make([]layout.Shard, len(srcs))
	var res Result
	var recs []view.Record
	samples := newSamples(ix, &res)
	// The tree grows as tars are read, in their order, while later ones are read.
	err := ix.scanAll(ctx, func(i int, sc *tarScan) error {
		s := srcs[i]
		shards[i] = layout.Shard{Name: s.Name, Kind: layout.ShardTar, Size: uint64(s.Size), CRC: sc.crc, Version: s.Version}
		res.Members += sc.members
		res.Skipped += sc.skipped
		recs = recs[:0]
		if opt.View == view.ImageFolder {
			recs = samples.add(recs, i, sc)
		} else {
			for _, e := range sc.entries {
				recs = append(recs, e.Record)
			}
		}
		return b.Add(i, recs)
	})
	if err != nil {
		return nil, Result{}, err
	}
	index, vres, err := b.Index(shards, opt.NoChecksums)
	if err != nil {
		return nil, Result{}, err
	}
	res.Tars, res.TarBytes = len(srcs), ix.total
	res.Files, res.Links, res.Dirs, res.Bytes, res.Replaced = vres.Files, vres.Links, vres.Dirs, vres.Bytes, vres.Replaced
	res.Samples, res.Classes, res.NoLabel = vres.Samples, vres.Classes, res.NoLabel+vres.NoClass
	res.Duration = time.Since(start)
	return index, res, nil
}

// indexer reads the tars of one IndexTars call.
type indexer struct {
	opt   Options
	srcs  []Source
	total int64

	mu        sync.Mutex // guards the progress below and serialises opt.Progress
	doneTars  int
	doneBytes int64
}
