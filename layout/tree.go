package layout

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unsafe"
)

// Node is one directory or file of a tree that an indexer in place builds in memory
// (layout/tarindex; doc.go): Number numbers the tree and EncodeIndex encodes it. layout/pack
// holds its tree flat instead and writes with IndexWriter.
//
// An indexer makes a Node per member: the fields are ordered so that a Node takes 88 bytes, not
// 128, and it points to nothing but its name and children (the parent is an id), which the
// collector scans. A Node is not safe for concurrent use.
type Node struct {
	Name     string  // one path component (ValidName); empty for the root
	Children []*Node // a directory's; Number sorts them by name
	MTime    int64   // nanoseconds since the Unix epoch
	Size     uint64  // a file's length
	Offset   uint64  // a file's first byte in its shard
	Mode     uint32  // Unix st_mode: ModeDir or ModeRegular plus permission bits
	ID       ID      // set by Number
	Parent   ID      // set by Number; the root's is 0
	Shard    uint32  // a file's shard, an index into the shard table
	CRC      uint32  // CRC32C of a file's bytes (zero without checksums)
	Link     bool    // a hard link (its extent is another file's), for the indexer's counts; EncodeIndex ignores it
}

// IsDir reports whether n is a directory.
func (n *Node) IsDir() bool { return n.Mode&ModeType == ModeDir }

// Number assigns ids in index order (FORMAT.md): root 0, then the children of each directory as
// one contiguous block, directories expanded depth first in name order. It returns the nodes in
// id order.
func Number(root *Node) []*Node {
	order := make([]*Node, 1, 1+descendants(root)) // sized first: growing allocates 5 times its size
	order[0] = root
	return numberUnder(root, 0, order)
}

// descendants counts the nodes under d.
func descendants(d *Node) int {
	count := len(d.Children)
	for _, c := range d.Children {
		if c.IsDir() {
			count += descendants(c)
		}
	}
	return count
}

// numberUnder numbers the nodes under d (numbered) in index order, as Number does, and appends
// them to order: the node appended at order[i] takes id base+i.
func numberUnder(d *Node, base ID, order []*Node) []*Node {
	var expand func(d *Node)
	expand = func(d *Node) {
		byName := func(x, y *Node) int { return strings.Compare(x.Name, y.Name) }
		if !slices.IsSortedFunc(d.Children, byName) { // a tar's are, mostly
			slices.SortFunc(d.Children, byName)
		}
		for _, c := range d.Children {
			c.ID, c.Parent = base+ID(len(order)), d.ID
			order = append(order, c)
		}
		for _, c := range d.Children {
			if c.IsDir() {
				expand(c)
			}
		}
	}
	expand(d)
	return order
}

// EncodeIndex returns the index file (version 3) for nodes (in id order, as Number returns
// them) and shards, with the extent order when id order is not it (tar sets), and flagged as
// having no checksums if noCRC.
func EncodeIndex(nodes []*Node, shards []Shard, noCRC bool) []byte {
	// The extent order is found on another core while the entries are encoded
	// (docs/bench/layout-notes.md#indextars-allocations).
	orderc := make(chan []ID, 1)
	go func() { orderc <- extentOrder(nodes) }()
	var names uint64
	dirs := 0
	for _, n := range nodes {
		names += uint64(len(n.Name))
		if n.IsDir() {
			dirs++
		}
	}
	out := NewBuffer(IndexSize(len(nodes), dirs, len(nodes)-dirs, names, shards))
	w := NewIndexWriter(out, len(nodes), noCRC)
	for _, n := range nodes {
		w.Add(nodeName(n), nodeEntry(n))
	}
	if _, err := w.Finish(shards, <-orderc); err != nil {
		panic(fmt.Sprintf("layout: encoding an index in memory: %v", err)) // the nodes are numbered by Number
	}
	return out.Bytes()
}

