package tarindex

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/layout/tar"
)

// Source is one tar file to index in place: IndexTars reads it once, from its first byte.
type Source struct {
	// Name is what the index records as the shard's name: the tar's path relative to the
	// index's directory (or object prefix), or absolute (ShardPath).
	Name string
	// Label names the tar in messages: its path or URL.
	Label string
	// Size is the tar's size in bytes, as listed; a tar that reads otherwise fails the index.
	Size int64
	// MTime (nanoseconds) is given to the directories the tar implies without a member of their own.
	MTime int64
	// Version is recorded in the index and checked when the set is opened: a local tar's mtime in
	// nanoseconds in decimal, an object's ETag (Shard.Version).
	Version string
	// Open returns the tar's bytes from the first. If the reader is an io.Seeker, indexing
	// without checksums seeks over large members' data instead of reading it.
	Open func(ctx context.Context) (io.ReadCloser, error)
}

// View says how the members of the tars become the tree of the index.
type View int

const (
	// ViewTree puts each tar's members under a directory named after the tar, less ".tar".
	ViewTree View = iota
	// ViewMerge puts the members of every tar into one tree.
	ViewMerge
	// ViewImageFolder makes each WebDataset sample a file CLASS/KEY.EXT (tarview.go).
	ViewImageFolder
)

// Options configure IndexTars. The zero value indexes with the defaults given on each field.
type Options struct {
	// View is the tree the index presents. Default ViewTree.
	View View
	// NoChecksums reads only the tars' headers (and labels), skipping the CRC32C of each member
	// and tar; the index is flagged so (Index.Checksums). Default false: every byte is read.
	NoChecksums bool
	// Jobs is the number of tars read in parallel. Default 4.
	Jobs int
	// Labels configures ViewImageFolder (tarview.go).
	Labels LabelOptions
	// Warn receives one line for each member skipped (symlinks, devices, FIFOs, sparse files, hard
	// links to nothing before them) and for the first few samples the image-folder view leaves
	// out. Default: discard. Calls are serialised.
	Warn func(msg string)
	// Progress, if set, is called (serialised, from the reading goroutines) as tars are read.
	Progress func(Progress)
}

// Progress is a snapshot of a running IndexTars.
type Progress struct {
	Tars, TotalTars   int
	Bytes, TotalBytes int64 // of the tars
}

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
	// ViewImageFolder: samples in the tree and classes, and samples left out (tarview.go).
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
// Members are taken as tar writes them (ustar, GNU, PAX, v7: tar.go). Names are cleaned: leading
// "/" and "." components dropped; a name with a ".." component, or one whose component cannot be
// stored, fails the index naming the tar and member. Regular files become files; a hard link
// shares its target's extent (an earlier file of the same tar); directories are kept and
// implied; symlinks, devices, FIFOs and sparse members are skipped with a warning. When two
// members (in the same or different tars) take the same path, the last in tar order, then in
// the order of srcs, wins, as tar -x would leave it, and the others are counted in Replaced; a
// file and a directory at the same path fail the index. A truncated, corrupt or compressed tar,
// or one whose size differs from Size, fails it too (ErrCompressedTar for the compressed).
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
	for _, s := range srcs {
		ix.total += s.Size
	}
	var newest int64
	for _, s := range ix.srcs {
		newest = max(newest, s.MTime)
	}
	b := newTreeBuilder(newest, srcs)
	shards := make([]layout.Shard, len(srcs))
	var view viewBuilder = &treeView{ix: ix, tops: map[string]int{}}
	if opt.View == ViewImageFolder {
		view = newImageFolder(ix, b)
	}
	// The tree grows as tars are read, in their order, while later ones are read.
	err := ix.scanAll(ctx, func(i int, sc *tarScan) error {
		s := srcs[i]
		shards[i] = layout.Shard{Name: s.Name, Kind: layout.ShardTar, Size: uint64(s.Size), CRC: sc.crc, Version: s.Version}
		b.res.Members += sc.members
		b.res.Skipped += sc.skipped
		return view.add(b, i, sc)
	})
	if err == nil {
		err = view.finish(b)
	}
	if err == nil {
		err = b.settle()
	}
	if err != nil {
		return nil, Result{}, err
	}
	nodes := layout.Number(b.root)
	res := b.res
	res.Tars, res.TarBytes = len(srcs), ix.total
	for _, n := range nodes[1:] {
		if n.IsDir() {
			res.Dirs++
		} else {
			res.Files++
			res.Bytes += int64(n.Size)
			if n.Link {
				res.Links++
			}
		}
	}
	index := layout.EncodeIndex(nodes, shards, opt.NoChecksums)
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

