package layout

import (
	"bytes"
	"errors"
	"hash/crc32"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/aifs/aifs/internal/bitset"
)

// A version 3 index is checked block by block, the first time a block is used, so that a mount
// is live after reading the header and the small sections, whatever the entry count
// (FORMAT.md, "Version 3"). The entries section is cut into blocks of perBlock entries; the
// names, lookup table and extent order sections into blocks of blockBytes bytes; each block has
// its CRC32C in the block checksums section.
//
// A block is *read* when its bytes are in memory and match their checksum (read). An entries or
// extent-order block is *checked* when, in addition, every entry or position in it keeps the
// rules of FORMAT.md that can be checked from it and its neighbours: every entry lies in its
// parent's child range, after the sibling before it (which names the same parent, with a smaller
// name), a directory's last child names it, files keep pack order with the file before them, and
// so on (checkEntry). Checked over every block these rules are the whole-index rules of versions
// 1 and 2, which is how those are checked at load (parseOld, CheckAll); lazily, an entry is never
// answered before its block is checked, and a block that fails is answered as missing, with
// Index.Err saying why.
//
// The cost on the read path is one atomic load of a bit per entry used; nothing is allocated.

// Block sizes the writer uses (FORMAT.md allows powers of two): 1,024 entries (47 KiB) and
// 64 KiB, so a lookup reads and checks about 100 KiB the first time it meets a directory.
var (
	defaultPerBlock   uint64 = 1024
	defaultBlockBytes uint64 = 64 << 10
)

// The sections read by blocks, in the order of their checksums in the block checksums section.
const (
	bEntries = iota
	bNames
	bTable
	bOrder
)

var blockSectionText = [4]string{"entries", "names", "lookup table", "extent order"}

// blocks is what is known of a version 3 index's blocks.
type blocks struct {
	x          *Index
	shift      uint   // log2 of entries per block
	blockBytes uint64 // bytes per block of the other sections
	sums       []byte // CRC32C of every block, u32 each, sections in the order above
	first      [4]uint64
	fileOff    [4]int64                        // where each section lies in the file, for fill
	fill       func(off int64, b []byte) error // reads file bytes into the buffer; nil when it is whole
	read       bitset.Atomic                   // bit per block: bytes present and their checksum held
	checked    bitset.Atomic                   // bit per entries or order block: rules held
	mu         [64]sync.Mutex                  // serialises reading a block (by block number)
	readBytes  atomic.Uint64                   // bytes of the blocks read
	err        atomic.Pointer[error]           // the first failure found
}

// newBlocks returns the block state of x, whose sections are set, or nil if sums is not 4
// bytes per block.
func newBlocks(x *Index, perBlock, blockBytes uint64, sums []byte, fill func(int64, []byte) error, fileOff [4]int64) *blocks {
	v := &blocks{x: x, blockBytes: blockBytes, sums: sums, fill: fill, fileOff: fileOff}
	for perBlock > 1 {
		perBlock >>= 1
		v.shift++
	}
	counts := [4]uint64{
		(uint64(x.Len()) + 1<<v.shift - 1) >> v.shift,
		v.byteBlocks(len(x.names)), v.byteBlocks(len(x.table)), v.byteBlocks(len(x.order)),
	}
	var n uint64
	for k, c := range counts {
		v.first[k] = n
		n += c
	}
	if sums != nil && uint64(len(sums)) != 4*n {
		return nil
	}
	v.read = bitset.NewAtomic(int(n))
	v.checked = bitset.NewAtomic(int(n))
	return v
}

func (v *blocks) byteBlocks(n int) uint64 { return (uint64(n) + v.blockBytes - 1) / v.blockBytes }

// allRead marks every block read: a version 1 or 2 index, whose section checksums held.
func (v *blocks) allRead() {
	v.read.Fill()
}

// bytes returns block b of section k.
func (v *blocks) bytes(k int, b uint64) (blk []byte, off uint64) {
	sec, size := v.x.names, v.blockBytes
	switch k {
	case bEntries:
		sec, size = v.x.entries, entrySize<<v.shift
	case bTable:
		sec = v.x.table
	case bOrder:
		sec = v.x.order
	}
	off = b * size
	return sec[off:min(off+size, uint64(len(sec)))], off
}

