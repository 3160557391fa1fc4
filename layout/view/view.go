// Package view builds the tree an index in place presents (a Node per file, which
// layout.TreeWriter or layout.EncodeIndex encodes) from the records of the source files that a format's
// indexer read: a tar's members (layout/tarindex), a ZIP's (layout/zipindex), and so on. It holds
// what every such format shares: the views, the rule for a path taken twice, and how labels name
// class directories. It imports layout and the standard library.
//
// # Using it
//
// An indexer makes a Builder with New, giving every source file (Source: how messages name it,
// the directory it takes in the tree view, its mtime) and the Options (which view, class names,
// where warnings go). It then calls Add once per source, in the order of the sources (which is
// the order of the index's shard table: Record.Source is not given, the call says it), with that
// source's records in the order the source holds them (a later record of one path replaces an
// earlier one). Add copies what it keeps, so the caller may reuse the slice and the records'
// backing arrays (not the strings). Index then returns the index, with the sources as shards,
// and counts. The Tree view encodes each source's directory as soon as it and those whose
// directories sort before it are added (layout.TreeWriter), the other views the whole tree at
// Index (layout.EncodeIndex):
//
//	b := view.New(srcs, view.Options{Kind: view.ImageFolder, Warn: warn})
//	for i := range srcs {
//		if err := b.Add(i, recordsOf(i)); err != nil { ... }
//	}
//	index, res, err := b.Index(shards, noChecksums)
//
// A Record is one file or directory of a source: its path (cleaned: components that ValidName
// accepts, joined by "/", no "." or ".."), where its bytes lie in the source file (Offset, Size),
// their checksum (CRC, of the kind the source's shard records: layout.Shard.Checksum), mode
// bits, mtime, and for ImageFolder the label of its class.
//
// # Views
//
//   - Tree: each source's records under the directory Source.Dir (two sources with one Dir fail
//     the build, naming both); directories the paths imply take the source's MTime.
//   - Merge: every source's records in one tree.
//   - ImageFolder: each file record with a Label becomes CLASS/PATH, CLASS naming its label (see
//     Options.ClassNames); directory records are ignored, and a file without a label, or whose
//     label names no class, is left out, counted in Result.NoClass (the first few warned of).
//     Classes are named once all records are known: a numeric label's width depends on all
//     (unless Options.NamedClasses).
//
// In every view, when two files take one path, the one added last wins (records of a source in
// their order, sources in theirs), as extracting the sources in order would leave it, and the
// others are counted in Result.Replaced; a file and a directory at one path fail the build. The
// root and the directories implied (by every view but Tree) take the newest source's MTime.
//
// A Builder is not safe for concurrent use; it calls Options.Warn on the caller's goroutine.
package view

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aifs/aifs/layout"
)

// Kind says how the records of the sources become the tree.
type Kind int

const (
	// Tree puts each source's records under a directory of its own (Source.Dir).
	Tree Kind = iota
	// Merge puts the records of every source into one tree.
	Merge
	// ImageFolder makes each labelled file CLASS/PATH, for torchvision's ImageFolder.
	ImageFolder
)

// Source is one source file (a shard of the index) as the views see it.
type Source struct {
	// Label names the source in messages: its path or URL.
	Label string
	// Dir is the directory its records go under in the Tree view: its base name less its
	// format's extension, as DirName gives it.
	Dir string
	// MTime (nanoseconds) is given to the directories its records imply in the Tree view.
	MTime int64
}

// DirName returns the directory a source file named name takes in the Tree view: its base name
// less ext (".tar", ".zip"), or the base name if that would leave nothing.
func DirName(name, ext string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	if n := strings.TrimSuffix(name, ext); n != "" {
		return n
	}
	return name
}

// Record is one file or directory of a source.
type Record struct {
	Path   string // cleaned, relative; "" (a directory) is the source's top
	Label  string // ImageFolder: the class label of a file; "" for none
	Dir    bool   // a directory: only Mode and MTime count
	Link   bool   // a hard link (its extent is another file's), for Result.Links
	Mode   uint32 // permission bits
	MTime  int64  // nanoseconds since the Unix epoch
	Offset uint64 // a file's first byte in its source
	Size   uint64
	CRC    uint32 // a file's checksum (zero without checksums)
}