// treeMember is a member of a scanned tar that the tree may hold: a file or a directory, its
// name cleaned.
type treeMember struct {
	path      string
	at, end   int // where path lies in the scan's names, before the scan sets path
	dir       bool
	link      bool // a hard link: the extent and checksum are its target's
	mode      uint32
	mtime     int64
	off, size uint64
	crc       uint32
	data      []byte // a label member's bytes (ViewImageFolder)
}

// tarScan is what reading one tar gave.
type tarScan struct {
	entries []treeMember
	crc     uint32 // of the whole tar, with checksums
	members int
	skipped int
}

// scanAll reads every tar, opt.Jobs at a time, and calls use with each one's scan in the order
// of srcs, on the caller's goroutine, as soon as it and those before it are read (while later
// ones are read, at most 2*opt.Jobs tars ahead of use). The first error, in that order, or one
// from use, stops it. use must not keep sc.entries: scanAll hands the slice to a later scan.
func (ix *indexer) scanAll(ctx context.Context, use func(i int, sc *tarScan) error) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	type result struct {
		sc  *tarScan
		err error
	}
	done := make([]chan result, len(ix.srcs))
	for i := range done {
		done[i] = make(chan result, 1) // a reader never waits to hand over a scan
	}
	// A tar is handed to a reader with an entries slice that use is done with, taken in the
	// order of srcs: so the scans held are bounded, and the scan use waits for always has one.
	// (A slice for each tar was 100 KB of garbage a tar of 1,280 members.)
	type job struct {
		i       int
		entries []treeMember
	}
	free := make(chan []treeMember, 2*ix.opt.Jobs)
	for range cap(free) {
		free <- nil
	}
	next := make(chan job)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(next)
		for i := range ix.srcs {
			var j job
			select {
			case j.entries = <-free:
			case <-ctx.Done():
				return
			}
			j.i = i
			select {
			case next <- j:
			case <-ctx.Done():
				return
			}
		}
	}()
	for range min(ix.opt.Jobs, len(ix.srcs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := &scratch{tr: tar.NewReader(nil), buf: make([]byte, 256<<10)}
			for j := range next {
				sc, err := ix.scan(ctx, j.i, s, j.entries)
				done[j.i] <- result{sc, err}
			}
		}()
	}
	for i := range ix.srcs {
		var r result
		select {
		case r = <-done[i]:
		case <-ctx.Done():
			return ctx.Err()
		}
		if r.err != nil {
			return r.err
		}
		entries := r.sc.entries
		if err := use(i, r.sc); err != nil {
			return err
		}
		clear(entries)
		free <- entries[:0] // never blocks: it holds every slice not held by a scan
	}
	return nil
}

// crcCounter passes reads through, summing their bytes and their CRC32C.
type crcCounter struct {
	r   io.Reader
	sum layout.Sum
}

func (c *crcCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.sum.Add(p[:n])
	return n, err
}

// scratch is what a goroutine of scanAll reuses from tar to tar.
type scratch struct {
	tr    *tar.Reader
	buf   []byte // for the bytes after the end-of-archive blocks
	names []byte // a tar's paths end to end, made one string at its end
}

