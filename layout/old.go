package layout

import (
	"hash/crc32"
)

// Versions 1 and 2 (FORMAT.md): a 128-byte header with three section descriptors at 32 (and
// version 2's extent order at orderDesc), and entry records of oldEntrySize bytes whose fields,
// each as wide as its type, lie at the offsets below: u64 name offset, u32 parent, u16 mode, u8
// name length, i64 mtime, u64 A, u64 B, u32 shard, u32 CRC32C.
const (
	headerSize   = 128
	numSections  = 3   // entries, shards, names; version 2 adds the extent order
	orderDesc    = 104 // version 2: {offset u64, length u64, crc32c u32} of the extent order
	oldEntrySize = 47

	secEntries, secShards, secNames = 0, 1, 2

	oldEName, oldEParent, oldEMode, oldENameLen, oldEMTime, oldEA, oldEB, oldEShard, oldECRC = 0, 8, 12, 14, 15, 23, 31, 39, 43
)

// parseOld checks a version 1 or 2 index whole: section checksums, then every block's rules
// (validate.go) and the lookup table, built in memory.
func parseOld(buf []byte) (*Index, error) {
	h := buf[:headerSize]
	if got, want := crc32.Checksum(h[:124], castagnoli), le.Uint32(h[124:]); got != want {
		return nil, corruptf("header checksum mismatch")
	}
	v, flags := le.Uint32(h[8:]), le.Uint32(h[12:])
	known := uint32(flagShardVersions) // the flags version v may set
	if v == versionTars {
		known |= flagNoChecksums | flagExtentOrder
	}
	if flags&^known != 0 {
		return nil, corruptf("unknown header flags %#x", flags)
	}
	nEntries, nShards := le.Uint64(h[16:]), le.Uint64(h[24:])
	var sec [numSections + 1][]byte // and the extent order
	secNamesText := [numSections + 1]string{"entries", "shards", "names", "extent order"}
	for i := range sec {
		d := h[32+24*i:]
		if i == numSections {
			if flags&flagExtentOrder == 0 {
				if !allZero(h[orderDesc:124]) {
					return nil, corruptf("nonzero reserved header bytes")
				}
				break
			}
			d = h[orderDesc:]
		}
		off, n, sum := le.Uint64(d), le.Uint64(d[8:]), le.Uint32(d[16:])
		if off < headerSize || off > uint64(len(buf)) || n > uint64(len(buf))-off {
			return nil, corruptf("%s section [%d,+%d) lies outside the %d-byte file", secNamesText[i], off, n, len(buf))
		}
		sec[i] = buf[off : off+n]
		if crc32.Checksum(sec[i], castagnoli) != sum {
			return nil, corruptf("%s section checksum mismatch", secNamesText[i])
		}
	}
	if err := checkCounts(nEntries, nShards, sec[secEntries], sec[secShards], oldEntrySize); err != nil {
		return nil, err
	}
	entries, err := convertOld(sec[secEntries])
	if err != nil {
		return nil, err
	}
	x := &Index{entries: entries, names: sec[secNames], order: sec[numSections], noCRC: flags&flagNoChecksums != 0,
		sum: le.Uint32(h[124:]), size: uint64(len(buf))}
	x.countOld()
	if x.order != nil && uint64(len(x.order)) != 4*uint64(x.files) {
		return nil, corruptf("extent order section is %d bytes for %d files", len(x.order), x.files)
	}
	// Everything is in buf and its checksums held: the blocks need only their rules checked.
	x.v = newBlocks(x, defaultPerBlock, defaultBlockBytes, nil, nil, [4]int64{})
	x.v.allRead()
	if err := x.parseShards(sec[secShards], int(nShards), flags&flagShardVersions != 0, v >= versionTars); err != nil {
		return nil, err
	}
	if err := x.CheckAll(); err != nil {
		return nil, err
	}
	x.buildTable()
	x.v = nil
	return x, nil
}

func checkCounts(nEntries, nShards uint64, entries, shards []byte, recordSize int) error {
	if nEntries == 0 || nEntries != uint64(len(entries))/uint64(recordSize) || len(entries)%recordSize != 0 ||
		nEntries > 1<<32-1 {
		return corruptf("entries section is %d bytes for %d entries", len(entries), nEntries)
	}
	// Compare by division: a hostile count could overflow the product.
	if nShards != uint64(len(shards))/shardSize || len(shards)%shardSize != 0 {
		return corruptf("shards section is %d bytes for %d shards", len(shards), nShards)
	}
	return nil
}

// convertOld returns the entry records of a version 1 or 2 index in version 3's form, so that
// one decoder serves every version. A name offset or file size beyond version 3's 40 bits
// (1 TiB) is refused.
func convertOld(old []byte) ([]byte, error) {
	out := make([]byte, len(old)/oldEntrySize*entrySize)
	for i := range len(old) / oldEntrySize {
		o, r := old[i*oldEntrySize:], out[i*entrySize:]
		nameOff, b := le.Uint64(o[oldEName:]), le.Uint64(o[oldEB:])
		if nameOff > maxU40 {
			return nil, corruptf("entry %d has an invalid name", i)
		}
		if b > maxU40 {
			return nil, corruptf("entry %d has a size or child count of %d, over 1 TiB: it runs past the end of any shard, or outside the table", i, b)
		}
		put40(r[eName:], nameOff)
		r[eNameLen] = o[oldENameLen]
		copy(r[eParent:eParent+4], o[oldEParent:])
		copy(r[eMode:eMode+2], o[oldEMode:])
		copy(r[eMTime:eMTime+8], o[oldEMTime:])
		copy(r[eA:eA+8], o[oldEA:])
		put40(r[eB:], b)
		copy(r[eShard:eShard+4], o[oldEShard:])
		copy(r[eCRC:eCRC+4], o[oldECRC:])
		// A directory's hint: where its first child's name lies (Lookup's guess), when the
		// fields are what version 1 requires (zero) and the child is in the table.
		if le.Uint16(o[oldEMode:])&ModeType == ModeDir && le.Uint64(o[oldEShard:]) != 0 {
			return nil, corruptf("directory entry %d has nonzero file fields", i)
		}
		if le.Uint16(o[oldEMode:])&ModeType == ModeDir {
			if first := le.Uint64(o[oldEA:]); b > 0 && first < uint64(len(old)/oldEntrySize) {
				c := old[first*oldEntrySize:]
				if off := le.Uint64(c[oldEName:]); off <= maxU40 {
					put40(r[eHint:], off)
					r[eHint+5] = c[oldENameLen]
				}
			}
		}
	}
	return out, nil
}

// countOld computes the totals and directory runs of a version 1 or 2 index from its modes (the
// block checks then hold every entry to them).
func (x *Index) countOld() {
	for i := range x.Len() {
		b := x.entries[i*entrySize:]
		if le.Uint16(b[eMode:])&ModeType != ModeDir {
			x.files++
			x.fileBytes += u40(b[eB:])
			continue
		}
		if r := len(x.dirRuns) - 1; r >= 0 && x.dirRuns[r].end == ID(i) {
			x.dirRuns[r].end++
		} else {
			x.dirRuns = append(x.dirRuns, dirRun{start: ID(i), end: ID(i) + 1, before: ID(i - x.files)})
		}
	}
}
