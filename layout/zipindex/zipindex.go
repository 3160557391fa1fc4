// Package zipindex indexes ZIP files in place: IndexZips reads each ZIP's central directory and
// its stored members' local headers (with layout/zip) and returns an index whose files point at
// the stored members' bytes inside the ZIPs, the ZIPs being the shards. No member's data is read:
// each file's checksum is the CRC-32 of the central directory (layout.CRC32IEEE), which aifs
// verify and -o verify=on check. Options.View chooses the tree (layout/view builds it): each
// ZIP's members under its name, all merged, or an ImageFolder whose classes are the members'
// top directories (CLASS/FILE) or come from a labels file. It imports layout, layout/zip,
// layout/view and the standard library.
//
// A member compressed (deflated, ...) or encrypted is never served: it is counted in
// Result.Refused and named (Warn, Result.FirstRefused). Symlinks, devices and FIFOs are skipped
// with a warning. When members take one path, the last one wins (in central directory order,
// then in the order of the sources) and the others are counted in Result.Replaced; a file and a
// directory at one path fail the index (layout/view).
//
// IndexZips reads opt.Jobs ZIPs at once and calls opt.Warn and opt.Progress one at a time.
package zipindex

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/layout/view"
	"github.com/aifs/aifs/layout/zip"
)

// Source is one ZIP file to index in place. If Open returns an *os.File, its size is checked
// against Size.
type Source = view.Input[File]

// File is an opened ZIP.
type File = view.File

// Options configure IndexZips. The zero value indexes with the defaults given on each field.
type Options struct {
	// View is the tree the index presents: view.Tree puts each ZIP's members under a directory
	// named after it less ".zip"; view.Merge all in one tree; view.ImageFolder makes each image
	// member CLASS/PATH. Default view.Tree.
	View view.Kind
	// NoChecksums leaves the central directory's CRC-32s out of the index, which is flagged so
	// (layout.Index.Checksums): verify=on and aifs verify then refuse it. Default false.
	NoChecksums bool
	// Jobs is the number of ZIPs read in parallel. Default 4.
	Jobs int
	// ImageExts are the extensions (after the last dot, lowercased) of the members view.ImageFolder
	// takes; others are counted in Result.NoImage. Default jpg, jpeg, png, webp.
	ImageExts []string
	// ByKey, if set, gives each member's class by its key (view.SplitKey of its path), for ZIPs
	// whose members are not CLASS/FILE; the member keeps its path under the class. Default: the
	// class is the member's top directory, named as it is (view.Options.NamedClasses), and the
	// path under it is the rest; a member at the top has no class.
	ByKey map[string]string
	// ClassNames names class directories by number, with ByKey (view.Options.ClassNames).
	ClassNames []string
	// Warn receives a line for each member skipped or refused (the first few of each kind) and
	// for the first few left out of the image-folder view. Default: discard.
	Warn func(msg string)
	// Progress, if set, is called (serialised) as ZIPs are read.
	Progress func(Progress)
}

// DefaultImageExts are Options.ImageExts by default.
var DefaultImageExts = []string{"jpg", "jpeg", "png", "webp"}

// Progress is a snapshot of a running IndexZips.
type Progress = view.Progress

// Result summarises a finished IndexZips.
type Result struct {
	Zips     int
	ZipBytes int64
	Members  int // entries of the central directories
	Files    int // regular files in the tree
	Dirs     int
	Bytes    int64 // the files' sizes
	Refused  int   // members compressed or encrypted: never served
	// FirstRefused names the first few refused members: "ZIP: NAME (METHOD)".
	FirstRefused []string
	Skipped      int // symlinks, devices, FIFOs
	Replaced     int // files whose path a later member took
	// view.ImageFolder: samples in the tree, classes, and members left out without a class or
	// without an image extension.
	Samples, Classes, NoLabel, NoImage int
	Duration                           time.Duration
}

// maxNamed is how many refused or skipped members of each kind are named.
const maxNamed = 10