// scan reads tar i with s.tr, keeping what the tree may hold in entries (empty, maybe nil: its
// capacity is used). The entries' paths are substrings of one string: a string a member, and a
// member's Node from another allocation, cost a tenth of IndexTars's CPU with the collector's
// share.
func (ix *indexer) scan(ctx context.Context, i int, s *scratch, entries []treeMember) (*tarScan, error) {
	src := ix.srcs[i]
	rc, err := src.Open(ctx)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", src.Label, err)
	}
	defer rc.Close()
	var r io.Reader = rc
	var sum *crcCounter
	if !ix.opt.NoChecksums {
		sum = &crcCounter{r: rc}
		r = sum
	}
	tr, names := s.tr, s.names[:0]
	tr.Reset(r)
	sc := &tarScan{entries: entries}
	var files map[string]int // path → the entry of the regular file there, made at the first hard link
	var reported int64
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		m, name, err := tr.NextName()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src.Label, err)
		}
		sc.members++
		at := len(names)
		if names, err = appendCleanPath(names, name); err != nil {
			return nil, fmt.Errorf("%s: member %q (at byte %d): %w", src.Label, name, m.Header, err)
		}
		p := names[at:] // the path, as bytes until the end of the tar
		e := treeMember{at: at, end: len(names), mode: m.Mode, mtime: m.MTime, off: uint64(m.Offset), size: uint64(m.Size)}
		switch m.Type {
		case tar.TypeDir: // "./" (p empty) describes the top: the tar's directory, or the root
			e.dir = true
			sc.entries = append(sc.entries, e)
		case tar.TypeFile:
			if len(p) == 0 {
				return nil, fmt.Errorf("%s: member %q (at byte %d): a file with no name", src.Label, name, m.Header)
			}
			if e.crc, e.data, err = ix.readMember(tr, m, p); err != nil {
				return nil, fmt.Errorf("%s: member %q: %w", src.Label, name, err)
			}
			if files != nil {
				files[string(p)] = len(sc.entries)
			}
			sc.entries = append(sc.entries, e)
		case tar.TypeHardLink:
			if files == nil {
				files = map[string]int{}
				for j, f := range sc.entries {
					if !f.dir {
						files[string(names[f.at:f.end])] = j
					}
				}
			}
			target, err := cleanMemberPath(m.Linkname)
			j, ok := files[target]
			if err != nil || !ok || len(p) == 0 {
				ix.opt.Warn(fmt.Sprintf("%s: skipped hard link %q: its target %q is not a file before it in the tar", src.Label, name, m.Linkname))
				sc.skipped++
				names = names[:at]
				break
			}
			t := sc.entries[j]
			t.at, t.end, t.link = e.at, e.end, true
			files[string(p)] = len(sc.entries)
			sc.entries = append(sc.entries, t)
		default:
			ix.opt.Warn(fmt.Sprintf("%s: skipped %s %q", src.Label, typeName(m.Type, m.Linkname), name))
			sc.skipped++
			names = names[:at]
		}
		if n := tr.Offset(); n-reported >= 8<<20 {
			ix.progress(0, n-reported)
			reported = n
		}
	}
	if sum != nil {
		// The bytes after the end-of-archive blocks count in the tar's checksum and size.
		if _, err := io.CopyBuffer(io.Discard, sum, s.buf); err != nil {
			return nil, fmt.Errorf("read %s: %w", src.Label, err)
		}
		if sum.sum.Size != uint64(src.Size) {
			return nil, fmt.Errorf("%s changed while it was indexed (%d bytes when listed, %d read)", src.Label, src.Size, sum.sum.Size)
		}
		sc.crc = sum.sum.CRC
	} else if end := tr.Offset(); end > src.Size {
		return nil, fmt.Errorf("%s changed while it was indexed (%d bytes when listed, members up to byte %d)", src.Label, src.Size, end)
	}
	all := string(names)
	for k := range sc.entries {
		e := &sc.entries[k]
		e.path = all[e.at:e.end]
	}
	s.names = names
	ix.progress(1, src.Size-reported)
	return sc, nil
}

// readMember reads the data of file member m (path p) if it is wanted: all of it for its
// checksum, and the bytes of a label member for the image-folder view.
func (ix *indexer) readMember(tr *tar.Reader, m tar.Member, p []byte) (uint32, []byte, error) {
	var data []byte
	keep := ix.opt.View == ViewImageFolder && ix.opt.Labels.isLabel(string(p)) && m.Size <= maxLabelBytes
	if keep {
		data = make([]byte, 0, m.Size)
	} else if ix.opt.NoChecksums {
		return 0, nil, nil
	}
	var crc uint32
	for {
		b, err := tr.ReadBuffered()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, nil, err
		}
		crc = layout.UpdateChecksum(crc, b)
		if keep {
			data = append(data, b...)
		}
	}
	if ix.opt.NoChecksums {
		crc = 0
	}
	return crc, data, nil
}