// Options configure a Builder. The zero value builds the Tree view.
type Options struct {
	// Kind is the view. Default Tree.
	Kind Kind
	// ClassNames, if set, names the directory of class number i ClassNames[i] (ImageFolder);
	// labels must then be numbers below len(ClassNames). Default: the label itself, numbers
	// zero-padded to one width so that sorted order (ImageFolder's class order) is numeric.
	ClassNames []string
	// NamedClasses says that the labels are class directories' names already (the CLASS of a
	// ZIP's CLASS/FILE members): each names its directory as it is, numbers not zero-padded, so
	// that the classes are those of the tree the files came from. Default false.
	NamedClasses bool
	// Warn receives a line for each of the first few files left out of ImageFolder.
	// Default: discard.
	Warn func(msg string)
}

// Result counts the tree Nodes returns.
type Result struct {
	Files    int // regular files in the tree, hard links included
	Links    int // hard links among Files
	Dirs     int
	Bytes    int64 // the files' sizes
	Replaced int   // files whose path a later one took
	// ImageFolder: files in the tree, classes, and files left out without a label or with one
	// that names no class.
	Samples, Classes, NoClass int
}

// Builder builds the tree of one index from its sources' records (package doc).
type Builder struct {
	opt     Options
	srcs    []Source
	t       *treeBuilder
	tops    map[string]int // Tree: the source that has each top directory
	samples []sample       // ImageFolder: kept until nodes names the classes
	warned  int
	// Tree, when every source's Dir is a valid name of its own: the index is encoded a source's
	// directory at a time, in name order, as soon as it and those before it are added, while
	// later sources are read (docs/bench/formats-notes.md#the-tail). byName holds the sources
	// in the order of their Dirs, encoded of them the count encoded, added which are.
	tw      *layout.TreeWriter
	byName  []int
	added   []bool
	encoded int
}

// sample is a labelled file of ImageFolder, kept until the classes are named.
type sample struct {
	Record
	source uint32
}

// New returns a Builder of the view opt.Kind over srcs.
func New(srcs []Source, opt Options) *Builder {
	if opt.Warn == nil {
		opt.Warn = func(string) {}
	}
	var newest int64
	for _, s := range srcs {
		newest = max(newest, s.MTime)
	}
	b := &Builder{opt: opt, srcs: srcs, t: newTreeBuilder(newest, srcs), tops: map[string]int{}}
	if opt.Kind == Tree {
		b.startEncoding()
	}
	return b
}

// startEncoding makes the top directories of the Tree view and starts encoding the index, if
// every source's Dir is a valid name of its own; otherwise (Add then fails on a Dir taken
// twice) the tree is encoded whole by Index.
func (b *Builder) startEncoding() {
	byName := make([]int, len(b.srcs))
	for i, s := range b.srcs {
		if !layout.ValidName([]byte(s.Dir)) {
			return
		}
		byName[i] = i
	}
	slices.SortFunc(byName, func(i, j int) int { return strings.Compare(b.srcs[i].Dir, b.srcs[j].Dir) })
	for k := 1; k < len(byName); k++ {
		if b.srcs[byName[k-1]].Dir == b.srcs[byName[k]].Dir {
			return
		}
	}
	for _, i := range byName {
		b.t.mtime = b.srcs[i].MTime // as Add would make it
		b.t.dir(b.t.root, b.srcs[i].Dir)
	}
	tw, err := layout.NewTreeWriter(b.t.root)
	if err != nil { // not for valid names, each once
		return
	}
	b.tw, b.byName, b.added = tw, byName, make([]bool, len(b.srcs))
}

// encodeReady encodes the directories of the sources added, in name order, up to the first
// not added yet, counting their nodes, and drops them.
func (b *Builder) encodeReady() error {
	for b.encoded < len(b.byName) && b.added[b.byName[b.encoded]] {
		top := b.t.root.Children[b.encoded]
		b.encoded++
		nodes, err := b.tw.Add(top)
		if err != nil {
			return err
		}
		res := b.res()
		res.Dirs++ // top
		for _, n := range nodes {
			count(res, n)
			if n.IsDir() {
				delete(b.t.dirs, n)
				delete(b.t.settled, n)
			}
		}
		delete(b.t.dirs, top)
		delete(b.t.settled, top)
		top.Children = nil
	}
	return nil
}

// count counts node n, not the root, in res.
func count(res *Result, n *layout.Node) {
	if n.IsDir() {
		res.Dirs++
		return
	}
	res.Files++
	res.Bytes += int64(n.Size)
	if n.Link {
		res.Links++
	}
}

