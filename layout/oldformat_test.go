package layout

import (
	"bytes"
	"hash/crc32"
	"slices"
)

// The writer of versions 1 and 2, kept to test that sets written before version 3 still load
// and are checked as before.

// encodeOld returns the version 1 or 2 index file (as aifs wrote before version 3) for nodes (in id order, as number returns them) and shards:
// version 1 for packed shards, version 2 with tar shards, then with the extent order when id
// order is not it, and flagged as having no checksums if noCRC.
func encodeOld(nodes []*Node, shards []Shard, noCRC bool) []byte {
	var names bytes.Buffer
	entries := make([]byte, len(nodes)*oldEntrySize)
	for i, n := range nodes {
		b := entries[i*oldEntrySize:]
		le.PutUint64(b, uint64(names.Len()))
		names.WriteString(n.Name)
		le.PutUint32(b[oldEParent:], uint32(n.Parent))
		le.PutUint16(b[oldEMode:], uint16(n.Mode))
		b[oldENameLen] = uint8(len(n.Name))
		le.PutUint64(b[oldEMTime:], uint64(n.MTime))
		if n.IsDir() {
			if len(n.Children) > 0 {
				le.PutUint64(b[oldEA:], uint64(n.Children[0].ID))
				le.PutUint64(b[oldEB:], uint64(len(n.Children)))
			}
			continue
		}
		le.PutUint64(b[oldEA:], n.Offset)
		le.PutUint64(b[oldEB:], n.Size)
		le.PutUint32(b[oldEShard:], n.Shard)
		le.PutUint32(b[oldECRC:], n.CRC)
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
		if ids := extentOrder(nodes); ids != nil {
			order = make([]byte, 4*len(ids))
			for i, id := range ids {
				le.PutUint32(order[4*i:], uint32(id))
			}
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
