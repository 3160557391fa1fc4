package layout

import (
	"cmp"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strings"
	"unsafe"
)

// node is one directory or file of a tree being indexed: IndexTars builds the tree from its
// tars (Pack holds its tree flat, in a packTree); number numbers it and encodeIndex encodes it.
// Directories hold their children sorted by name.
//
// IndexTars makes a node per member: its fields are ordered so that it takes 88 bytes, not 128,
// and it points to nothing but its name and children (the parent is an id), which the
// collector scans.
type node struct {
	name     string
	children []*node
	mtime    int64
	size     uint64
	offset   uint64
	mode     uint32 // Unix st_mode
	id       ID     // set by number
	parent   ID     // set by number; the root's is 0
	shard    uint32
	crc      uint32
	link     bool // a hard link of a tar (IndexTars): its extent is another file's
}

func (n *node) isDir() bool { return n.mode&modeTypeMask == modeDir }

// number assigns ids in index order (FORMAT.md): root 0, then the children of each directory as
// one contiguous block, directories expanded depth first in name order. It returns the nodes in
// id order.
func number(root *node) []*node {
	count := 1
	var walk func(d *node)
	walk = func(d *node) {
		count += len(d.children)
		for _, c := range d.children {
			if c.isDir() {
				walk(c)
			}
		}
	}
	walk(root)
	order := make([]*node, 1, count) // grown by appends, it allocated 5 times its size
	order[0] = root
	var expand func(d *node)
	expand = func(d *node) {
		byName := func(x, y *node) int { return strings.Compare(x.name, y.name) }
		if !slices.IsSortedFunc(d.children, byName) { // a tar's are, mostly
			slices.SortFunc(d.children, byName)
		}
		for _, c := range d.children {
			c.id, c.parent = ID(len(order)), d.id
			order = append(order, c)
		}
		for _, c := range d.children {
			if c.isDir() {
				expand(c)
			}
		}
	}
	expand(root)
	return order
}

// encodeIndex returns the index file (version 3) for nodes (in id order, as number returns
// them) and shards, with the extent order when id order is not it (tar sets), and flagged as
// having no checksums if noCRC.
func encodeIndex(nodes []*node, shards []Shard, noCRC bool) []byte {
	// The extent order is found on another core while the entries are encoded (at 1.28 M tar
	// members it took a fifth of the time after the last tar was read).
	orderc := make(chan []ID, 1)
	go func() { orderc <- extentOrder(nodes) }()
	var names uint64
	dirs := 0
	for _, n := range nodes {
		names += uint64(len(n.name))
		if n.isDir() {
			dirs++
		}
	}
	out := memFile{b: make([]byte, 0, indexSize(len(nodes), dirs, len(nodes)-dirs, names, shards))}
	w := NewIndexWriter(&out, len(nodes), noCRC)
	for _, n := range nodes {
		e := Entry{Parent: n.parent, Mode: n.mode, MTime: n.mtime}
		if n.isDir() {
			if len(n.children) > 0 {
				e.FirstChild, e.NumChildren = n.children[0].id, uint32(len(n.children))
			}
		} else {
			e.Shard, e.Offset, e.Size, e.CRC = n.shard, n.offset, n.size, n.crc
		}
		w.Add(unsafe.Slice(unsafe.StringData(n.name), len(n.name)), e) // Add only reads it
	}
	if _, err := w.Finish(shards, <-orderc); err != nil {
		panic(fmt.Sprintf("layout: encoding an index in memory: %v", err)) // the nodes are numbered by number
	}
	return out.b
}

// indexSize returns at least the size of the index IndexWriter writes for n entries, dirs of
// them directories, whose names take names bytes, with shards and an extent order of order ids
// (0 without): the entries, lookup table and names, the shards' names and table, the extent
// order, a checksum per block and a directory run per directory. Writing into a memFile made
// with this capacity copies nothing as it grows (at 1.28 M entries, growing by appends spent
// a quarter of IndexTars's CPU in copies).
func indexSize(n, dirs, order int, names uint64, shards []Shard) int {
	for _, s := range shards {
		names += uint64(len(s.Name) + len(s.Version))
	}
	table := 4 * tableSlots(uint64(n))
	blocks := uint64(n)/defaultPerBlock + names/defaultBlockBytes + table/defaultBlockBytes + uint64(order)/(defaultBlockBytes/4) + 4
	return int(headerSize3 + entrySize*uint64(n) + table + names + shardSize*uint64(len(shards)) + 4*uint64(order) + 4*blocks + 8*uint64(dirs))
}

// memFile is an io.WriterAt over a growing buffer. Bytes not written read as zeros.
type memFile struct{ b []byte }