// progress adds tars and bytes read, and reports them.
func (ix *indexer) progress(tars int, bytes int64) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.doneTars += tars
	ix.doneBytes += bytes
	if ix.opt.Progress != nil {
		ix.opt.Progress(Progress{Tars: ix.doneTars, TotalTars: len(ix.srcs), Bytes: ix.doneBytes, TotalBytes: ix.total})
	}
}

func typeName(t tar.Type, link string) string {
	switch t {
	case tar.TypeSymlink:
		return fmt.Sprintf("symlink (to %q)", link)
	case tar.TypeSparse:
		return "sparse file"
	default:
		return "device, FIFO or special member"
	}
}

// cleanMemberPath returns a member's name as a path in the tree (appendCleanPath).
func cleanMemberPath(name string) (string, error) {
	p, err := appendCleanPath(nil, name)
	return string(p), err
}

// appendCleanPath appends a member's name as a path in the tree to dst: leading "/", empty and
// "." components dropped (nothing is appended for the top). A ".." component would leave the
// tree, and a component longer than 255 bytes or holding a NUL (a PAX path may) cannot be
// stored: both are errors.
func appendCleanPath[S string | []byte](dst []byte, name S) ([]byte, error) {
	start := len(dst)
	for i := 0; i <= len(name); {
		j := i
		for j < len(name) && name[j] != '/' {
			j++
		}
		part := name[i:j]
		i = j + 1
		switch {
		case len(part) == 0 || string(part) == ".":
			continue
		case string(part) == "..":
			return dst[:start], errors.New(`the name has a ".." component, which would lead out of the tree`)
		case !layout.ValidName([]byte(part)):
			return dst[:start], fmt.Errorf("the name component %.40q cannot be stored: longer than %d bytes, or holding a NUL", part, layout.MaxNameLen)
		}
		if len(dst) > start {
			dst = append(dst, '/')
		}
		dst = append(dst, part...)
	}
	return dst, nil
}

// treeBuilder builds the tree of nodes from scanned tars, with the rule for a path taken twice.
// Files are appended to their directory as they come, without a lookup; settle then finds the
// paths taken twice. (A map of every directory's children by name cost 16% of IndexTars's CPU
// at 1.28 M members, with its garbage.)
type treeBuilder struct {
	root  *layout.Node
	dirs  map[*layout.Node]map[string]*layout.Node // each directory's subdirectories by name
	mtime int64                                    // of directories implied
	srcs  []Source                                 // to name a file's tar in an error
	res   Result
	slab  []layout.Node // the files' nodes are allocated from here, slabSize at a time
}

// slabSize is how many files' nodes treeBuilder allocates at once (352 KiB). Allocating them one
// by one was a malloc per member, 5% of IndexTars's CPU with the collector's share.
const slabSize = 4096

func newTreeBuilder(mtime int64, srcs []Source) *treeBuilder {
	return &treeBuilder{root: &layout.Node{Mode: layout.ModeDir | 0o755, MTime: mtime}, dirs: map[*layout.Node]map[string]*layout.Node{}, mtime: mtime, srcs: srcs}
}

// dir returns the directory at path p under d, creating it and its parents as needed.
func (b *treeBuilder) dir(d *layout.Node, p string) *layout.Node {
	for part := range strings.SplitSeq(p, "/") {
		if part == "" {
			continue
		}
		c := b.dirs[d][part]
		if c == nil {
			c = &layout.Node{Name: part, Mode: layout.ModeDir | 0o755, MTime: b.mtime}
			if b.dirs[d] == nil {
				b.dirs[d] = map[string]*layout.Node{}
			}
			b.dirs[d][part] = c
			d.Children = append(d.Children, c)
		}
		d = c
	}
	return d
}

