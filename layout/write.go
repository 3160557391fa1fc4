package layout

import (
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"slices"
	"unsafe"
)

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
	open                 bool // n is not known yet (newOpenIndexWriter): n is 0 until Finish
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
	iw.table = blockWriter{w: iw, dst: w, off: tableOff, size: iw.blockBytes}
	iw.names = blockWriter{w: iw, dst: w, off: tableOff + 4*tableSlots(iw.n), size: iw.blockBytes}
	return iw
}

// newOpenIndexWriter starts an index whose entry count is known only at Finish (TreeWriter):
// the entries are written to w as NewIndexWriter's, whose offsets do not depend on the count;
// the lookup table and names, whose offsets do, are kept in memory until Finish writes them to
// w. Their blocks' checksums are those of the same blocks at the final offsets.
func newOpenIndexWriter(w io.WriterAt, noCRC bool) *IndexWriter {
	iw := &IndexWriter{w: w, open: true, noCRC: noCRC, perBlock: defaultPerBlock, blockBytes: defaultBlockBytes}
	iw.entries = entryBlocks{w: iw, held: map[uint64]*heldBlock{}}
	iw.table = blockWriter{w: iw, dst: &Buffer{}, size: iw.blockBytes}
	iw.names = blockWriter{w: iw, dst: &Buffer{}, size: iw.blockBytes}
	return iw
}

