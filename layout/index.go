// Package layout defines the aifs shard set: data shards holding sample bytes end to end, and one
// index describing the directory tree and where each sample lives. FORMAT.md is the specification;
// this package reads it (Index), writes it (Pack, via the index builder) and checks it (Verify).
//
// layout imports only the standard library. It knows nothing of FUSE, backends or caching: the
// index answers namespace questions from memory, and readers of shard bytes live elsewhere.
package layout

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/maphash"
	"math/bits"
	"os"
	"path"
	"sort"
	"strings"
	"unsafe"
)

// IndexName is the file name of the index inside a shard-set directory.
const IndexName = "index.aifs"

// ShardName returns the file name of data shard n.
func ShardName(n int) string { return fmt.Sprintf("shard-%06d.dat", n) }

const (
	magic        = "AIFSIDX\x00"
	versionPack  = 1 // what Pack writes, and all this aifs read before tar shards
	versionTars  = 2 // what IndexTars writes: tar shards, flags 2 and 4 (FORMAT.md)
	headerSize   = 128
	entrySize    = 47
	shardSize    = 32
	maxNameLen   = 255
	maxShardPath = 4095 // a tar shard's name is a path (PATH_MAX less its NUL)
	numSections  = 3    // in every version; version 2 adds the extent order, descriptor at orderDesc
	orderDesc    = 104  // version 2: {offset u64, length u64, crc32c u32} of the extent order

	// flagShardVersions: each shard record's u32 at offset 12 is the length of the shard's
	// version (an S3 ETag, a local tar's mtime), stored in the names section right after the
	// shard's name.
	flagShardVersions = 1
	// flagNoChecksums (version 2): the set was indexed without reading its data; the CRC32C
	// fields of entries and shards are zero and mean nothing.
	flagNoChecksums = 2
	// flagExtentOrder (version 2): the extent order section is present.
	flagExtentOrder = 4

	secEntries = 0
	secShards  = 1
	secNames   = 2

	// Field offsets within an entry record (FORMAT.md). The A and B fields hold a file's
	// offset and length, or a directory's first child and child count.
	eName    = 0  // u64 name offset
	eParent  = 8  // u32
	eMode    = 12 // u16
	eNameLen = 14 // u8: names are at most 255 bytes
	eMTime   = 15 // i64
	eA       = 23 // u64
	eB       = 31 // u64
	eShard   = 39 // u32
	eCRC     = 43 // u32

	modeTypeMask = 0o170000
	modeDir      = 0o040000
	modeRegular  = 0o100000
)

// ShardKind says what a shard file is.
type ShardKind uint16

