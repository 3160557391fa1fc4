package layout

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// u40 and put40 read and write the 40-bit little-endian fields of version 3 entries.
func u40(b []byte) uint64 { return uint64(le.Uint32(b)) | uint64(b[4])<<32 }

func put40(b []byte, v uint64) {
	le.PutUint32(b, uint32(v))
	b[4] = byte(v >> 32)
}

// parseBlocks checks a version 3 index's header and small sections (shards, block checksums,
// directory runs), reading them through fill when buf is not yet whole, and leaves the blocks of
// the others to be read and checked on first use.
func parseBlocks(buf []byte, fill func(off int64, b []byte) error) (*Index, error) {
	if len(buf) < headerSize3 {
		return nil, corruptf("index is %d bytes, shorter than its %d-byte header", len(buf), headerSize3)
	}
	h := buf[:headerSize3]
	if got, want := crc32.Checksum(h[:252], castagnoli), le.Uint32(h[252:]); got != want {
		return nil, corruptf("header checksum mismatch")
	}
	flags := le.Uint32(h[12:])
	if flags&^(flagShardVersions|flagNoChecksums|flagExtentOrder) != 0 {
		return nil, corruptf("unknown header flags %#x", flags)
	}
	if !allZero(h[h3Reserved:252]) {
		return nil, corruptf("nonzero reserved header bytes")
	}
	nEntries, nShards := le.Uint64(h[16:]), le.Uint64(h[24:])
	perBlock, blockBytes := uint64(le.Uint32(h[h3PerBlock:])), uint64(le.Uint32(h[h3BlockBytes:]))
	if perBlock == 0 || perBlock > 1<<20 || perBlock&(perBlock-1) != 0 ||
		blockBytes < 64 || blockBytes > 1<<24 || blockBytes&(blockBytes-1) != 0 {
		return nil, corruptf("block sizes %d entries and %d bytes are not powers of two in range", perBlock, blockBytes)
	}
	secText := [s3Count]string{"entries", "shards", "names", "lookup table", "extent order", "block checksums", "directory runs"}
	var sec [s3Count][]byte
	var offs [s3Count]int64
	for i := range sec {
		d := h[h3Desc+h3DescSize*i:]
		off, n, sum := le.Uint64(d), le.Uint64(d[8:]), le.Uint32(d[16:])
		if off < headerSize3 || off > uint64(len(buf)) || n > uint64(len(buf))-off {
			return nil, corruptf("%s section [%d,+%d) lies outside the %d-byte file", secText[i], off, n, len(buf))
		}
		// The sections read by blocks are covered by the block checksums, not a sum of their own.
		if lazy := i == s3Entries || i == s3Names || i == s3Table || i == s3Order; lazy && sum != 0 || le.Uint32(d[20:]) != 0 {
			return nil, corruptf("%s section descriptor has nonzero reserved fields", secText[i])
		}
		sec[i], offs[i] = buf[off:off+n], int64(off)
		if i == s3Shards || i == s3Sums || i == s3Runs {
			if fill != nil {
				if err := fill(offs[i], sec[i]); err != nil {
					return nil, err
				}
			}
			if crc32.Checksum(sec[i], castagnoli) != sum {
				return nil, corruptf("%s section checksum mismatch", secText[i])
			}
		}
	}
	if err := checkCounts(nEntries, nShards, sec[s3Entries], sec[s3Shards], entrySize); err != nil {
		return nil, err
	}
	x := &Index{entries: sec[s3Entries], names: sec[s3Names], table: sec[s3Table], noCRC: flags&flagNoChecksums != 0,
		sum: le.Uint32(h[252:]), fileBytes: le.Uint64(h[h3FileBytes:]), size: uint64(len(buf)),
		small: headerSize3 + uint64(len(sec[s3Shards])+len(sec[s3Sums])+len(sec[s3Runs]))}
	if flags&flagExtentOrder != 0 {
		x.order = sec[s3Order]
	} else if len(sec[s3Order]) != 0 {
		return nil, corruptf("extent order section without its flag")
	}
	if err := x.parseRuns(sec[s3Runs], le.Uint64(h[h3Files:])); err != nil {
		return nil, err
	}
	if uint64(len(x.table)) != 4*tableSlots(nEntries) {
		return nil, corruptf("lookup table section is %d bytes for %d entries", len(x.table), nEntries)
	}
	if x.order != nil && uint64(len(x.order)) != 4*uint64(x.files) {
		return nil, corruptf("extent order section is %d bytes for %d files", len(x.order), x.files)
	}
	x.v = newBlocks(x, perBlock, blockBytes, sec[s3Sums], fill,
		[4]int64{offs[s3Entries], offs[s3Names], offs[s3Table], offs[s3Order]})
	if x.v == nil {
		return nil, corruptf("block checksums section is %d bytes, not 4 per block", len(sec[s3Sums]))
	}
	if err := x.parseShards(sec[s3Shards], int(nShards), flags&flagShardVersions != 0, true); err != nil {
		return nil, err
	}
	return x, nil
}