func (m *memFile) WriteAt(p []byte, off int64) (int, error) {
	switch end := int(off) + len(p); {
	case end <= len(m.b):
	case end <= cap(m.b):
		// Within the capacity, make's zeros are there already: appending zeros first wrote
		// the 73 MiB of a 1.28 M-member index twice, 2% of IndexTars's CPU.
		m.b = m.b[:end]
	default:
		m.b = append(m.b, make([]byte, end-len(m.b))...)
	}
	return copy(m.b[off:], p), nil
}

// extentOrder returns the extent order for nodes (id order), or nil when the files' extents
// ascend in id order without overlapping, so that id order is extent order.
func extentOrder(nodes []*node) []ID {
	files := make([]*node, 0, len(nodes))
	inOrder := true
	for _, n := range nodes {
		if n.isDir() {
			continue
		}
		if k := len(files); k > 0 {
			p := files[k-1]
			inOrder = inOrder && (n.shard > p.shard || n.shard == p.shard && n.offset >= p.offset+p.size)
		}
		files = append(files, n)
	}
	if inOrder {
		return nil
	}
	slices.SortStableFunc(files, func(a, b *node) int {
		return cmp.Or(cmp.Compare(a.shard, b.shard), cmp.Compare(a.offset, b.offset), cmp.Compare(a.size, b.size))
	})
	order := make([]ID, len(files))
	for i, f := range files {
		order[i] = f.id
	}
	return order
}

// IndexWriter writes a version 3 index entry by entry, in id order, holding nothing per entry:
// its memory is a block of each section and the name hashes of one directory's children. It is
// how aifs writes every index, and how a test writes one of 100 M entries (integration/genindex).
//
// The entries, lookup table and names are written as they come, at offsets fixed by the entry
// count given to NewIndexWriter (the names last, as they may run to any length); Finish writes
// the shards' names, the extent order, the shard table, the block checksums, the directory runs
// and last the header.
type IndexWriter struct {
	w                    io.WriterAt
	n                    uint64
	noCRC                bool
	perBlock, blockBytes uint64
	entries              entryBlocks
	names, table         blockWriter
	sums                 []byte
	next                 uint64 // id of the next entry
	nameOff              uint64
	runs                 []byte // {start, end} u32 pairs
	dirs                 uint64 // directories so far
	files, fileBytes     uint64
	parent, first        ID       // the directory whose children are being added, and its first
	hashes               []uint64 // their name hashes, for the table
	region               []byte
	err                  error
}

// NewIndexWriter starts an index of entries entries (at least the root), written to w at
// offsets from 0; noCRC marks a set without checksums. Add every entry, then call Finish.
func NewIndexWriter(w io.WriterAt, entries int, noCRC bool) *IndexWriter {
	iw := &IndexWriter{w: w, n: uint64(max(entries, 1)), noCRC: noCRC, perBlock: defaultPerBlock, blockBytes: defaultBlockBytes}
	tableOff := headerSize3 + entrySize*iw.n
	iw.entries = entryBlocks{w: iw, held: map[uint64]*heldBlock{},
		sums: make([]byte, 4*((iw.n+iw.perBlock-1)/iw.perBlock))}
	iw.table = blockWriter{w: iw, off: tableOff, size: iw.blockBytes}
	iw.names = blockWriter{w: iw, off: tableOff + 4*tableSlots(iw.n), size: iw.blockBytes}
	return iw
}

// blockWriter writes one section in blocks, keeping each block's CRC32C.
type blockWriter struct {
	w       *IndexWriter
	off     uint64 // where the section starts
	size    uint64 // bytes per block
	buf     []byte
	written uint64
	sums    []byte
}

func (b *blockWriter) write(p []byte) {
	for len(p) > 0 {
		k := min(uint64(len(p)), b.size-uint64(len(b.buf)))
		b.buf = append(b.buf, p[:k]...)
		p = p[k:]
		if uint64(len(b.buf)) == b.size {
			b.flush()
		}
	}
}

func (b *blockWriter) flush() {
	if len(b.buf) == 0 {
		return
	}
	b.sums = le.AppendUint32(b.sums, crc32.Checksum(b.buf, castagnoli))
	if _, err := b.w.w.WriteAt(b.buf, int64(b.off+b.written)); err != nil && b.w.err == nil {
		b.w.err = fmt.Errorf("write index: %w", err)
	}
	b.written += uint64(len(b.buf))
	b.buf = b.buf[:0]
}

// entryBlocks writes the entries section block by block, as blockWriter does, but holds a block
// back until every directory in it has its children's names hint (FORMAT.md: the offset of its
// first child's name and that name's length), known only when its children are added. The
// blocks held are those of directories whose children are still to come: for an ImageFolder tree,
// the root's blocks, 41 bytes a class.
type entryBlocks struct {
	w    *IndexWriter
	held map[uint64]*heldBlock // by block number
	sums []byte                // every block's CRC32C, filled as blocks are written
	// The block entries are being added to, k held[k], that the next entry most likely goes
	// to; and blocks written, to be reused. (A map access and a new block each time cost a
	// third of Add's time.)
	last *heldBlock
	k    uint64
	free []*heldBlock
}