const (
	// ShardData is a shard written by Pack: sample bytes end to end.
	ShardData ShardKind = 0
	// ShardTar is a tar file indexed in place (IndexTars): samples are its members' data. Its
	// name is a path, relative to the index's directory (or object prefix) or absolute.
	ShardTar ShardKind = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC32C of b: what Entry.CRC records for a sample's bytes.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// UpdateChecksum returns the CRC32C of the bytes summed in crc followed by b.
func UpdateChecksum(crc uint32, b []byte) uint32 { return crc32.Update(crc, castagnoli, b) }

// ErrCorrupt is wrapped by every error that reports an index or shard failing its checks.
var ErrCorrupt = errors.New("corrupt shard set")

// ID is an entry id: an index into the entry table. The root directory is 0.
type ID uint32

// Root is the id of the root directory.
const Root ID = 0

// Entry is one decoded entry. It is a value: decoding reads one record and allocates nothing.
type Entry struct {
	Parent ID
	Mode   uint32 // Unix st_mode: S_IFDIR or S_IFREG plus permission bits
	MTime  int64  // nanoseconds since the Unix epoch

	// Files only.
	Shard  uint32 // index into the shard table
	Offset uint64 // first byte in the shard
	Size   uint64 // content length
	CRC    uint32 // CRC32C of the content

	// Directories only: children are ids [FirstChild, FirstChild+NumChildren), sorted by name.
	FirstChild  ID
	NumChildren uint32
}

// IsDir reports whether the entry is a directory.
func (e Entry) IsDir() bool { return e.Mode&modeTypeMask == modeDir }

// Shard describes one shard file of the set.
type Shard struct {
	Name string
	Kind ShardKind
	Size uint64
	CRC  uint32 // CRC32C of the whole shard (zero when the set has no checksums)
	// Version identifies the stored bytes where the storage can replace an object under the same
	// name: the S3 ETag the upload (or the indexed tar) had, checked on every open and read; for a
	// local tar, its mtime in nanoseconds, in decimal, checked at open. Empty for local packed sets.
	Version string
}

// ShardPath returns where the shard lies for a set whose index is in directory dir (or under
// the object prefix dir): the name of a packed shard joined to dir; a tar's name joined to dir
// if relative, itself if absolute. Use it, not the name, to open a shard.
func ShardPath(dir string, s Shard) string {
	if s.Kind == ShardTar && path.IsAbs(s.Name) {
		return s.Name
	}
	return path.Join(dir, s.Name)
}

// Index is a loaded, validated index. It holds the file's bytes in one buffer and decodes entries
// on demand, so it costs the file size in memory plus the lookup table (8 bytes per entry) and
// nothing else per sample. It is immutable and safe for concurrent use.
type Index struct {
	entries []byte // E × entrySize
	names   []byte
	order   []byte   // version 2 with flagExtentOrder: the file ids in extent order, u32 each; else nil
	noCRC   bool     // flagNoChecksums
	sum     uint32   // the header's CRC32C (Identity)
	shards  []Shard  // S is small (one per GiB of data), so these are decoded once
	table   []uint32 // lookup table (see initTable): entry ids, 0 for an empty slot
	seed    maphash.Seed

	// Totals and directory runs, computed once by check and parseShards.
	files      int      // regular files
	fileBytes  uint64   // sum of the regular files' sizes
	shardBytes uint64   // sum of the shards' sizes
	dirRuns    []dirRun // every maximal run of consecutive directory ids, in id order
}

// dirRun is a maximal run [start, end) of consecutive directory ids; before counts the
// directories in the runs before it. Runs let NextFile and FileAt step over directories with a
// binary search instead of a scan: there is at most one per directory (one for an ImageFolder
// tree, whose class directories follow the root), 12 bytes each.
type dirRun struct{ start, end, before ID }

// Load reads and validates the index of the shard set in directory dir.
func Load(dir string) (*Index, error) {
	path := dir + "/" + IndexName
	buf, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s is not a shard set (no %s): %w", dir, IndexName, err)
		}
		return nil, fmt.Errorf("read index: %w", err)
	}
	x, err := Parse(buf)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return x, nil
}

