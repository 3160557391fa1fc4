package layout

import (
	"bytes"
	"cmp"
	"hash/crc32"
	"slices"
	"sort"
)

// node is one directory or file of a tree being packed. Pack builds the tree from a walk; the
// index writer numbers it and encodes it. Directories hold their children sorted by name.
type node struct {
	name     string
	mode     uint32 // Unix st_mode
	mtime    int64
	src      string // path to read the content from (files)
	link     bool   // a hard link of a tar (IndexTars): its extent is another file's
	size     uint64
	children []*node

	// Set by number and by the data writer.
	id     ID
	parent *node
	shard  uint32
	offset uint64
	crc    uint32
}

func (n *node) isDir() bool { return n.mode&modeTypeMask == modeDir }

// number assigns ids in index order (FORMAT.md): root 0, then the children of each directory as
// one contiguous block, directories expanded depth first in name order. It returns the nodes in
// id order; for a packed set this is also pack order for the files.
func number(root *node) []*node {
	order := []*node{root}
	var expand func(d *node)
	expand = func(d *node) {
		sort.Slice(d.children, func(i, j int) bool { return d.children[i].name < d.children[j].name })
		for _, c := range d.children {
			c.id, c.parent = ID(len(order)), d
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

// encodeIndex returns the index file for nodes (in id order, as number returns them) and shards:
// version 1 for packed shards, version 2 with tar shards, then with the extent order when id
// order is not it, and flagged as having no checksums if noCRC.
func encodeIndex(nodes []*node, shards []Shard, noCRC bool) []byte {
	var names bytes.Buffer
	entries := make([]byte, len(nodes)*entrySize)
	for i, n := range nodes {
		b := entries[i*entrySize:]
		le.PutUint64(b, uint64(names.Len()))
		names.WriteString(n.name)
		if n.parent != nil {
			le.PutUint32(b[eParent:], uint32(n.parent.id))
		}
		le.PutUint16(b[eMode:], uint16(n.mode))
		b[eNameLen] = uint8(len(n.name))
		le.PutUint64(b[eMTime:], uint64(n.mtime))
		if n.isDir() {
			if len(n.children) > 0 {
				le.PutUint64(b[eA:], uint64(n.children[0].id))
				le.PutUint64(b[eB:], uint64(len(n.children)))
			}
			continue
		}
		le.PutUint64(b[eA:], n.offset)
		le.PutUint64(b[eB:], n.size)
		le.PutUint32(b[eShard:], n.shard)
		le.PutUint32(b[eCRC:], n.crc)
	}
	shardTable := make([]byte, len(shards)*shardSize)
	var flags uint32
	for i, s := range shards {
		b := shardTable[i*shardSize:]
		le.PutUint64(b, uint64(names.Len()))
		names.WriteString(s.Name)
		le.PutUint16(b[8:], uint16(len(s.Name)))
		le.PutUint16(b[10:], uint16(s.Kind))
		if s.Version != "" {
			flags |= flagShardVersions
			names.WriteString(s.Version)
			le.PutUint32(b[12:], uint32(len(s.Version)))
		}
		le.PutUint64(b[16:], s.Size)
		le.PutUint32(b[24:], s.CRC)
	}

	v := uint32(versionPack)
	if slices.ContainsFunc(shards, func(s Shard) bool { return s.Kind == ShardTar }) {
		v = versionTars
	}
	var order []byte
	if v == versionTars {
		if noCRC {
			flags |= flagNoChecksums
		}
		if order = extentOrder(nodes); order != nil {
			flags |= flagExtentOrder
		}
	}
	out := make([]byte, headerSize, headerSize+len(entries)+len(shardTable)+names.Len()+len(order))
	copy(out, magic)
	le.PutUint32(out[8:], v)
	le.PutUint32(out[12:], flags)
	le.PutUint64(out[16:], uint64(len(nodes)))
	le.PutUint64(out[24:], uint64(len(shards)))
	for i, sec := range [numSections + 1][]byte{entries, shardTable, names.Bytes(), order} {
		d := out[32+24*i:]
		if i == numSections {
			if order == nil {
				break
			}
			d = out[orderDesc:]
		}
		le.PutUint64(d, uint64(len(out)))
		le.PutUint64(d[8:], uint64(len(sec)))
		le.PutUint32(d[16:], crc32.Checksum(sec, castagnoli))
		out = append(out, sec...)
	}
	le.PutUint32(out[124:], crc32.Checksum(out[:124], castagnoli))
	return out
}

// extentOrder returns the extent order section for nodes (id order), or nil when the files'
// extents ascend in id order without overlapping, so that version 1's rule holds.
func extentOrder(nodes []*node) []byte {
	var files []*node
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
	order := make([]byte, 4*len(files))
	for i, f := range files {
		le.PutUint32(order[4*i:], uint32(f.id))
	}
	return order
}