// Add places the records of source i; sources are added in order, each once (package doc).
func (b *Builder) Add(i int, recs []Record) error {
	src := b.srcs[i]
	if b.opt.Kind == ImageFolder {
		for _, r := range recs {
			switch {
			case r.Dir:
			case r.Label == "":
				b.leaveOut(src.Label, r.Path, "no label")
			default:
				b.samples = append(b.samples, sample{r, uint32(i)})
			}
		}
		return nil
	}
	top := b.t.root
	b.t.mtime = src.MTime
	if b.opt.Kind == Tree {
		if j, ok := b.tops[src.Dir]; ok {
			return fmt.Errorf("%s and %s would both be the directory %q; rename one, or use --merge", b.srcs[j].Label, src.Label, src.Dir)
		}
		b.tops[src.Dir] = i
		top = b.t.dir(b.t.root, src.Dir)
	}
	for _, r := range recs {
		b.t.put(top, r, uint32(i))
	}
	if b.opt.Kind == Tree { // the source's directory is complete
		if err := b.t.settleDir(top, src.Dir+"/"); err != nil || b.tw == nil {
			return err
		}
		b.added[i] = true
		return b.encodeReady()
	}
	return nil
}

// leaveOut counts a file left out of ImageFolder and warns of the first few.
func (b *Builder) leaveOut(label, path, why string) {
	if b.res().NoClass++; b.res().NoClass <= 5 {
		b.opt.Warn(fmt.Sprintf("%s: sample %q has %s; left out of the image-folder view", label, path, why))
	}
}

func (b *Builder) res() *Result { return &b.t.res }

// Index finishes the tree and returns its index, shards being the sources' shards, flagged as
// having no checksums if noCRC, and its counts.
func (b *Builder) Index(shards []layout.Shard, noCRC bool) ([]byte, Result, error) {
	if b.tw != nil {
		index, err := b.tw.Finish(shards, noCRC)
		if err != nil {
			return nil, Result{}, err
		}
		return index, b.t.res, nil
	}
	nodes, res, err := b.nodes()
	if err != nil {
		return nil, Result{}, err
	}
	return layout.EncodeIndex(nodes, shards, noCRC), res, nil
}

// nodes finishes the tree and returns its nodes in id order (layout.Number) and its counts.
func (b *Builder) nodes() ([]*layout.Node, Result, error) {
	if b.opt.Kind == ImageFolder {
		if err := b.placeSamples(); err != nil {
			return nil, Result{}, err
		}
	}
	if err := b.t.settle(); err != nil {
		return nil, Result{}, err
	}
	nodes := layout.Number(b.t.root)
	res := b.t.res
	for _, n := range nodes[1:] {
		count(&res, n)
	}
	return nodes, res, nil
}

// placeSamples names the classes and places every sample that has one.
func (b *Builder) placeSamples() error {
	names, err := b.classNames()
	if err != nil {
		return err
	}
	classes := map[string]bool{}
	for _, s := range b.samples {
		class, ok := names[s.Label]
		if !ok {
			what := fmt.Sprintf("the label %q, which names no class", s.Label)
			if b.opt.ClassNames != nil {
				what += fmt.Sprintf(" (want a number below %d)", len(b.opt.ClassNames))
			}
			b.leaveOut(b.srcs[s.source].Label, s.Path, what)
			continue
		}
		r := s.Record
		r.Path = class + "/" + r.Path
		b.t.put(b.t.root, r, s.source)
		classes[class] = true
		b.res().Samples++
	}
	b.res().Classes = len(classes)
	b.samples = nil
	return nil
}

// classNames maps each sample's label to its class directory's name. Labels that cannot name
// one (a number outside ClassNames, a name that cannot be a directory) are left out.
func (b *Builder) classNames() (map[string]string, error) {
	names := map[string]string{}
	numeric, widest := true, 0
	for _, s := range b.samples {
		if _, err := strconv.ParseUint(s.Label, 10, 31); err != nil {
			numeric = false
		}
		widest = max(widest, len(strings.TrimLeft(s.Label, "0")))
	}
	cn := b.opt.ClassNames
	for _, s := range b.samples {
		if _, ok := names[s.Label]; ok {
			continue
		}
		n, err := strconv.ParseUint(s.Label, 10, 31)
		switch {
		case cn != nil && (err != nil || n >= uint64(len(cn))):
			continue
		case cn != nil:
			if !layout.ValidName([]byte(cn[n])) {
				return nil, fmt.Errorf("class name %q (class %d) cannot name a directory", cn[n], n)
			}
			names[s.Label] = cn[n]
		case b.opt.NamedClasses:
			names[s.Label] = s.Label // a path's component: ValidName
		case numeric:
			names[s.Label] = fmt.Sprintf("%0*d", max(widest, 1), n)
		case layout.ValidName([]byte(s.Label)):
			names[s.Label] = s.Label
		}
	}
	return names, nil
}