// Parse validates an index held in buf and returns it. The Index keeps buf; the caller must not
// modify it afterwards. Parse allocates nothing in proportion to the entry count.
func Parse(buf []byte) (*Index, error) {
	if len(buf) < headerSize {
		return nil, corruptf("index is %d bytes, shorter than its %d-byte header", len(buf), headerSize)
	}
	h := buf[:headerSize]
	if string(h[:8]) != magic {
		return nil, corruptf("not an aifs index (bad magic %q)", h[:8])
	}
	if got, want := crc32.Checksum(h[:124], castagnoli), le.Uint32(h[124:]); got != want {
		return nil, corruptf("header checksum mismatch")
	}
	v, flags := le.Uint32(h[8:]), le.Uint32(h[12:])
	var known uint32 // the flags version v may set
	switch v {
	case versionPack:
		known = flagShardVersions
	case versionTars:
		known = flagShardVersions | flagNoChecksums | flagExtentOrder
	default:
		return nil, fmt.Errorf("index version %d is not supported (this aifs reads versions %d and %d)", v, versionPack, versionTars)
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
	if nEntries == 0 || nEntries != uint64(len(sec[secEntries]))/entrySize || len(sec[secEntries])%entrySize != 0 ||
		nEntries > 1<<32-1 {
		return nil, corruptf("entries section is %d bytes for %d entries", len(sec[secEntries]), nEntries)
	}
	// Compare by division: a hostile count could overflow the product.
	if nShards != uint64(len(sec[secShards]))/shardSize || len(sec[secShards])%shardSize != 0 {
		return nil, corruptf("shards section is %d bytes for %d shards", len(sec[secShards]), nShards)
	}
	x := &Index{entries: sec[secEntries], names: sec[secNames], order: sec[numSections], noCRC: flags&flagNoChecksums != 0,
		sum: le.Uint32(h[124:])}
	if err := x.parseShards(sec[secShards], int(nShards), flags&flagShardVersions != 0, v >= versionTars); err != nil {
		return nil, err
	}
	if err := x.check(); err != nil {
		return nil, err
	}
	return x, nil
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

// parseShards decodes the shard table; tarPaths (version 2) lets a tar's name be a path.
func (x *Index) parseShards(b []byte, n int, versions, tarPaths bool) error {
	x.shards = make([]Shard, n)
	seen := make(map[string]bool, n)
	for i := range x.shards {
		r := b[i*shardSize:]
		nameOff, nameLen := le.Uint64(r), uint64(le.Uint16(r[8:]))
		kind := ShardKind(le.Uint16(r[10:]))
		name, ok := x.nameAt(nameOff, nameLen)
		valid := ValidName
		if kind == ShardTar && tarPaths {
			valid = validShardPath
		}
		if !ok || !valid(name) {
			return corruptf("shard %d has an invalid name", i)
		}
		var version []byte
		if n := le.Uint32(r[12:]); versions && n > 0 {
			if version, ok = x.nameAt(nameOff+nameLen, uint64(n)); !ok || n > maxNameLen {
				return corruptf("shard %d has an invalid version", i)
			}
		} else if n != 0 {
			return corruptf("shard %d has nonzero reserved fields", i)
		}
		if kind != ShardData && kind != ShardTar || le.Uint32(r[28:]) != 0 {
			return corruptf("shard %d has unknown kind %d or nonzero reserved fields", i, kind)
		}
		s := Shard{Name: string(name), Kind: kind, Size: le.Uint64(r[16:]), CRC: le.Uint32(r[24:]), Version: string(version)}
		if seen[s.Name] {
			return corruptf("shard name %q appears twice", s.Name)
		}
		seen[s.Name] = true
		x.shards[i] = s
		x.shardBytes += s.Size
	}
	return nil
}

func (x *Index) nameAt(off, n uint64) ([]byte, bool) {
	if off > uint64(len(x.names)) || n > uint64(len(x.names))-off {
		return nil, false
	}
	return x.names[off : off+n], true
}

// ValidName reports whether name can be stored as a directory entry or shard name: 1 to 255
// bytes, not "." or "..", with no '/' or NUL. Any other bytes (any encoding) are allowed.
func ValidName(name []byte) bool {
	return len(name) > 0 && len(name) <= maxNameLen &&
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

// check applies the structural rules of FORMAT.md in one pass over the entries, and fills the
// lookup table. It bounds every offset before using it, so a hostile index yields an error,
// never a panic.
//
// Parent links need no lookups of their own: checkChildren proves that every entry in a
// directory's range names that directory as parent and comes after it, so ranges are disjoint;
// if their lengths add up to E-1, every entry but the root lies in exactly one range, its
// parent precedes it, and the tree is acyclic and connected.
func (x *Index) check() error {
	n := uint64(x.Len())
	if root := x.raw(Root); !root.IsDir() || root.Parent != Root || x.nameLen(Root) != 0 ||
		le.Uint64(x.entries) > uint64(len(x.names)) {
		return corruptf("entry 0 is not the root directory")
	}
	x.initTable(int(n))
	var inRanges uint64
	var lastShard uint32 // the extent of the file before, in id order: ids ascend in pack order
	var lastEnd uint64
	for i := uint64(0); i < n; i++ {
		b := x.entries[i*entrySize:]
		switch mode := uint32(le.Uint16(b[eMode:])); mode & modeTypeMask {
		case modeDir:
			count, err := x.checkChildren(ID(i), b)
			if err != nil {
				return err
			}
			inRanges += count
			if r := len(x.dirRuns) - 1; r >= 0 && x.dirRuns[r].end == ID(i) {
				x.dirRuns[r].end++
			} else {
				x.dirRuns = append(x.dirRuns, dirRun{start: ID(i), end: ID(i) + 1, before: ID(int(i) - x.files)})
			}
		case modeRegular:
			shard, off, size := le.Uint32(b[eShard:]), le.Uint64(b[eA:]), le.Uint64(b[eB:])
			if int(shard) >= len(x.shards) {
				return corruptf("file entry %d names shard %d of %d", i, shard, len(x.shards))
			}
			if sz := x.shards[shard].Size; off > sz || size > sz-off {
				return corruptf("file entry %d extent [%d,+%d) runs past the end of %s (%d bytes)",
					i, off, size, x.shards[shard].Name, sz)
			}
			if x.order == nil && (shard < lastShard || shard == lastShard && off < lastEnd) {
				return corruptf("file entry %d extent [%d,+%d) of %s overlaps or precedes the file before it (file ids ascend in pack order)",
					i, off, size, x.shards[shard].Name)
			}
			if x.noCRC && le.Uint32(b[eCRC:]) != 0 {
				return corruptf("file entry %d has a checksum in a set without checksums", i)
			}
			lastShard, lastEnd = shard, off+size
			x.files++
			x.fileBytes += size
		default:
			return corruptf("entry %d has unsupported mode %#o", i, mode)
		}
	}
	if inRanges != n-1 {
		return corruptf("directories list %d children for %d non-root entries", inRanges, n-1)
	}
	if x.order != nil {
		return x.checkOrder()
	}
	return nil
}

// checkOrder checks the extent order section (version 2): every file id exactly once, and
// along it each extent starts at or after the end of the one before in the same shard, shards
// ascending, or is the same extent with the same checksum (hard links in a tar). So it rejects
// every overlap the id-order rule rejects, only not in id order.
func (x *Index) checkOrder() error {
	if uint64(len(x.order)) != 4*uint64(x.files) {
		return corruptf("extent order section is %d bytes for %d files", len(x.order), x.files)
	}
	seen := make([]uint64, (x.Len()+63)/64)
	var last Entry
	for pos := range x.files {
		id := le.Uint32(x.order[4*pos:])
		if uint64(id) >= uint64(x.Len()) || seen[id/64]&(1<<(id%64)) != 0 || x.raw(ID(id)).IsDir() {
			return corruptf("extent order position %d names entry %d: not a file, or named twice", pos, id)
		}
		seen[id/64] |= 1 << (id % 64)
		e := x.raw(ID(id))
		same := pos > 0 && e.Shard == last.Shard && e.Offset == last.Offset && e.Size == last.Size && e.CRC == last.CRC
		if pos > 0 && !same && (e.Shard < last.Shard || e.Shard == last.Shard && e.Offset < last.Offset+last.Size) {
			return corruptf("file entry %d extent [%d,+%d) of %s overlaps or precedes the file before it in extent order",
				id, e.Offset, e.Size, x.shards[e.Shard].Name)
		}
		last = e
	}
	return nil
}

// checkChildren checks directory dir's child range (raw record b): inside the table, after dir,
// every child naming dir as parent, names valid and strictly ascending. It adds the children to
// the lookup table and returns their count.
func (x *Index) checkChildren(dir ID, b []byte) (uint64, error) {
	if le.Uint32(b[eShard:]) != 0 || le.Uint32(b[eCRC:]) != 0 {
		return 0, corruptf("directory entry %d has nonzero file fields", dir)
	}
	n, first, count := uint64(x.Len()), le.Uint64(b[eA:]), le.Uint64(b[eB:])
	if count == 0 {
		if first != 0 {
			return 0, corruptf("empty directory entry %d has first child %d", dir, first)
		}
		return 0, nil
	}
	if first <= uint64(dir) || first > n || count > n-first {
		return 0, corruptf("directory entry %d has child range [%d,+%d) outside the table", dir, first, count)
	}
	var prev []byte
	for c := first; c < first+count; c++ {
		r := x.entries[c*entrySize:]
		if ID(le.Uint32(r[eParent:])) != dir {
			return 0, corruptf("entry %d lies in the child range of %d but names parent %d", c, dir, le.Uint32(r[eParent:]))
		}
		name, ok := x.nameAt(le.Uint64(r), uint64(r[eNameLen]))
		if !ok || !ValidName(name) {
			return 0, corruptf("entry %d has an invalid name", c)
		}
		if prev != nil && bytes.Compare(prev, name) >= 0 {
			return 0, corruptf("children of directory %d are not strictly sorted at entry %d", dir, c)
		}
		prev = name
		x.insert(ID(first), uint32(count), uint32(c-first), name)
	}
	return count, nil
}

// The lookup table is an open-addressing hash table of children, built at load time and kept
// only in memory: 2 slots of 4 bytes per entry. Each directory owns the region of 2×count slots
// starting at 2×(first child - 1), so building it writes memory in order and a directory's
// probes stay in its region. A slot holds the child's position in the directory plus one (0 is
// empty) in its low bits.Len32(count) bits and a tag from the name's hash in the rest, so a probe
// reads the child's entry and name only when the tag matches.
//
// Measured on a 1.28 M-sample ImageNet-shaped index (BenchmarkIndexLookup, one core): binary
// search over sorted children ~22 cache misses, 0.9 M lookups/s; one table over the whole index
// 2.9 M/s but +80 ms of cache misses to build (BenchmarkIndexLoad); regions without tags 1.3 M/s.

func (x *Index) initTable(entries int) {
	x.table, x.seed = make([]uint32, 2*(entries-1)), maphash.MakeSeed()
}

// probe describes where a name's search starts in its directory's region.
type probe struct {
	region []uint32
	start  uint32
	shift  uint   // bits holding position+1
	tag    uint32 // expected slot value >> shift
}

func (x *Index) probeFor(first ID, count uint32, h uint64) probe {
	r := x.table[2*(first-1) : 2*(uint64(first)-1+uint64(count))]
	start, _ := bits.Mul64(h, uint64(len(r))) // maps h onto [0, len(r)) without a division
	shift := uint(bits.Len32(count))
	return probe{region: r, start: uint32(start), shift: shift, tag: uint32(h>>32) >> shift}
}

// insert adds the child at position pos of a directory; check has proved names unique in it.
func (x *Index) insert(first ID, count, pos uint32, name []byte) {
	p := x.probeFor(first, count, maphash.Bytes(x.seed, name))
	i := p.start
	for p.region[i] != 0 {
		if i++; int(i) == len(p.region) {
			i = 0
		}
	}
	p.region[i] = pos + 1 | p.tag<<p.shift
}

// Len returns the number of entries, directories included.
func (x *Index) Len() int { return len(x.entries) / entrySize }

// Files returns the number of regular files (samples): Len less the directories.
func (x *Index) Files() int { return x.files }

// FileBytes returns the sum of the regular files' sizes.
func (x *Index) FileBytes() uint64 { return x.fileBytes }

// Shards returns the shard table. The caller must not modify it.
func (x *Index) Shards() []Shard { return x.shards }

// ShardBytes returns the sum of the shards' sizes: FileBytes for a set written by Pack, which
// packs samples densely.
func (x *Index) ShardBytes() uint64 { return x.shardBytes }

// NextFile returns the first regular file after id in pack order (id need not be a file), or
// Len() if there is none. It costs one entry read, and a binary search over the runs of
// directories when it lands on one; it allocates nothing.
func (x *Index) NextFile(id ID) ID {
	if n := ID(x.Len()); id >= n-1 {
		return n // also where id+1 would wrap
	}
	return x.fileFrom(id + 1)
}

// FileAt returns the i-th regular file in pack order, counting from 0, as a plan's indices
// count samples. It panics unless 0 <= i < Files(). It is a binary search over the runs of
// directories and allocates nothing.
func (x *Index) FileAt(i int) ID {
	if i < 0 || i >= x.files {
		panic(fmt.Sprintf("layout: FileAt(%d) of %d files", i, x.files))
	}
	// Files before run r: r.start - r.before, strictly increasing in r (runs are maximal). The
	// file sits after the last run that starts with at most i files before it; run 0 holds the
	// root, so there is one.
	r := x.dirRuns[sort.Search(len(x.dirRuns), func(k int) bool {
		return int(x.dirRuns[k].start-x.dirRuns[k].before) > i
	})-1]
	return ID(i) + r.before + (r.end - r.start)
}

// Entry decodes entry id. It panics if id is out of range; ids from this Index are always valid.
func (x *Index) Entry(id ID) Entry { return x.raw(id) }

// ByExtent returns the file at position pos of extent order: files sorted by shard, then by
// offset, as they lie in storage (0 <= pos < Files()). For a packed set this is id order
// (FileAt); a tar set may store another (FORMAT.md, version 2), in which hard links are
// adjacent. It allocates nothing.
func (x *Index) ByExtent(pos int) ID {
	if x.order != nil {
		return ID(le.Uint32(x.order[4*pos:]))
	}
	return x.FileAt(pos)
}

// ExtentPos returns the first position in extent order (ByExtent) whose file's extent starts
// in shard at or after off, or Files() if there is none: a binary search that allocates
// nothing. Walk on from it to find the files lying in a range of a shard.
func (x *Index) ExtentPos(shard uint32, off uint64) int {
	return sort.Search(x.files, func(pos int) bool {
		e := x.raw(x.ByExtent(pos))
		return e.Shard > shard || e.Shard == shard && e.Offset >= off
	})
}

// Identity returns the CRC32C of the index file's header, which covers the checksum of every
// section: two indexes with the same identity describe the same set (up to a CRC collision).
// The locations file of a mount carries it, so a reader can tell that a set was remounted with
// another index.
func (x *Index) Identity() uint32 { return x.sum }

// Checksums reports whether the entries' CRC32C fields hold checksums: false for a tar set
// indexed without reading its data (aifs index --no-checksums).
func (x *Index) Checksums() bool { return !x.noCRC }

// fileFrom returns the first regular file at or after id, or Len() if none. A directory lies
// in a run whose end is a file or Len().
func (x *Index) fileFrom(id ID) ID {
	if n := ID(x.Len()); id >= n || le.Uint16(x.entries[int(id)*entrySize+eMode:])&modeTypeMask != modeDir {
		return min(id, n)
	}
	return x.dirRuns[sort.Search(len(x.dirRuns), func(k int) bool { return x.dirRuns[k].end > id })].end
}

func (x *Index) raw(id ID) Entry {
	b := x.entries[int(id)*entrySize : int(id+1)*entrySize]
	e := Entry{
		Parent: ID(le.Uint32(b[eParent:])),
		Mode:   uint32(le.Uint16(b[eMode:])),
		MTime:  int64(le.Uint64(b[eMTime:])),
	}
	if e.IsDir() {
		// Stored as u64; check() bounds them by the table size, so the narrowing is exact.
		e.FirstChild, e.NumChildren = ID(le.Uint64(b[eA:])), uint32(le.Uint64(b[eB:]))
	} else {
		e.Offset, e.Size, e.Shard, e.CRC = le.Uint64(b[eA:]), le.Uint64(b[eB:]), le.Uint32(b[eShard:]), le.Uint32(b[eCRC:])
	}
	return e
}

func (x *Index) nameLen(id ID) uint8 { return x.entries[int(id)*entrySize+eNameLen] }

func (x *Index) nameUnchecked(id ID) []byte {
	off := le.Uint64(x.entries[int(id)*entrySize:])
	return x.names[off : off+uint64(x.nameLen(id))]
}

// Name returns the name bytes of entry id (empty for the root). The slice aliases the index and
// must not be modified.
func (x *Index) Name(id ID) []byte { return x.nameUnchecked(id) }

// Lookup finds the child of directory dir called name through the lookup table, without
// allocating. It returns false if dir is not a directory or has no such child.
func (x *Index) Lookup(dir ID, name string) (ID, bool) {
	d := x.raw(dir)
	if !d.IsDir() || d.NumChildren == 0 {
		return 0, false
	}
	p := x.probeFor(d.FirstChild, d.NumChildren, maphash.String(x.seed, name))
	for i := p.start; p.region[i] != 0; {
		if s := p.region[i]; s>>p.shift == p.tag {
			id := d.FirstChild + ID(s&(1<<p.shift-1)) - 1
			if string(x.nameUnchecked(id)) == name { // string(b) in a comparison does not copy
				return id, true
			}
		}
		if i++; int(i) == len(p.region) {
			i = 0
		}
	}
	return 0, false
}

// LookupPath resolves a slash-separated path relative to the root: empty and "." components
// are skipped, so "", "." and "/" are the root and "a//b/" is "a/b"; ".." is looked up as a
// name (and never found). It allocates nothing.
func (x *Index) LookupPath(path string) (ID, bool) {
	id := Root
	for path != "" {
		var part string
		part, path, _ = strings.Cut(path, "/")
		if part == "" || part == "." {
			continue
		}
		var ok bool
		if id, ok = x.Lookup(id, part); !ok {
			return 0, false
		}
	}
	return id, true
}

// LookupPathBytes is LookupPath for a path held in bytes (a line of a plan), without copying
// it and without allocating. It keeps no reference to path.
func (x *Index) LookupPathBytes(path []byte) (ID, bool) {
	return x.LookupPath(unsafe.String(unsafe.SliceData(path), len(path)))
}

// Path returns the slash-separated path of id relative to the root ("" for the root). It
// allocates; use it for messages, not on the read path.
func (x *Index) Path(id ID) string {
	var parts [][]byte
	for ; id != Root; id = x.raw(id).Parent {
		parts = append(parts, x.Name(id))
	}
	var b strings.Builder
	for i := len(parts) - 1; i >= 0; i-- {
		b.Write(parts[i])
		if i > 0 {
			b.WriteByte('/')
		}
	}
	return b.String()
}