// ensureRead makes block b of section k present and checks its checksum.
func (v *blocks) ensureRead(k int, b uint64) error {
	g := v.first[k] + b
	if v.read.Has(g) {
		return nil
	}
	m := &v.mu[g%uint64(len(v.mu))]
	m.Lock()
	defer m.Unlock()
	if v.read.Has(g) {
		return nil
	}
	blk, off := v.bytes(k, b)
	if v.fill != nil {
		if err := v.fill(v.fileOff[k]+int64(off), blk); err != nil {
			return v.fail(err)
		}
	}
	if crc32.Checksum(blk, castagnoli) != le.Uint32(v.sums[4*g:]) {
		return v.fail(corruptf("%s block %d checksum mismatch", blockSectionText[k], b))
	}
	v.readBytes.Add(uint64(len(blk)))
	v.read.Add(g)
	return nil
}

// fail records err as the index's first failure and returns it.
func (v *blocks) fail(err error) error {
	v.err.CompareAndSwap(nil, &err)
	return err
}

// Err returns the first failure found in checking a version 3 index's blocks as they were used,
// or nil. An entry of a block that failed is answered as missing.
func (x *Index) Err() error {
	if v := x.v; v != nil {
		if p := v.err.Load(); p != nil {
			return *p
		}
	}
	return nil
}

// Size returns the index file's size in bytes, and how many of them have been read and checked:
// all for versions 1 and 2; for version 3, the header, the small sections and the blocks used
// so far. The mount's stats file reports both.
func (x *Index) Size() (total, read uint64) {
	if x.v == nil {
		return x.size, x.size
	}
	return x.size, x.small + x.v.readBytes.Load()
}

// ready reports whether entry id may be answered: its block was checked (checking it now if
// it was not). This is the read path's only cost of lazy checking.
func (x *Index) ready(id ID) bool {
	v := x.v
	if v == nil {
		return true
	}
	b := uint64(id) >> v.shift
	if v.checked.Has(v.first[bEntries] + b) {
		return true
	}
	return v.checkEntries(b) == nil
}

// entryRead makes entry id's block present (not necessarily checked) so that its fields can be
// compared with a neighbour's.
func (v *blocks) entryRead(id uint64) error { return v.ensureRead(bEntries, id>>v.shift) }

// orderReady reports whether extent-order position pos may be answered.
func (x *Index) orderReady(pos int) bool {
	v := x.v
	if v == nil {
		return true
	}
	b := uint64(pos) * 4 / v.blockBytes
	if v.checked.Has(v.first[bOrder] + b) {
		return true
	}
	return v.checkOrder(b) == nil
}

// tableReady makes the lookup-table block holding slot present, or returns why not.
func (x *Index) tableReady(slot uint64) error {
	v := x.v
	if v == nil {
		return nil
	}
	return v.ensureRead(bTable, slot*4/v.blockBytes)
}

// checkedName returns the names-section bytes [off, off+n), making their blocks present. It
// fails if they lie outside the section (errBadName) or a block fails its checksum.
func (x *Index) checkedName(off, n uint64) ([]byte, error) {
	if off > uint64(len(x.names)) || n > uint64(len(x.names))-off {
		return nil, errBadName
	}
	if v := x.v; v != nil && n > 0 {
		for b := off / v.blockBytes; b <= (off+n-1)/v.blockBytes; b++ {
			if err := v.ensureRead(bNames, b); err != nil {
				return nil, err
			}
		}
	}
	return x.names[off : off+n], nil
}

// errBadName is checkedName's error for bytes outside the names section; callers say whose.
var errBadName = errors.New("name outside the names section")

// CheckAll reads and checks every block: the whole-index checks of a version 1 or 2 index, and
// what aifs verify adds to a version 3 mount's checks on use. Beyond the blocks' rules it checks
// that the directories' child ranges add up to every entry but the root: as every entry lies in
// its parent's range, the ranges then cannot overlap, so every child names its directory. And it
// compares the header's total of file bytes with the entries.
func (x *Index) CheckAll() error {
	v := x.v
	if v == nil {
		return nil
	}
	var fileBytes, children uint64
	for b := uint64(0); b < v.first[bNames]; b++ {
		if err := v.checkEntries(b); err != nil {
			return err
		}
		blk, _ := v.bytes(bEntries, b)
		for r := 0; r < len(blk); r += entrySize {
			if le.Uint16(blk[r+eMode:])&ModeType == ModeRegular {
				fileBytes += u40(blk[r+eB:])
			} else {
				children += u40(blk[r+eB:])
			}
		}
	}
	for k := bNames; k <= bTable; k++ {
		for b := range v.byteBlocks(len(v.section(k))) {
			if err := v.ensureRead(k, b); err != nil {
				return err
			}
		}
	}
	for b := range v.byteBlocks(len(x.order)) {
		if err := v.checkOrder(b); err != nil {
			return err
		}
	}
	if children != uint64(x.Len())-1 {
		return v.fail(corruptf("directories list %d children for %d non-root entries", children, x.Len()-1))
	}
	if fileBytes != x.fileBytes {
		return v.fail(corruptf("header counts %d bytes of files but the entries hold %d", x.fileBytes, fileBytes))
	}
	return nil
}

