package layout

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// TreeWriter encodes the index of a tree a subtree of the root at a time, each as soon as it is
// complete, where EncodeIndex takes the whole tree: layout/view's Tree view, whose root holds a
// directory per source file, encodes each file's directory while later files are read, so that
// what is left after the last read is its directory and Finish
// (docs/bench/formats-notes.md#the-tail). The bytes are those of EncodeIndex(Number(root), ...)
// for the same tree.
//
// The root's children are known first (NewTreeWriter): their entries are held until their
// subtrees come (IndexWriter.AddDirLater). The index is built in memory, its entry count known
// only at Finish. A TreeWriter holds no node once Add returns, so the caller may drop each
// subtree as it is encoded. It is not safe for concurrent use.
type TreeWriter struct {
	root  *Node
	out   *Buffer
	w     *IndexWriter
	next  int     // the root's child whose subtree comes next
	nodes []*Node // Add's, reused
	// The files so far have extents ascending in id order without overlapping (extentOrder),
	// the last ending at lastEnd in shard lastShard.
	inOrder, someFile bool
	lastShard         uint32
	lastEnd           uint64
}

// NewTreeWriter starts the index of the tree at root, whose children are directories in name
// order (no name twice), their subtrees to come in that order (Add). It numbers the root and
// its children.
func NewTreeWriter(root *Node) (*TreeWriter, error) {
	for i, c := range root.Children {
		if !c.IsDir() || i > 0 && strings.Compare(root.Children[i-1].Name, c.Name) >= 0 {
			return nil, fmt.Errorf("layout: the root's children are not directories in name order, each name once (%q)", c.Name)
		}
	}
	t := &TreeWriter{root: root, out: &Buffer{}, inOrder: true}
	t.w = newOpenIndexWriter(t.out, false)
	root.ID, root.Parent = 0, 0
	for i, c := range root.Children {
		c.ID, c.Parent = ID(1+i), 0
	}
	t.w.Add(nodeName(root), nodeEntry(root))
	for _, c := range root.Children {
		t.w.AddDirLater(nodeName(c), 0)
	}
	return t, nil
}

// Add encodes the subtree of d, the root's next child in name order, complete and with no name
// twice in a directory; it numbers d's subtree (Number's order) and returns its nodes in id
// order, in a slice valid until the next Add.
func (t *TreeWriter) Add(d *Node) ([]*Node, error) {
	if t.next >= len(t.root.Children) || t.root.Children[t.next] != d {
		return nil, fmt.Errorf("layout: the subtree of %q is not the next of the root's", d.Name)
	}
	t.reserve()
	t.next++
	t.nodes = numberUnder(d, ID(t.w.next), t.nodes[:0])
	t.w.SetDir(d.ID, nodeEntry(d))
	for _, n := range t.nodes {
		if !n.IsDir() {
			t.inOrder = t.inOrder && (!t.someFile || n.Shard > t.lastShard || n.Shard == t.lastShard && n.Offset >= t.lastEnd)
			t.someFile, t.lastShard, t.lastEnd = true, n.Shard, n.Offset+n.Size
		}
		t.w.Add(nodeName(n), nodeEntry(n))
	}
	return t.nodes, t.w.err
}

// reserve makes room in the Buffers for the index that the subtrees so far foretell, each of
// the root's children taken as large as their mean so far and a quarter more: room not written
// costs address space only, while a Buffer that grows copies itself to new memory, and touching
// new memory (a page fault each 4 KiB) was most of the encoding's time
// (docs/bench/formats-notes.md#the-tail).
func (t *TreeWriter) reserve() {
	if t.next == 0 {
		return
	}
	scale := func(n uint64) int { return int(n * uint64(len(t.root.Children)) / uint64(t.next)) }
	w := t.w
	table, names := scale(w.table.written), scale(w.nameOff)
	w.table.dst.(*Buffer).reserve(table)
	w.names.dst.(*Buffer).reserve(names)
	t.out.reserve(headerSize3 + scale(entrySize*w.next) + table + names)
}

// Finish writes the rest of the index, its shards being shards, flagged as having no
// checksums if noCRC, and returns it.
func (t *TreeWriter) Finish(shards []Shard, noCRC bool) ([]byte, error) {
	if t.next < len(t.root.Children) {
		return nil, fmt.Errorf("layout: the subtree of %q never came", t.root.Children[t.next].Name)
	}
	t.w.placeChildren()
	t.w.settleCount()
	var order []ID
	if !t.inOrder {
		order = entriesExtentOrder(t.out.Bytes()[headerSize3 : headerSize3+entrySize*t.w.n])
	}
	t.w.noCRC = noCRC
	if _, err := t.w.Finish(shards, order); err != nil {
		return nil, err
	}
	return t.out.Bytes(), nil
}

// entriesExtentOrder returns the extent order of the entries section entries, as extentOrder
// returns it for their nodes when they are not in extent order.
func entriesExtentOrder(entries []byte) []ID {
	type extent struct {
		shard        uint32
		offset, size uint64
		id           ID
	}
	var files []extent
	for id := 0; id < len(entries)/entrySize; id++ {
		b := entries[id*entrySize:]
		if le.Uint16(b[eMode:])&ModeType != ModeDir {
			files = append(files, extent{le.Uint32(b[eShard:]), le.Uint64(b[eA:]), u40(b[eB:]), ID(id)})
		}
	}
	slices.SortStableFunc(files, func(a, b extent) int {
		return cmp.Or(cmp.Compare(a.shard, b.shard), cmp.Compare(a.offset, b.offset), cmp.Compare(a.size, b.size))
	})
	order := make([]ID, len(files))
	for i, f := range files {
		order[i] = f.id
	}
	return order
}