// parseRuns decodes the directory runs section (version 3): {start, end} u32 pairs, ascending,
// maximal (a gap of files between runs), the first holding the root; files is the header's count,
// which must be the entries the runs leave.
func (x *Index) parseRuns(b []byte, files uint64) error {
	n := uint64(x.Len())
	if len(b)%8 != 0 || len(b) == 0 {
		return corruptf("directory runs section is %d bytes", len(b))
	}
	var dirs uint64
	for i := 0; i < len(b); i += 8 {
		start, end := uint64(le.Uint32(b[i:])), uint64(le.Uint32(b[i+4:]))
		prevEnd := uint64(0)
		if k := len(x.dirRuns); k > 0 {
			prevEnd = uint64(x.dirRuns[k-1].end) + 1 // a gap of at least one file
		}
		if start >= end || end > n || i == 0 && start != 0 || i > 0 && start < prevEnd {
			return corruptf("directory run %d [%d,%d) is out of order or range", i/8, start, end)
		}
		x.dirRuns = append(x.dirRuns, dirRun{start: ID(start), end: ID(end), before: ID(dirs)})
		dirs += end - start
	}
	if n-dirs != files {
		return corruptf("header counts %d files but the directory runs leave %d", files, n-dirs)
	}
	x.files = int(files)
	return nil
}

var le = binary.LittleEndian

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// parseShards decodes the shard table; tarPaths (version 2) lets a tar's name be a path. A
// shard's checksum kind (the first reserved byte of versions 1 and 2) is CRC32C but for a file
// indexed in place, whose CRC is then zero.
func (x *Index) parseShards(b []byte, n int, versions, tarPaths bool) error {
	x.shards = make([]Shard, n)
	seen := make(map[string]bool, n)
	for i := range x.shards {
		r := b[i*shardSize:]
		nameOff, nameLen := le.Uint64(r), uint64(le.Uint16(r[8:]))
		kind := ShardKind(le.Uint16(r[10:]))
		name, err := x.checkedName(nameOff, nameLen)
		valid := ValidName
		if kind == ShardTar && tarPaths {
			valid = validShardPath
		}
		if err != nil && err != errBadName {
			return err
		}
		if err != nil || !valid(name) {
			return corruptf("shard %d has an invalid name", i)
		}
		var version []byte
		if n := le.Uint32(r[12:]); versions && n > 0 {
			if version, err = x.checkedName(nameOff+nameLen, uint64(n)); err != nil && err != errBadName {
				return err
			} else if err != nil || n > MaxNameLen {
				return corruptf("shard %d has an invalid version", i)
			}
		} else if n != 0 {
			return corruptf("shard %d has nonzero reserved fields", i)
		}
		if kind != ShardData && kind != ShardTar || le.Uint32(r[28:])&^0xff != 0 {
			return corruptf("shard %d has unknown kind %d or nonzero reserved fields", i, kind)
		}
		s := Shard{Name: string(name), Kind: kind, Size: le.Uint64(r[16:]), CRC: le.Uint32(r[24:]), Version: string(version),
			Checksum: ChecksumKind(r[28])}
		if s.Checksum > CRC32IEEE || s.Checksum != CRC32C && (kind != ShardTar || s.CRC != 0) {
			return corruptf("shard %d has checksum kind %d, which a shard of kind %d with checksum %08x cannot have", i, s.Checksum, kind, s.CRC)
		}
		if seen[s.Name] {
			return corruptf("shard name %q appears twice", s.Name)
		}
		seen[s.Name] = true
		x.shards[i] = s
		x.shardBytes += s.Size
	}
	return nil
}

// ValidName reports whether name can be stored as a directory entry or shard name: 1 to 255
// bytes, not "." or "..", with no '/' or NUL. Any other bytes (any encoding) are allowed.
func ValidName(name []byte) bool {
	return len(name) > 0 && len(name) <= MaxNameLen &&
		!(len(name) == 1 && name[0] == '.') && !(len(name) == 2 && name[0] == '.' && name[1] == '.') &&
		bytes.IndexByte(name, '/') < 0 && bytes.IndexByte(name, 0) < 0
}

// validShardPath reports whether name can be a tar shard's path: 1 to maxShardPath bytes, no
// NUL, not ending in '/', and no empty, "." or ".." component except leading ".." of a relative
// path (a tar beside the index's directory), so each tar has one spelling.
func validShardPath(name []byte) bool {
	if len(name) == 0 || len(name) > maxShardPath || bytes.IndexByte(name, 0) >= 0 {
		return false
	}
	rest, ups := name, true
	if rest[0] == '/' {
		rest, ups = rest[1:], false
	}
	for _, part := range bytes.Split(rest, []byte("/")) {
		switch string(part) {
		case "..":
			if !ups {
				return false
			}
		case "", ".":
			return false
		default:
			ups = false
		}
	}
	return true
}