func (v *blocks) section(k int) []byte {
	return [4][]byte{v.x.entries, v.x.names, v.x.table, v.x.order}[k]
}

// checkEntries checks entries block b (reading it, and the neighbours its rules compare with).
// Two callers may check the same block at once; the checks only read.
func (v *blocks) checkEntries(b uint64) error {
	return v.checkBlock(bEntries, b, b<<v.shift, min((b+1)<<v.shift, uint64(v.x.Len())), v.checkEntry)
}

// checkBlock checks block b of section k, which holds items [start, end): it reads the block,
// applies check to each item and marks the block checked, unless it is marked already.
func (v *blocks) checkBlock(k int, b, start, end uint64, check func(uint64) error) error {
	g := v.first[k] + b
	if v.checked.Has(g) {
		return nil
	}
	if err := v.ensureRead(k, b); err != nil {
		return err
	}
	for i := start; i < end; i++ {
		if err := check(i); err != nil {
			return v.fail(err)
		}
	}
	v.checked.Add(g)
	return nil
}

// checkEntry applies FORMAT.md's rules to entry i, whose block is read. Every offset is bounded
// before use, so a hostile index yields an error, never a panic.
func (v *blocks) checkEntry(i uint64) error {
	x := v.x
	n := uint64(x.Len())
	b := x.entries[i*entrySize:]
	mode := uint32(le.Uint16(b[eMode:]))
	isDir := mode&ModeType == ModeDir
	if i == 0 {
		if !isDir || le.Uint32(b[eParent:]) != 0 || b[eNameLen] != 0 || u40(b[eName:]) > uint64(len(x.names)) {
			return corruptf("entry 0 is not the root directory")
		}
	} else if !isDir && mode&ModeType != ModeRegular {
		return corruptf("entry %d has unsupported mode %#o", i, mode)
	}
	if isDir != x.isDir(ID(i)) {
		return corruptf("entry %d has mode %#o, which the directory runs contradict", i, mode)
	}
	if i > 0 {
		if err := v.checkPlace(i, b); err != nil {
			return err
		}
	}
	if isDir {
		return v.checkDir(i, b, n)
	}
	return v.checkFile(i, b)
}

// checkPlace checks where non-root entry i (record b) lies: a valid name, in its parent's child
// range, and after the sibling before it, which names the same parent and a smaller name.
func (v *blocks) checkPlace(i uint64, b []byte) error {
	x := v.x
	name, err := x.checkedName(u40(b[eName:]), uint64(b[eNameLen]))
	if err != nil && err != errBadName {
		return err
	}
	if err != nil || !ValidName(name) {
		return corruptf("entry %d has an invalid name", i)
	}
	parent := uint64(le.Uint32(b[eParent:]))
	if parent >= i {
		return corruptf("entry %d names parent %d, which does not come before it", i, parent)
	}
	if err := v.entryRead(parent); err != nil {
		return err
	}
	p := x.raw(ID(parent))
	if !p.IsDir() || i < uint64(p.FirstChild) || i-uint64(p.FirstChild) >= uint64(p.NumChildren) {
		return corruptf("entry %d names parent %d, whose children do not include it", i, parent)
	}
	if i == uint64(p.FirstChild) {
		return nil
	}
	if err := v.entryRead(i - 1); err != nil {
		return err
	}
	if prev := uint64(x.raw(ID(i - 1)).Parent); prev != parent {
		return corruptf("entry %d lies in the child range of %d but names parent %d", i-1, parent, prev)
	}
	pb := x.entries[(i-1)*entrySize:]
	prevName, err := x.checkedName(u40(pb[eName:]), uint64(pb[eNameLen]))
	if err != nil && err != errBadName {
		return err
	}
	if err != nil || bytes.Compare(prevName, name) >= 0 {
		return corruptf("children of directory %d are not strictly sorted at entry %d", parent, i)
	}
	return nil
}