type heldBlock struct {
	buf     []byte
	waiting int // directories in it whose children have not come yet
}

func (b *entryBlocks) block(id uint64) *heldBlock {
	k := id / b.w.perBlock
	if b.last != nil && b.k == k {
		return b.last
	}
	h := b.held[k]
	if h == nil {
		if n := len(b.free); n > 0 {
			h, b.free = b.free[n-1], b.free[:n-1]
		} else {
			h = &heldBlock{buf: make([]byte, 0, entrySize*b.w.perBlock)}
		}
		b.held[k] = h
	}
	b.last, b.k = h, k
	return h
}

// add appends record r of entry id; a directory with children waits for its hint.
func (b *entryBlocks) add(id uint64, r []byte, waits bool) {
	h := b.block(id)
	h.buf = append(h.buf, r...)
	if waits {
		h.waiting++
	}
	b.flush(id/b.w.perBlock, h)
}

// hint sets directory dir's children's names hint, and writes its block if it was the last
// thing the block waited for.
func (b *entryBlocks) hint(dir uint64, nameOff uint64, nameLen int) {
	k := dir / b.w.perBlock
	h := b.held[k]
	if h == nil || uint64(len(h.buf)) < (dir%b.w.perBlock+1)*entrySize {
		b.w.fail(fmt.Errorf("layout: the children of entry %d come after its block was written, or before it", dir))
		return
	}
	r := h.buf[(dir%b.w.perBlock)*entrySize:]
	put40(r[eShard:], nameOff)
	r[eShard+5] = uint8(nameLen)
	h.waiting--
	b.flush(k, h)
}

// flush writes block k if it is complete and waits for nothing.
func (b *entryBlocks) flush(k uint64, h *heldBlock) {
	full := uint64(len(h.buf)) == entrySize*min(b.w.perBlock, b.w.n-k*b.w.perBlock)
	if !full || h.waiting > 0 {
		return
	}
	le.PutUint32(b.sums[4*k:], crc32.Checksum(h.buf, castagnoli))
	if _, err := b.w.w.WriteAt(h.buf, int64(headerSize3+k*entrySize*b.w.perBlock)); err != nil {
		b.w.fail(fmt.Errorf("write index: %w", err))
	}
	delete(b.held, k)
	if h == b.last {
		b.last = nil
	}
	h.buf, h.waiting = h.buf[:0], 0
	b.free = append(b.free, h)
}

// Add adds the next entry, id order (FORMAT.md): the root first, each directory's children
// together in name order. For a directory, e gives FirstChild and NumChildren; for a file,
// Shard, Offset, Size and CRC. The index's checks are the reader's: Add checks only what would
// make the file unwritable.
func (w *IndexWriter) Add(name []byte, e Entry) {
	id := w.next
	w.next++
	if id >= w.n || len(name) > maxNameLen || w.nameOff > maxU40 {
		w.fail(fmt.Errorf("layout: entry %d (%q) is past the %d promised or its name is too long", id, name, w.n))
		return
	}
	if !e.IsDir() && e.Size > maxU40 {
		w.fail(fmt.Errorf("layout: %q is %d bytes: a sample may be at most 1 TiB", name, e.Size))
		return
	}
	var r [entrySize]byte
	put40(r[eName:], w.nameOff)
	le.PutUint32(r[eParent:], uint32(e.Parent))
	le.PutUint16(r[eMode:], uint16(e.Mode))
	r[eNameLen] = uint8(len(name))
	le.PutUint64(r[eMTime:], uint64(e.MTime))
	if e.IsDir() {
		le.PutUint64(r[eA:], uint64(e.FirstChild))
		put40(r[eB:], uint64(e.NumChildren))
		if k := len(w.runs); k > 0 && uint64(le.Uint32(w.runs[k-4:])) == id {
			le.PutUint32(w.runs[k-4:], uint32(id+1))
		} else {
			w.runs = le.AppendUint32(le.AppendUint32(w.runs, uint32(id)), uint32(id+1))
		}
		w.dirs++
	} else {
		le.PutUint64(r[eA:], e.Offset)
		put40(r[eB:], e.Size)
		le.PutUint32(r[eShard:], e.Shard)
		le.PutUint32(r[eCRC:], e.CRC)
		w.files++
		w.fileBytes += e.Size
	}
	w.entries.add(id, r[:], e.IsDir() && e.NumChildren > 0)
	if id > 0 && (e.Parent != w.parent || len(w.hashes) == 0) {
		w.placeChildren()
		w.parent, w.first = e.Parent, ID(id)
		w.entries.hint(uint64(e.Parent), w.nameOff, len(name))
	}
	w.names.write(name)
	w.nameOff += uint64(len(name))
	if id > 0 {
		w.hashes = append(w.hashes, nameHash(unsafe.String(unsafe.SliceData(name), len(name))))
	}
}

