package fs

import (
	"encoding/binary"
	"math"

	"github.com/aifs/aifs/layout"
)

// The locations file, /.aifs/locations, says where every entry's bytes lie, so that a process
// can order or read samples by their place in the shards without a request per file
// (python/aifs_plan.py's DistributedSampler gives each node a contiguous range of the shards
// with it; docs/multinode.md). It is generated from the index on demand: a READ decodes the
// records it covers, so the file costs no memory, and its bytes never change while mounted.
//
// Format, version 1 (little-endian):
//
//	offset  size  field
//	0       8     magic "AIFSLOC\x00"
//	8       4     version = 1
//	12      4     record size = 24
//	16      8     records R: one per index entry; entry id i (inode number i+1) is record i
//	24      8     shard table offset T = 64 + 24·R
//	32      4     shards S
//	36      4     identity: the index's CRC32C of its header (layout.Index.Identity); a set
//	              remounted with another index has another identity
//	40      24    reserved, zero
//	64            records: offset u64, size u64, shard u32, crc32c u32 of the file's bytes
//	              (offset into shard number shard; crc32c 0 where the set has no checksums
//	              or the file's is a ZIP's CRC-32, layout.CRC32IEEE);
//	              a directory has shard 0xFFFFFFFF and zeros
//	T             shard table: S times {size u64, name length u16, name}, the names as the
//	              index holds them (layout.ShardPath resolves them against the source)
//	              then the source: length u16, the SRC the mount was given
const (
	locationsName    = "locations"
	locMagic         = "AIFSLOC\x00"
	locVersion       = 1
	locHeader        = 64
	locRecord        = 24
	locNoShard       = math.MaxUint32
	locMaxSourceName = math.MaxUint16
)

// locations serves the locations file of one index. Immutable after newLocations.
type locations struct {
	x    *layout.Index
	head [locHeader]byte
	tail []byte // the shard table and the source
}

func newLocations(x *layout.Index, source string) *locations {
	l := &locations{x: x}
	n := uint64(x.Len())
	le := binary.LittleEndian
	copy(l.head[:], locMagic)
	le.PutUint32(l.head[8:], locVersion)
	le.PutUint32(l.head[12:], locRecord)
	le.PutUint64(l.head[16:], n)
	le.PutUint64(l.head[24:], locHeader+locRecord*n)
	le.PutUint32(l.head[32:], uint32(len(x.Shards())))
	le.PutUint32(l.head[36:], x.Identity())
	for _, s := range x.Shards() {
		l.tail = le.AppendUint64(l.tail, s.Size)
		l.tail = le.AppendUint16(l.tail, uint16(len(s.Name))) // at most 255 bytes (layout)
		l.tail = append(l.tail, s.Name...)
	}
	if len(source) > locMaxSourceName {
		source = "" // no path is this long; the field is informative
	}
	l.tail = le.AppendUint16(l.tail, uint16(len(source)))
	l.tail = append(l.tail, source...)
	return l
}

// size returns the file's length.
func (l *locations) size() uint64 {
	return locHeader + locRecord*uint64(l.x.Len()) + uint64(len(l.tail))
}

// read copies the file's bytes at off into buf and returns how many; it allocates nothing. It
// fails where an entry's block of the index failed its checks (layout.Index.Err), rather than
// give that entry a record of zeros.
func (l *locations) read(off uint64, buf []byte) (int, error) {
	n := 0
	if off < locHeader {
		n = copy(buf, l.head[off:])
	}
	end := locHeader + locRecord*uint64(l.x.Len())
	var rec [locRecord]byte
	for n < len(buf) && off+uint64(n) < end {
		pos := off + uint64(n) - locHeader
		if !l.record(layout.ID(pos/locRecord), &rec) {
			return 0, l.x.Err()
		}
		n += copy(buf[n:], rec[pos%locRecord:])
	}
	if p := off + uint64(n); n < len(buf) && p >= end && p-end < uint64(len(l.tail)) {
		n += copy(buf[n:], l.tail[p-end:])
	}
	return n, nil
}

// record encodes entry id's record into rec, or reports that its block failed its checks.
func (l *locations) record(id layout.ID, rec *[locRecord]byte) bool {
	e := l.x.Entry(id)
	if e.Mode == 0 {
		return false
	}
	*rec = [locRecord]byte{}
	le := binary.LittleEndian
	if e.IsDir() {
		le.PutUint32(rec[16:], locNoShard)
		return true
	}
	le.PutUint64(rec[0:], e.Offset)
	le.PutUint64(rec[8:], e.Size)
	le.PutUint32(rec[16:], e.Shard)
	if l.x.Shards()[e.Shard].Checksum == layout.CRC32C { // the file's field is CRC32C, 0 for none
		le.PutUint32(rec[20:], e.CRC)
	}
	return true
}