// IndexZips reads the ZIPs in srcs and returns an index presenting their stored members as the
// tree opt.View asks for, with the ZIPs as shards (kind layout.ShardTar: a file indexed in place;
// checksum kind layout.CRC32IEEE) in the order of srcs. The same ZIPs and options always give the
// same bytes. A member name with a ".." component, or a component that cannot be stored, fails
// the index naming the ZIP and member, as does a ZIP that cannot be read or is not a ZIP
// (zip.ErrNotZip).
func IndexZips(ctx context.Context, srcs []Source, opt Options) ([]byte, Result, error) {
	start := time.Now()
	if len(srcs) == 0 {
		return nil, Result{}, errors.New("no ZIP files to index")
	}
	if opt.Jobs <= 0 {
		opt.Jobs = 4
	}
	if len(opt.ImageExts) == 0 {
		opt.ImageExts = DefaultImageExts
	}
	if opt.Warn == nil {
		opt.Warn = func(string) {}
	}
	var res Result
	vsrcs := make([]view.Source, len(srcs))
	shards := make([]layout.Shard, len(srcs))
	sizes := make([]int64, len(srcs))
	for i, s := range srcs {
		vsrcs[i] = view.Source{Label: s.Label, Dir: view.DirName(s.Name, ".zip"), MTime: s.MTime}
		shards[i] = layout.Shard{Name: s.Name, Kind: layout.ShardTar, Size: uint64(s.Size), Version: s.Version, Checksum: layout.CRC32IEEE}
		sizes[i] = s.Size
		res.ZipBytes += s.Size
	}
	b := view.New(vsrcs, view.Options{Kind: opt.View, ClassNames: opt.ClassNames, NamedClasses: opt.ByKey == nil, Warn: opt.Warn})
	// Each ZIP's members go into the tree in the order of srcs while later ZIPs are read.
	scans := make([][]zip.Member, len(srcs))
	var recs []view.Record
	err := view.EachInOrder(ctx, len(srcs), opt.Jobs, func(ctx context.Context, i int) (err error) {
		scans[i], err = readOne(ctx, srcs[i])
		return err
	}, func(i int) (err error) {
		recs, err = records(recs[:0], srcs[i].Label, scans[i], opt, &res)
		scans[i] = nil
		if err == nil {
			err = b.Add(i, recs)
		}
		return err
	}, view.Progressor(sizes, opt.Progress))
	if err != nil {
		return nil, Result{}, err
	}
	index, vres, err := b.Index(shards, opt.NoChecksums)
	if err != nil {
		return nil, Result{}, err
	}
	res.Zips = len(srcs)
	res.Files, res.Dirs, res.Bytes, res.Replaced = vres.Files, vres.Dirs, vres.Bytes, vres.Replaced
	res.Samples, res.Classes, res.NoLabel = vres.Samples, vres.Classes, vres.NoClass
	res.Duration = time.Since(start)
	return index, res, nil
}

// records appends the records of a ZIP's members to recs for the view, counting and naming
// those refused or skipped in res.
func records(recs []view.Record, label string, members []zip.Member, opt Options, res *Result) ([]view.Record, error) {
	res.Members += len(members)
	for _, m := range members {
		p, err := view.CleanPath(m.Name)
		if err != nil {
			return nil, fmt.Errorf("%s: member %q: %w", label, m.Name, err)
		}
		switch {
		case m.Type == zip.TypeDir:
			if opt.View != view.ImageFolder {
				recs = append(recs, view.Record{Path: p, Dir: true, Mode: m.Mode, MTime: m.MTime})
			}
			continue
		case m.Type != zip.TypeFile:
			if res.Skipped++; res.Skipped <= maxNamed {
				opt.Warn(fmt.Sprintf("%s: skipped %q: a symlink, device or FIFO", label, m.Name))
			}
			continue
		case !m.Stored():
			res.Refused++
			if len(res.FirstRefused) < maxNamed {
				named := fmt.Sprintf("%s: %s (%s)", label, m.Name, m.MethodName())
				res.FirstRefused = append(res.FirstRefused, named)
				opt.Warn("refused (not stored as it is, so it cannot be served in place): " + named)
			}
			continue
		case p == "":
			return nil, fmt.Errorf("%s: member %q: a file with no name", label, m.Name)
		}
		r := view.Record{Path: p, Mode: m.Mode, MTime: m.MTime, Offset: uint64(m.Offset), Size: uint64(m.Size), CRC: m.CRC}
		if opt.NoChecksums {
			r.CRC = 0
		}
		if opt.View == view.ImageFolder && !imageFolderRecord(&r, opt, res, label) {
			continue
		}
		recs = append(recs, r)
	}
	return recs, nil
}

// imageFolderRecord labels r for view.ImageFolder, or reports false for a member that is not an
// image (counted, the first few warned of).
func imageFolderRecord(r *view.Record, opt Options, res *Result, label string) bool {
	ext := r.Path[strings.LastIndexByte(r.Path, '/')+1:]
	if i := strings.LastIndexByte(ext, '.'); i >= 0 {
		ext = strings.ToLower(ext[i+1:])
	} else {
		ext = ""
	}
	isImage := false
	for _, e := range opt.ImageExts {
		isImage = isImage || e == ext
	}
	if !isImage {
		if res.NoImage++; res.NoImage <= 5 {
			opt.Warn(fmt.Sprintf("%s: member %q is not an image (%s); left out of the image-folder view", label, r.Path, strings.Join(opt.ImageExts, ", ")))
		}
		return false
	}
	if opt.ByKey != nil {
		if key, _, ok := view.SplitKey(r.Path); ok {
			r.Label = opt.ByKey[key]
		}
		return true
	}
	if class, rest, ok := strings.Cut(r.Path, "/"); ok {
		r.Label, r.Path = class, rest
	}
	return true
}

// readOne reads the members of one ZIP.
func readOne(ctx context.Context, s Source) ([]zip.Member, error) {
	f, err := s.Open(ctx)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", s.Label, err)
	}
	defer f.Close()
	if osf, ok := f.(*os.File); ok {
		if fi, err := osf.Stat(); err == nil && fi.Size() != s.Size {
			return nil, fmt.Errorf("%s changed while it was indexed (%d bytes when listed, %d now)", s.Label, s.Size, fi.Size())
		}
	}
	members, err := zip.Members(f, s.Size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Label, err)
	}
	return members, nil
}