// nodeEntry returns the entry of node n, numbered.
func nodeEntry(n *Node) Entry {
	e := Entry{Parent: n.Parent, Mode: n.Mode, MTime: n.MTime}
	if n.IsDir() {
		if len(n.Children) > 0 {
			e.FirstChild, e.NumChildren = n.Children[0].ID, uint32(len(n.Children))
		}
	} else {
		e.Shard, e.Offset, e.Size, e.CRC = n.Shard, n.Offset, n.Size, n.CRC
	}
	return e
}

// nodeName returns n's name as bytes, without a copy: IndexWriter.Add only reads it.
func nodeName(n *Node) []byte { return unsafe.Slice(unsafe.StringData(n.Name), len(n.Name)) }

// IndexSize returns at least the size of the index IndexWriter writes for n entries, dirs of
// them directories, whose names take names bytes, with shards and an extent order of order ids
// (0 without): the entries, lookup table and names, the shards' names and table, the extent
// order, a checksum per block and a directory run per directory. Writing into a Buffer made
// with this capacity copies nothing as it grows (docs/bench/layout-notes.md#indextars-allocations).
func IndexSize(n, dirs, order int, names uint64, shards []Shard) int {
	for _, s := range shards {
		names += uint64(len(s.Name) + len(s.Version))
	}
	table := 4 * tableSlots(uint64(n))
	blocks := uint64(n)/defaultPerBlock + names/defaultBlockBytes + table/defaultBlockBytes + uint64(order)/(defaultBlockBytes/4) + 4
	return int(headerSize3 + entrySize*uint64(n) + table + names + shardSize*uint64(len(shards)) + 4*uint64(order) + 4*blocks + 8*uint64(dirs))
}

// Buffer is an io.WriterAt over a growing byte slice, for an IndexWriter writing in memory.
// Bytes not written read as zeros. It is not safe for concurrent use.
type Buffer struct{ b []byte }

// NewBuffer returns an empty Buffer of capacity size (IndexSize).
func NewBuffer(size int) *Buffer { return &Buffer{b: make([]byte, 0, size)} }

// Bytes returns what was written, up to the furthest byte; it aliases the Buffer.
func (m *Buffer) Bytes() []byte { return m.b }

// WriteAt copies p to offset off, growing the Buffer as needed; it never fails.
func (m *Buffer) WriteAt(p []byte, off int64) (int, error) {
	switch end := int(off) + len(p); {
	case end <= len(m.b):
	case end <= cap(m.b):
		// Within the capacity, make's zeros are there already: appending zeros would write
		// those bytes twice.
		m.b = m.b[:end]
	default:
		// Doubled, not grown by append's quarter: a TreeWriter's Buffer grows from empty, and
		// the bytes copied as it grows are then at most its size.
		b := make([]byte, end, max(end, 2*cap(m.b)))
		copy(b, m.b)
		m.b = b
	}
	return copy(m.b[off:], p), nil
}

// reserve makes the Buffer's capacity at least n bytes, and if it grows, n and a quarter more.
func (m *Buffer) reserve(n int) {
	if cap(m.b) < n {
		b := make([]byte, len(m.b), n+n/4)
		copy(b, m.b)
		m.b = b
	}
}

// extentOrder returns the extent order for nodes (id order), or nil when the files' extents
// ascend in id order without overlapping, so that id order is extent order.
func extentOrder(nodes []*Node) []ID {
	files := make([]*Node, 0, len(nodes))
	inOrder := true
	for _, n := range nodes {
		if n.IsDir() {
			continue
		}
		if k := len(files); k > 0 {
			p := files[k-1]
			inOrder = inOrder && (n.Shard > p.Shard || n.Shard == p.Shard && n.Offset >= p.Offset+p.Size)
		}
		files = append(files, n)
	}
	if inOrder {
		return nil
	}
	slices.SortStableFunc(files, func(a, b *Node) int {
		return cmp.Or(cmp.Compare(a.Shard, b.Shard), cmp.Compare(a.Offset, b.Offset), cmp.Compare(a.Size, b.Size))
	})
	order := make([]ID, len(files))
	for i, f := range files {
		order[i] = f.ID
	}
	return order
}
