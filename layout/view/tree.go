package view

import (
	"fmt"
	"slices"
	"strings"

	"github.com/aifs/aifs/layout"
)

// treeBuilder builds the tree of nodes from the sources' records, with the rule for a path taken
// twice.
// Files are appended to their directory as they come, without a lookup; settle then finds the
// paths taken twice, with no map of every directory's children (docs/bench/layout-notes.md#indextars-allocations).
type treeBuilder struct {
	root  *layout.Node
	dirs  map[*layout.Node]map[string]*layout.Node // each directory's subdirectories by name
	mtime int64                                    // of directories implied
	srcs  []Source                                 // to name a file's source in an error
	res   Result
	slab  []layout.Node // the files' nodes are allocated from here, slabSize at a time
	// settled holds the directories settled: their children sorted, the rule for a path taken
	// twice applied. Nothing is put in them after.
	settled map[*layout.Node]bool
}

// dirMode is the mode of a directory the index makes: the root, and one a record's path implies.
const dirMode = layout.ModeDir | 0o755

// slabSize is how many files' nodes treeBuilder allocates at once (352 KiB), not a malloc per
// record (docs/bench/layout-notes.md#indextars-allocations).
const slabSize = 4096

func newTreeBuilder(mtime int64, srcs []Source) *treeBuilder {
	return &treeBuilder{root: &layout.Node{Mode: dirMode, MTime: mtime}, dirs: map[*layout.Node]map[string]*layout.Node{}, mtime: mtime, srcs: srcs,
		settled: map[*layout.Node]bool{}}
}

// dir returns the directory at path p under d, creating it and its parents as needed.
func (b *treeBuilder) dir(d *layout.Node, p string) *layout.Node {
	for part := range strings.SplitSeq(p, "/") {
		if part == "" {
			continue
		}
		c := b.dirs[d][part]
		if c == nil {
			c = &layout.Node{Name: part, Mode: dirMode, MTime: b.mtime}
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

// put places r, a record of source shard, at its path under d: a directory takes r's mode and
// mtime; a file is added beside any other at its path (settle keeps the last).
func (b *treeBuilder) put(d *layout.Node, r Record, shard uint32) {
	parent, base := "", r.Path
	if i := strings.LastIndexByte(r.Path, '/'); i >= 0 {
		parent, base = r.Path[:i], r.Path[i+1:]
	}
	pd := b.dir(d, parent)
	if r.Dir {
		n := b.dir(pd, base)
		n.Mode, n.MTime = layout.ModeDir|r.Mode, r.MTime
		return
	}
	if len(b.slab) == cap(b.slab) {
		b.slab = make([]layout.Node, 0, slabSize)
	}
	b.slab = append(b.slab, layout.Node{Name: base, Mode: layout.ModeRegular | r.Mode, MTime: r.MTime,
		Shard: shard, Size: r.Size, Offset: r.Offset, CRC: r.CRC, Link: r.Link})
	pd.Children = append(pd.Children, &b.slab[len(b.slab)-1])
}

// settle sorts every directory's children by name and applies the rule for a path taken twice:
// of files at one path the last put wins (the others are counted in res.Replaced); a file and
// a directory at one path fail the index. Directories settled already (settleDir) are skipped.
func (b *treeBuilder) settle() error {
	return b.settleDir(b.root, "")
}

// settleDir settles the directory d at path (with a trailing "/", or "" for the root) and
// those under it, and marks them settled: the Tree view settles each source's directory as it
// is added, while later sources are read, not all at the end
// (docs/bench/formats-notes.md#the-tail).
func (b *treeBuilder) settleDir(d *layout.Node, path string) error {
	var walk func(d *layout.Node, path string) error
	walk = func(d *layout.Node, path string) error {
		if b.settled[d] {
			return nil
		}
		b.settled[d] = true
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
	return walk(d, path)
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