// blockWriter writes one section in blocks, keeping each block's CRC32C.
type blockWriter struct {
	w       *IndexWriter
	dst     io.WriterAt // the index, or a Buffer of the section alone (newOpenIndexWriter)
	off     uint64      // where the section starts in dst
	size    uint64      // bytes per block
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
	if _, err := b.dst.WriteAt(b.buf, int64(b.off+b.written)); err != nil && b.w.err == nil {
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
	if le.Uint16(r[eMode:]) == 0 {
		b.w.fail(fmt.Errorf("layout: the children of entry %d come before SetDir gave its entry", dir))
		return
	}
	put40(r[eShard:], nameOff)
	r[eShard+5] = uint8(nameLen)
	h.waiting--
	b.flush(k, h)
}

// flush writes block k if it is complete and waits for nothing.
func (b *entryBlocks) flush(k uint64, h *heldBlock) {
	full := uint64(len(h.buf)) == entrySize*b.w.perBlock || !b.w.open && uint64(len(h.buf)) == entrySize*(b.w.n-k*b.w.perBlock)
	if !full || h.waiting > 0 {
		return
	}
	if need := 4 * (k + 1); uint64(len(b.sums)) < need { // an open writer's, grown as blocks come
		b.sums = append(b.sums, make([]byte, need-uint64(len(b.sums)))...)
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
	if !e.IsDir() && e.Size > maxU40 {
		w.fail(fmt.Errorf("layout: %q is %d bytes: a sample may be at most 1 TiB", name, e.Size))
		return
	}
	var r [entrySize]byte
	le.PutUint16(r[eMode:], uint16(e.Mode))
	le.PutUint64(r[eMTime:], uint64(e.MTime))
	if e.IsDir() {
		le.PutUint64(r[eA:], uint64(e.FirstChild))
		put40(r[eB:], uint64(e.NumChildren))
	} else {
		le.PutUint64(r[eA:], e.Offset)
		put40(r[eB:], e.Size)
		le.PutUint32(r[eShard:], e.Shard)
		le.PutUint32(r[eCRC:], e.CRC)
		w.files++
		w.fileBytes += e.Size
	}
	w.place(id, name, e.Parent, e.IsDir(), r[:], e.IsDir() && e.NumChildren > 0)
}

// AddDirLater adds the next entry, a directory child of parent whose entry is not known yet
// (TreeWriter: a subtree of the root not read yet); SetDir gives it, before any of its
// children is added. Its block is held until then.
func (w *IndexWriter) AddDirLater(name []byte, parent ID) {
	var r [entrySize]byte // mode 0 until SetDir: hint refuses children before it
	w.place(w.next, name, parent, true, r[:], true)
}

// SetDir gives the entry of directory id, added by AddDirLater: Mode, MTime, FirstChild and
// NumChildren (Parent is the one AddDirLater was given).
func (w *IndexWriter) SetDir(id ID, e Entry) {
	b := &w.entries
	k := uint64(id) / w.perBlock
	h := b.held[k]
	if h == nil || uint64(len(h.buf)) < (uint64(id)%w.perBlock+1)*entrySize || !e.IsDir() {
		w.fail(fmt.Errorf("layout: SetDir of entry %d, not a directory added by AddDirLater, or given twice", id))
		return
	}
	r := h.buf[(uint64(id)%w.perBlock)*entrySize:]
	if le.Uint16(r[eMode:]) != 0 {
		w.fail(fmt.Errorf("layout: SetDir of entry %d given twice", id))
		return
	}
	le.PutUint16(r[eMode:], uint16(e.Mode))
	le.PutUint64(r[eMTime:], uint64(e.MTime))
	le.PutUint64(r[eA:], uint64(e.FirstChild))
	put40(r[eB:], uint64(e.NumChildren))
	if e.NumChildren == 0 {
		h.waiting-- // waits for nothing more; else, for its children's names hint
	}
	b.flush(k, h)
}

// place adds record r (its mode, mtime and extent or children set) of entry id, named name,
// child of parent; waits holds its block until its children's names hint comes.
func (w *IndexWriter) place(id uint64, name []byte, parent ID, dir bool, r []byte, waits bool) {
	w.next++
	if !w.open && id >= w.n || len(name) > MaxNameLen || w.nameOff > maxU40 || id > math.MaxUint32 {
		w.fail(fmt.Errorf("layout: entry %d (%q) is past the %d promised or its name is too long", id, name, w.n))
		return
	}
	put40(r[eName:], w.nameOff)
	le.PutUint32(r[eParent:], uint32(parent))
	r[eNameLen] = uint8(len(name))
	if dir {
		if k := len(w.runs); k > 0 && uint64(le.Uint32(w.runs[k-4:])) == id {
			le.PutUint32(w.runs[k-4:], uint32(id+1))
		} else {
			w.runs = le.AppendUint32(le.AppendUint32(w.runs, uint32(id)), uint32(id+1))
		}
		w.dirs++
	}
	w.entries.add(id, r, waits)
	if id > 0 && (parent != w.parent || len(w.hashes) == 0) {
		w.placeChildren()
		w.parent, w.first = parent, ID(id)
		w.entries.hint(uint64(parent), w.nameOff, len(name))
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

// settleCount ends an open writer's count (newOpenIndexWriter) at the entries added: it writes
// the last block of entries, held as not full, and the lookup table and names, kept until
// now, at their offsets.
func (w *IndexWriter) settleCount() {
	w.n, w.open = max(w.next, 1), false
	for k, h := range w.entries.held {
		w.entries.flush(k, h)
	}
	tableOff := headerSize3 + entrySize*w.n
	for _, sec := range []struct {
		b   *blockWriter
		off uint64
	}{{&w.table, tableOff}, {&w.names, tableOff + 4*tableSlots(w.n)}} {
		if _, err := w.w.WriteAt(sec.b.dst.(*Buffer).Bytes(), int64(sec.off)); err != nil {
			w.fail(fmt.Errorf("write index: %w", err))
		}
		sec.b.dst, sec.b.off = w.w, sec.off
	}
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
	if !w.open && w.next != w.n {
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
		b[28] = byte(s.Checksum)
	}
	w.names.flush()
	w.table.flush()
	if w.open {
		w.settleCount()
	}
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
	ow := blockWriter{w: w, dst: w.w, off: orderOff, size: w.blockBytes}
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