// put places e, a member of tar shard, at its path under d: a directory takes e's mode and
// mtime; a file is added beside any other at its path (settle keeps the last).
func (b *treeBuilder) put(d *layout.Node, e treeMember, shard uint32) {
	parent, base := "", e.path
	if i := strings.LastIndexByte(e.path, '/'); i >= 0 {
		parent, base = e.path[:i], e.path[i+1:]
	}
	pd := b.dir(d, parent)
	if e.dir {
		n := b.dir(pd, base)
		n.Mode, n.MTime = layout.ModeDir|e.mode, e.mtime
		return
	}
	if len(b.slab) == cap(b.slab) {
		b.slab = make([]layout.Node, 0, slabSize)
	}
	b.slab = append(b.slab, layout.Node{Name: base, Mode: layout.ModeRegular | e.mode, MTime: e.mtime,
		Shard: shard, Size: e.size, Offset: e.off, CRC: e.crc, Link: e.link})
	pd.Children = append(pd.Children, &b.slab[len(b.slab)-1])
}

// settle sorts every directory's children by name and applies the rule for a path taken twice:
// of files at one path the last put wins (the others are counted in res.Replaced); a file and
// a directory at one path fail the index.
func (b *treeBuilder) settle() error {
	var walk func(d *layout.Node, path string) error
	walk = func(d *layout.Node, path string) error {
		byName := func(x, y *layout.Node) int { return strings.Compare(x.Name, y.Name) }
		if !slices.IsSortedFunc(d.Children, byName) {
			slices.SortStableFunc(d.Children, byName) // stable: the order put them in
		}
		kept := d.Children[:0]
		for run := d.Children; len(run) > 0; {
			k := 1
			for k < len(run) && run[k].Name == run[0].Name {
				k++
			}
			if err := b.conflict(run[:k], path); err != nil {
				return err
			}
			kept = append(kept, run[k-1])
			b.res.Replaced += k - 1
			run = run[k:]
		}
		clear(d.Children[len(kept):])
		d.Children = kept
		for _, c := range kept {
			if c.IsDir() {
				if err := walk(c, path+c.Name+"/"); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(b.root, "")
}

// conflict returns the error for run, nodes of one name in the directory at path in the order
// they were put, if it holds a directory (at most one: dir finds it) and a file.
func (b *treeBuilder) conflict(run []*layout.Node, path string) error {
	if len(run) == 1 {
		return nil
	}
	for _, n := range run {
		if n.IsDir() {
			f := run[0]
			if f == n {
				f = run[1]
				return fmt.Errorf("%s: %q is both a directory and a file", b.srcs[f.Shard].Label, path+n.Name)
			}
			return fmt.Errorf("%s: %q is both a file and a directory", b.srcs[f.Shard].Label, path+n.Name)
		}
	}
	return nil
}

// viewBuilder builds a view's tree from the tars' scans, given in the order of srcs.
type viewBuilder interface {
	add(b *treeBuilder, i int, sc *tarScan) error
	finish(b *treeBuilder) error
}

// treeView builds ViewTree and ViewMerge: each scan's members placed as they come.
type treeView struct {
	ix   *indexer
	tops map[string]int // ViewTree: the tar that has each top directory
}

func (v *treeView) add(b *treeBuilder, i int, sc *tarScan) error {
	top, src := b.root, v.ix.srcs[i]
	b.mtime = src.MTime
	if v.ix.opt.View == ViewTree {
		name := tarDirName(src.Name)
		if j, ok := v.tops[name]; ok {
			return fmt.Errorf("%s and %s would both be the directory %q; rename one, or use --merge", v.ix.srcs[j].Label, src.Label, name)
		}
		v.tops[name] = i
		top = b.dir(b.root, name)
	}
	for _, e := range sc.entries {
		b.put(top, e, uint32(i))
	}
	return nil
}

func (v *treeView) finish(*treeBuilder) error { return nil }

// tarDirName is the directory a tar's members go under in ViewTree: its base name less ".tar".
func tarDirName(name string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	if n := strings.TrimSuffix(name, ".tar"); n != "" {
		return n
	}
	return name
}