// placeChildren writes the table region of the children added since the last directory change.
func (w *IndexWriter) placeChildren() {
	if len(w.hashes) == 0 {
		return
	}
	_, slots := regionOf(w.first, uint32(len(w.hashes)))
	n := 4 * int(slots)
	if cap(w.region) < n {
		w.region = make([]byte, n)
	}
	w.region = w.region[:n]
	clear(w.region)
	placeRegion(w.region, w.hashes)
	w.table.write(w.region)
	w.hashes = w.hashes[:0]
}

func (w *IndexWriter) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

// Finish writes the rest of the index: the shards the entries name, and order, the extent
// order (file ids sorted by shard, offset and size), or nil when id order is extent order. It
// returns the index's size.
func (w *IndexWriter) Finish(shards []Shard, order []ID) (int64, error) {
	w.placeChildren()
	if w.next != w.n {
		w.fail(fmt.Errorf("layout: %d entries added, %d promised", w.next, w.n))
	}
	var flags uint32
	shardTable := make([]byte, len(shards)*shardSize)
	for i, s := range shards {
		b := shardTable[i*shardSize:]
		le.PutUint64(b, w.nameOff)
		w.names.write([]byte(s.Name))
		le.PutUint16(b[8:], uint16(len(s.Name)))
		le.PutUint16(b[10:], uint16(s.Kind))
		if s.Version != "" {
			flags |= flagShardVersions
			w.names.write([]byte(s.Version))
			le.PutUint32(b[12:], uint32(len(s.Version)))
		}
		w.nameOff += uint64(len(s.Name) + len(s.Version))
		le.PutUint64(b[16:], s.Size)
		le.PutUint32(b[24:], s.CRC)
	}
	w.names.flush()
	w.table.flush()
	if len(w.entries.held) > 0 {
		w.fail(fmt.Errorf("layout: %d blocks of entries wait for directories' children that never came", len(w.entries.held)))
	}
	if w.table.written != 4*tableSlots(w.n) {
		w.fail(fmt.Errorf("layout: the children added do not cover entries 1 to %d in one run per directory", w.n-1))
	}
	if w.noCRC {
		flags |= flagNoChecksums
	}
	orderOff := w.names.off + w.names.written
	ow := blockWriter{w: w, off: orderOff, size: w.blockBytes}
	if order != nil {
		flags |= flagExtentOrder
		var b [4]byte
		for _, id := range order {
			le.PutUint32(b[:], uint32(id))
			ow.write(b[:])
		}
		ow.flush()
	}
	sums := slices.Concat(w.entries.sums, w.names.sums, w.table.sums, ow.sums)
	entriesLen := entrySize * w.n
	var h [headerSize3]byte
	copy(h[:], magic)
	le.PutUint32(h[8:], versionBlocks)
	le.PutUint32(h[12:], flags)
	le.PutUint64(h[16:], w.n)
	le.PutUint64(h[24:], uint64(len(shards)))
	le.PutUint64(h[h3Files:], w.files)
	le.PutUint64(h[h3FileBytes:], w.fileBytes)
	le.PutUint32(h[h3PerBlock:], uint32(w.perBlock))
	le.PutUint32(h[h3BlockBytes:], uint32(w.blockBytes))
	end := orderOff + ow.written
	desc := func(sec int, off, n uint64, sum uint32) {
		d := h[h3Desc+h3DescSize*sec:]
		le.PutUint64(d, off)
		le.PutUint64(d[8:], n)
		le.PutUint32(d[16:], sum)
	}
	desc(s3Entries, headerSize3, entriesLen, 0)
	desc(s3Names, w.names.off, w.names.written, 0)
	desc(s3Table, w.table.off, w.table.written, 0)
	desc(s3Order, orderOff, ow.written, 0)
	for _, sec := range []struct {
		k int
		b []byte
	}{{s3Shards, shardTable}, {s3Sums, sums}, {s3Runs, w.runs}} {
		desc(sec.k, end, uint64(len(sec.b)), crc32.Checksum(sec.b, castagnoli))
		if _, err := w.w.WriteAt(sec.b, int64(end)); err != nil {
			w.fail(fmt.Errorf("write index: %w", err))
		}
		end += uint64(len(sec.b))
	}
	le.PutUint32(h[252:], crc32.Checksum(h[:252], castagnoli))
	if w.err != nil {
		return 0, w.err
	}
	if _, err := w.w.WriteAt(h[:], 0); err != nil {
		return 0, fmt.Errorf("write index: %w", err)
	}
	return int64(end), nil
}