// checkDir checks directory i's child range: empty, or inside the table after i. That its
// children name it is checked where they are used as its children (Lookup, and the listings,
// through Index.Child), and over the whole index by CheckAll: checking it here would read the block
// of a child of every directory in the block, the whole entries section for a root of many
// directories.
//
// A directory's file fields hold the hint of where its children's names lie (eHint); a wrong
// hint costs a lookup speed, never an answer, so it is not checked.
func (v *blocks) checkDir(i uint64, b []byte, n uint64) error {
	if b[eHint+6] != 0 || b[eHint+7] != 0 {
		return corruptf("directory entry %d has nonzero file fields", i)
	}
	first, count := le.Uint64(b[eA:]), u40(b[eB:])
	if count == 0 {
		if first != 0 {
			return corruptf("empty directory entry %d has first child %d", i, first)
		}
		return nil
	}
	if first <= i || first > n || count > n-first {
		return corruptf("directory entry %d has child range [%d,+%d) outside the table", i, first, count)
	}
	return nil
}

// checkFile checks file i's extent: in a shard, inside it, and (without an extent order) after
// the extent of the file before it in id order, as pack order requires.
func (v *blocks) checkFile(i uint64, b []byte) error {
	x := v.x
	shard, off, size := le.Uint32(b[eShard:]), le.Uint64(b[eA:]), u40(b[eB:])
	if int(shard) >= len(x.shards) {
		return corruptf("file entry %d names shard %d of %d", i, shard, len(x.shards))
	}
	if sz := x.shards[shard].Size; off > sz || size > sz-off {
		return corruptf("file entry %d extent [%d,+%d) runs past the end of %s (%d bytes)", i, off, size, x.shards[shard].Name, sz)
	}
	if x.noCRC && le.Uint32(b[eCRC:]) != 0 {
		return corruptf("file entry %d has a checksum in a set without checksums", i)
	}
	if x.order != nil {
		return nil
	}
	prev, ok := x.fileBefore(ID(i))
	if !ok {
		return nil
	}
	if err := v.entryRead(uint64(prev)); err != nil {
		return err
	}
	p := x.raw(prev)
	if shard < p.Shard || shard == p.Shard && off < p.Offset+p.Size {
		return corruptf("file entry %d extent [%d,+%d) of %s overlaps or precedes the file before it (file ids ascend in pack order)",
			i, off, size, x.shards[shard].Name)
	}
	return nil
}

// fileBefore returns the last file before file id in id order.
func (x *Index) fileBefore(id ID) (ID, bool) {
	if id == 0 {
		return 0, false
	}
	prev := id - 1
	k := sort.Search(len(x.dirRuns), func(k int) bool { return x.dirRuns[k].end > prev })
	if k < len(x.dirRuns) && x.dirRuns[k].start <= prev {
		if x.dirRuns[k].start == 0 {
			return 0, false
		}
		prev = x.dirRuns[k].start - 1
	}
	return prev, true
}

// checkOrder checks extent-order block b: each position names a file, and along the order
// extents ascend without overlapping (shards ascending), or repeat the extent and checksum of the
// position before (hard links of a tar) with a larger id. Then no id can appear twice (its
// extent would have to come back), so F positions name every file once.
func (v *blocks) checkOrder(b uint64) error {
	perBlock := v.blockBytes / 4
	start := b * perBlock
	return v.checkBlock(bOrder, b, start, min(start+perBlock, uint64(v.x.files)), v.checkPosition)
}

func (v *blocks) checkPosition(pos uint64) error {
	x := v.x
	id, err := v.orderID(pos)
	if err != nil || pos == 0 {
		return err
	}
	prev, err := v.orderID(pos - 1)
	if err != nil {
		return err
	}
	e, last := x.raw(id), x.raw(prev)
	if e.Shard == last.Shard && e.Offset == last.Offset && e.Size == last.Size && e.CRC == last.CRC {
		if id <= prev {
			return corruptf("extent order position %d names entry %d: not a file, or named twice", pos, id)
		}
		return nil
	}
	if e.Shard < last.Shard || e.Shard == last.Shard && e.Offset < last.Offset+last.Size {
		return corruptf("file entry %d extent [%d,+%d) of shard %d overlaps or precedes the file before it in extent order",
			id, e.Offset, e.Size, e.Shard)
	}
	return nil
}

// orderID returns the file at extent-order position pos, reading the blocks holding it and its
// entry.
func (v *blocks) orderID(pos uint64) (ID, error) {
	x := v.x
	if err := v.ensureRead(bOrder, pos*4/v.blockBytes); err != nil {
		return 0, err
	}
	id := le.Uint32(x.order[4*pos:])
	if uint64(id) >= uint64(x.Len()) || x.isDir(ID(id)) {
		return 0, corruptf("extent order position %d names entry %d: not a file, or named twice", pos, id)
	}
	return ID(id), v.entryRead(uint64(id))
}
