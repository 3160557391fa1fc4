package layout

import (
	"math/bits"
	"unsafe"
)

// The lookup table is an open-addressing hash table of every directory's children, 1.5 u32
// slots per non-root entry. Directory d with children [first, first+count) owns the slots
// [⌊3(first-1)/2⌋, ⌊3(first-1+count)/2⌋) (regionOf), so the table is written in id order and a
// directory's probes stay in its region. A slot holds the child's position in the directory
// plus one (0 is empty) in its low bits.Len32(count) bits, and a tag from the name's hash in the
// rest, so a probe reads a child's entry and name only when the tag matches. A probe starts at
// the slot the hash maps to (its high bits times the region's length) and walks forward, wrapping
// in the region, to an empty slot, for at most the region's length.
//
// Version 3 stores the table in the index (FORMAT.md), so a lookup costs the probe's blocks
// read once and nothing is built at load; versions 1 and 2 get the same table built at load.
// The hash is part of the format: nameHash below, specified in FORMAT.md.
//
// A stored table of 1.5 slots per entry keeps the table (6 bytes a sample) and the entry (41) at
// version 1's 47 bytes a sample, against binary search, one table over the whole index and
// tables built at load (docs/bench/layout-notes.md#lookup-table). A lookup reads the directory's entry, a slot, the
// child's entry and its name, and the index's memory asks for huge pages (index.go).

// nameHash is the lookup table's hash of a name (FORMAT.md): 64 bits, mixing 8 bytes at a time.
func nameHash(name string) uint64 {
	const k1, k2 = 0x9e3779b97f4a7c15, 0xbf58476d1ce4e5b9
	b := unsafe.Slice(unsafe.StringData(name), len(name))
	h := uint64(len(name)) * k1
	for ; len(b) >= 8; b = b[8:] {
		h = (h ^ le.Uint64(b)) * k2
		h ^= h >> 31
	}
	if len(b) > 0 {
		var tail uint64
		for i, c := range b {
			tail |= uint64(c) << (8 * i)
		}
		h = (h ^ tail) * k2
		h ^= h >> 31
	}
	h = (h ^ h>>32) * k1
	return h ^ h>>29
}

// regionOf returns the first slot and the slot count of the table region of the directory
// whose children are [first, first+count).
func regionOf(first ID, count uint32) (base, n uint64) {
	base = 3 * (uint64(first) - 1) / 2
	return base, 3*(uint64(first)-1+uint64(count))/2 - base
}

// tableSlots is the slot count of the table of an index of n entries.
func tableSlots(n uint64) uint64 { return 3 * (n - 1) / 2 }

// probe is where a name's search starts in a region of n slots.
type probe struct {
	start uint64 // first slot to look at, relative to the region
	shift uint   // bits holding position+1
	tag   uint32 // expected slot value >> shift
}

func probeFor(n uint64, count uint32, h uint64) probe {
	start, _ := bits.Mul64(h, n) // maps h onto [0, n) without a division
	shift := uint(bits.Len32(count))
	return probe{start: start, shift: shift, tag: uint32(h>>32) >> shift}
}

// placeRegion fills region (its slots zeroed) with the children whose name hashes are hashes,
// in position order.
func placeRegion(region []byte, hashes []uint64) {
	n, count := uint64(len(region)/4), uint32(len(hashes))
	for pos, h := range hashes {
		p := probeFor(n, count, h)
		i := p.start
		for le.Uint32(region[4*i:]) != 0 {
			if i++; i == n {
				i = 0
			}
		}
		le.PutUint32(region[4*i:], uint32(pos+1)|p.tag<<p.shift)
	}
}

// buildTable builds the lookup table of a version 1 or 2 index, whose blocks are all checked.
func (x *Index) buildTable() {
	x.table = make([]byte, 4*tableSlots(uint64(x.Len())))
	var hashes []uint64
	for _, r := range x.dirRuns {
		for d := r.start; d < r.end; d++ {
			e := x.raw(d)
			if e.NumChildren == 0 {
				continue
			}
			hashes = hashes[:0]
			for c := e.FirstChild; c < e.FirstChild+ID(e.NumChildren); c++ {
				name := x.rawName(c)
				hashes = append(hashes, nameHash(unsafe.String(unsafe.SliceData(name), len(name))))
			}
			base, n := regionOf(e.FirstChild, e.NumChildren)
			placeRegion(x.table[4*base:4*(base+n)], hashes)
		}
	}
}

// Lookup finds the child of directory dir called name through the lookup table, without
// allocating. It returns ErrNotFound if dir is not a directory or has no such child, or an
// error wrapping ErrCorrupt where a block it needed failed its checks.
func (x *Index) Lookup(dir ID, name string) (ID, error) {
	if !x.ready(dir) {
		return 0, x.Err()
	}
	d := x.raw(dir)
	if !d.IsDir() || d.NumChildren == 0 {
		return 0, ErrNotFound
	}
	base, n := regionOf(d.FirstChild, d.NumChildren)
	p := probeFor(n, d.NumChildren, nameHash(name))
	// The guess of where the child at position k has its name: the hint plus k times the first
	// child's name's length, right when siblings' names are as long (numbered files). Comparing
	// the name at the guess when the entry's name offset turns out to be it lets the CPU load the
	// name while it loads the entry (the branch is predicted): at 100 M samples that is two
	// dependent cache misses a lookup instead of three (docs/scale.md).
	db := x.entries[int(dir)*entrySize:]
	hint, step := u40(db[eHint:]), uint64(db[eHint+5])
	// At most one pass over the region: a table that is full (which no writer makes) ends too.
	for k, i := uint64(0), p.start; k < n; k++ {
		slot := base + i
		if err := x.tableReady(slot); err != nil {
			return 0, err
		}
		s := le.Uint32(x.table[4*slot:])
		if s == 0 {
			break
		}
		if pos := s&(1<<p.shift-1) - 1; s>>p.shift == p.tag && pos < d.NumChildren {
			id := d.FirstChild + ID(pos)
			if !x.ready(id) {
				return 0, x.Err()
			}
			b := x.entries[int(id)*entrySize:]
			off, guess := u40(b[eName:]), hint+uint64(pos)*step
			var same bool
			if off == guess && guess+uint64(len(name)) <= uint64(len(x.names)) {
				same = string(x.names[guess:guess+uint64(len(name))]) == name && int(b[eNameLen]) == len(name)
			} else {
				same = string(x.rawName(id)) == name
			}
			if same {
				if ID(le.Uint32(b[eParent:])) != dir {
					return 0, x.notChild(id, dir)
				}
				return id, nil
			}
		}
		if i++; i == n {
			i = 0
		}
	}
	return 0, ErrNotFound
}

// Child returns the k-th child of directory d (entry dir) in name order, 0 <= k <
// d.NumChildren, and its entry, or an error wrapping ErrCorrupt where its block failed its checks
// or it does not name dir as its parent. Listings use it; it allocates nothing but on failure.
func (x *Index) Child(dir ID, d Entry, k uint32) (ID, Entry, error) {
	id := d.FirstChild + ID(k)
	e := x.Entry(id)
	if e.Mode == 0 {
		return 0, e, x.Err()
	}
	if e.Parent != dir {
		return 0, Entry{}, x.notChild(id, dir)
	}
	return id, e, nil
}

// notChild reports entry id, found in dir's child range, naming another parent.
func (x *Index) notChild(id, dir ID) error {
	err := corruptf("entry %d lies in the child range of %d but names parent %d", id, dir, x.raw(id).Parent)
	if x.v != nil {
		return x.v.fail(err)
	}
	return err
}
