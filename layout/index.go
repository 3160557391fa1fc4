package layout

import (
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"iter"
	"math"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"
	"unsafe"
)

// IndexName is the file name of the index inside a shard-set directory.
const IndexName = "index.aifs"

// shardNameFormat is the form of a data shard's file name (FORMAT.md).
const shardNameFormat = "shard-%06d.dat"

// ShardName returns the file name of data shard n.
func ShardName(n int) string { return fmt.Sprintf(shardNameFormat, n) }

// IsShardName reports whether name is a data shard's file name, as ShardName gives it.
func IsShardName(name string) bool {
	var n int
	_, err := fmt.Sscanf(name, shardNameFormat, &n)
	return err == nil && ShardName(n) == name
}

// MaxNameLen is the longest name an entry may have, in bytes (FORMAT.md).
const MaxNameLen = 255

// The Unix st_mode bits an entry's Mode holds: its type under ModeType, ModeDir or ModeRegular,
// with the permission bits.
const (
	ModeType    = 0o170000
	ModeDir     = 0o040000
	ModeRegular = 0o100000
)

const (
	magic         = "AIFSIDX\x00"
	versionPack   = 1   // what Pack wrote before version 3
	versionTars   = 2   // what IndexTars wrote before version 3: tar shards, flags 2 and 4
	versionBlocks = 3   // what this aifs writes: checked block by block on first use (FORMAT.md)
	headerSize3   = 256 // version 3
	entrySize     = 41  // version 3; versions 1 and 2 have records of oldEntrySize, converted at load
	shardSize     = 32
	maxShardPath  = 4095 // a tar shard's name is a path (PATH_MAX less its NUL)

	// flagShardVersions: each shard record's u32 at offset 12 is the length of the shard's
	// version (an S3 ETag, a local tar's mtime), stored in the names section right after the
	// shard's name.
	flagShardVersions = 1
	// flagNoChecksums (versions 2, 3): the set was indexed without reading its data; the CRC32C
	// fields of entries and shards are zero and mean nothing.
	flagNoChecksums = 2
	// flagExtentOrder (versions 2, 3): the extent order section is present.
	flagExtentOrder = 4

	// Version 3's header (FORMAT.md): totals, block sizes, then seven section descriptors of
	// {offset u64, length u64, crc32c u32, reserved u32}.
	h3Files      = 32
	h3FileBytes  = 40
	h3PerBlock   = 48 // u32: entries per block of the entries section
	h3BlockBytes = 52 // u32: bytes per block of the names, table and order sections
	h3Desc       = 56
	h3DescSize   = 24
	h3Reserved   = h3Desc + s3Count*h3DescSize // zero up to the header's CRC at 252

	// Field offsets within a version 3 entry record (FORMAT.md). The A and B fields hold a
	// file's offset and length, or a directory's first child and child count.
	eName    = 0  // u40 name offset
	eNameLen = 5  // u8: names are at most 255 bytes
	eParent  = 6  // u32
	eMode    = 10 // u16
	eMTime   = 12 // i64
	eA       = 20 // u64
	eB       = 28 // u40
	eShard   = 33 // u32
	eCRC     = 37 // u32
	eHint    = 33 // dir: u40 offset of its first child's name, u8 that name's length, 2 bytes 0
	maxU40   = 1<<40 - 1
)

// Version 3's sections, in descriptor order.
const (
	s3Entries = iota
	s3Shards
	s3Names
	s3Table
	s3Order
	s3Sums
	s3Runs
	s3Count
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

// ChecksumKind says which checksum the CRC fields of a shard's files hold (Shard.Checksum).
type ChecksumKind uint8

const (
	// CRC32C is the CRC32C of a file's bytes (Checksum), and Shard.CRC the whole shard's: what
	// aifs computes when it packs or indexes.
	CRC32C ChecksumKind = 0
	// CRC32IEEE is CRC-32/IEEE (as ZIP, gzip and PNG compute it) of a file's bytes, as a ZIP's
	// central directory records it, so a ZIP is indexed without reading its data. The shard has
	// no checksum of its own: Shard.CRC is zero, and its size and Version stand for it.
	CRC32IEEE ChecksumKind = 1
)

// Update returns the checksum of kind k of the bytes summed in crc followed by b.
func (k ChecksumKind) Update(crc uint32, b []byte) uint32 {
	if k == CRC32IEEE {
		return crc32.Update(crc, crc32.IEEETable, b)
	}
	return crc32.Update(crc, castagnoli, b)
}

// Sum returns the checksum of kind k of b.
func (k ChecksumKind) Sum(b []byte) uint32 { return k.Update(0, b) }

// String names the kind in messages: "crc32c" or "crc32".
func (k ChecksumKind) String() string {
	if k == CRC32IEEE {
		return "crc32"
	}
	return "crc32c"
}

// Checksum returns the CRC32C of b: what Entry.CRC records for a sample's bytes.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// UpdateChecksum returns the CRC32C of the bytes summed in crc followed by b.
func UpdateChecksum(crc uint32, b []byte) uint32 { return crc32.Update(crc, castagnoli, b) }

// Sum is the length and CRC32C of bytes taken in order, as a shard's Size and CRC record them.
// The zero value is the sum of no bytes.
type Sum struct {
	Size uint64
	CRC  uint32
}

// Add takes b after the bytes summed so far.
func (s *Sum) Add(b []byte) {
	s.Size += uint64(len(b))
	s.CRC = UpdateChecksum(s.CRC, b)
}

// NewChecksum returns a hash.Hash32 computing the CRC32C of what is written to it.
func NewChecksum() hash.Hash32 { return crc32.New(castagnoli) }

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
	CRC    uint32 // checksum of the content, of its shard's Checksum kind (CRC32C unless a ZIP's)

	// Directories only: children are ids [FirstChild, FirstChild+NumChildren), sorted by name.
	FirstChild  ID
	NumChildren uint32
}

// IsDir reports whether the entry is a directory.
func (e Entry) IsDir() bool { return e.Mode&ModeType == ModeDir }

// Shard describes one shard file of the set.
type Shard struct {
	Name string
	Kind ShardKind
	Size uint64
	CRC  uint32 // CRC32C of the whole shard (zero when the set has no checksums, or Checksum is CRC32IEEE)
	// Checksum is what the CRC fields of its files hold: CRC32C (the zero value), or, for a
	// file indexed in place (ShardTar), CRC32IEEE.
	Checksum ChecksumKind
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

// Index is a loaded index. It holds the file's bytes in one buffer and decodes entries on
// demand, so it costs at most the file size in memory and nothing else per sample. A version 3
// index is checked block by block, the first time a block is used (validate.go): Load reads only
// the header and the small sections, and a block's bytes are read and checked before any of
// them is answered; an entry in a block that fails is answered as missing (Entry's zero value,
// Lookup's error) and Err says why. Older versions are checked whole by Parse, as before, and
// get their lookup table built in memory (6 bytes per entry). An Index is immutable and safe for
// concurrent use.
type Index struct {
	entries []byte // E × entrySize
	names   []byte
	table   []byte  // lookup table (table.go): 1.5 u32 slots per non-root entry
	order   []byte  // with flagExtentOrder: the file ids in extent order, u32 each; else nil
	noCRC   bool    // flagNoChecksums
	sum     uint32  // the header's CRC32C (Identity)
	shards  []Shard // S is small (one per GiB of data), so these are decoded once
	v       *blocks // version 3: what has been read and checked (validate.go); nil once all has
	release func()  // frees what Load mapped; nil for Parse
	size    uint64  // the file's bytes
	small   uint64  // version 3: the bytes read at load (header and small sections)

	// Totals and directory runs: from the header and the runs section (version 3), or computed
	// by Parse (versions 1 and 2).
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

// Load opens the index of the shard set in directory dir. A version 3 index is read as it is
// used (its header and small sections now, each block of the rest before its first use), into
// memory mapped for it that Close releases; an older one is read and checked whole.
func Load(dir string) (*Index, error) {
	path := dir + "/" + IndexName
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s is not a shard set (no %s): %w", dir, IndexName, err)
		}
		return nil, fmt.Errorf("read index: %w", err)
	}
	x, err := loadFile(f)
	if err != nil || x.release == nil { // x.release keeps f for the blocks still to read
		f.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return x, nil
}

func loadFile(f *os.File) (*Index, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read index: %w", err)
	}
	size := fi.Size()
	var head [headerSize3]byte
	n, err := f.ReadAt(head[:], 0)
	if n < 12 || string(head[:8]) != magic || le.Uint32(head[8:]) != versionBlocks || size < headerSize3 || size > math.MaxInt {
		// An older version (or garbage, which Parse reports): read and check it whole.
		buf, err := io.ReadAll(io.NewSectionReader(f, 0, size))
		if err != nil {
			return nil, fmt.Errorf("read index: %w", err)
		}
		return Parse(buf)
	}
	if err != nil {
		return nil, fmt.Errorf("read index: %w", err)
	}
	// Memory for the whole file, touched only where blocks are read into it: the daemon's RSS
	// grows with what is used. Anonymous rather than a mapping of the file, so that a file
	// truncated under a running mount is a read error, not a SIGBUS.
	buf, err := syscall.Mmap(-1, 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_ANON|syscall.MAP_PRIVATE|syscall.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("map %d bytes for the index: %w", size, err)
	}
	// Huge pages where the kernel has them (transparent_hugepage=madvise or always): a lookup
	// touches 4 random places of the index, each a TLB miss with 4 KiB pages in a large index
	// (docs/bench/layout-notes.md#huge-pages-for-the-index). RSS grows by 2 MiB pages, only where used.
	syscall.Madvise(buf, syscall.MADV_HUGEPAGE)
	copy(buf, head[:])
	fill := func(off int64, b []byte) error {
		if _, err := f.ReadAt(b, off); err != nil {
			return fmt.Errorf("read index bytes [%d,+%d): %w", off, len(b), err)
		}
		return nil
	}
	x, err := parseBlocks(buf, fill)
	if err != nil {
		syscall.Munmap(buf)
		return nil, err
	}
	x.release = func() {
		syscall.Munmap(buf)
		f.Close()
	}
	return x, nil
}

// Close releases what Load took: the index must not be used afterwards. It does nothing for an
// index from Parse.
func (x *Index) Close() {
	if x.release != nil {
		x.release()
		x.release = nil
	}
}

// Parse returns the index held in buf. The Index keeps buf; the caller must not modify it
// afterwards. A version 1 or 2 index is checked whole here; a version 3 index has its header and
// small sections checked here and each block when first used. Parse allocates nothing in
// proportion to the entry count but, for versions 1 and 2, the lookup table.
func Parse(buf []byte) (*Index, error) {
	if len(buf) < headerSize {
		return nil, corruptf("index is %d bytes, shorter than its %d-byte header", len(buf), headerSize)
	}
	if string(buf[:8]) != magic {
		return nil, corruptf("not an aifs index (bad magic %q)", buf[:8])
	}
	switch v := le.Uint32(buf[8:]); v {
	case versionPack, versionTars:
		return parseOld(buf)
	case versionBlocks:
		return parseBlocks(buf, nil)
	default:
		// A version this aifs does not know, or a damaged header: only a header whose checksum
		// holds (where a version 1-3 header keeps it) is taken at its word.
		if !(crc32.Checksum(buf[:124], castagnoli) == le.Uint32(buf[124:]) ||
			len(buf) >= headerSize3 && crc32.Checksum(buf[:252], castagnoli) == le.Uint32(buf[252:])) {
			return nil, corruptf("header checksum mismatch")
		}
		return nil, fmt.Errorf("index version %d is not supported (this aifs reads versions %d to %d)", v, versionPack, versionBlocks)
	}
}

// Len returns the number of entries, directories included.
func (x *Index) Len() int { return len(x.entries) / entrySize }

// Files returns the number of regular files (samples): Len less the directories.
func (x *Index) Files() int { return x.files }

// FileBytes returns the sum of the regular files' sizes.
func (x *Index) FileBytes() uint64 { return x.fileBytes }

// Shards returns the shard table. The caller must not modify it.
func (x *Index) Shards() []Shard { return x.shards }

// ShardBytes returns the sum of the shards' sizes: FileBytes and the padding that aligns samples
// for a set written by Pack (FORMAT.md), tar headers too for a set of tars. What samples take in
// memory is FileBytes.
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

// Entry decodes entry id. It panics if id is out of range; ids from this Index are always
// valid. It returns the zero Entry (Mode 0, neither a directory nor a file) when id's block of a
// version 3 index failed its checks; Err says why.
func (x *Index) Entry(id ID) Entry {
	if !x.ready(id) {
		return Entry{}
	}
	return x.raw(id)
}

// ByExtent returns the file at position pos of extent order: files sorted by shard, then by
// offset, as they lie in storage (0 <= pos < Files()). For a packed set this is id order
// (FileAt); a tar set may store another (FORMAT.md), in which hard links are adjacent. It
// allocates nothing. Where the order's block failed its checks it returns Root, which callers
// walking files skip as a directory.
func (x *Index) ByExtent(pos int) ID {
	if x.order == nil {
		return x.FileAt(pos)
	}
	if !x.orderReady(pos) {
		return Root
	}
	return ID(le.Uint32(x.order[4*pos:]))
}

// ExtentPos returns the first position in extent order (ByExtent) whose file's extent starts
// in shard at or after off, or Files() if there is none: a binary search that allocates
// nothing. Walk on from it to find the files lying in a range of a shard.
func (x *Index) ExtentPos(shard uint32, off uint64) int {
	return sort.Search(x.files, func(pos int) bool {
		e := x.Entry(x.ByExtent(pos))
		return e.Shard > shard || e.Shard == shard && e.Offset >= off
	})
}

// Identity returns the CRC32C of the index file's header, which covers the checksum of every
// section (or block): two indexes with the same identity describe the same set (up to a CRC
// collision). The locations file of a mount carries it, so a reader can tell that a set was
// remounted with another index.
func (x *Index) Identity() uint32 { return x.sum }

// Checksums reports whether the entries' CRC32C fields hold checksums: false for a tar set
// indexed without reading its data (aifs index --no-checksums).
func (x *Index) Checksums() bool { return !x.noCRC }

// Dirs returns the number of directories, the root included, and yields each directory's id in
// id order (the root first), from the directory runs: it reads no entry.
func (x *Index) Dirs() (int, iter.Seq[ID]) {
	return x.Len() - x.files, func(yield func(ID) bool) {
		for _, r := range x.dirRuns {
			for id := r.start; id < r.end; id++ {
				if !yield(id) {
					return
				}
			}
		}
	}
}

// isDir reports whether id is a directory by the directory runs (checked at load, and every
// entry's mode is checked against them), without reading the entry.
func (x *Index) isDir(id ID) bool {
	k := sort.Search(len(x.dirRuns), func(k int) bool { return x.dirRuns[k].end > id })
	return k < len(x.dirRuns) && x.dirRuns[k].start <= id
}

// fileFrom returns the first regular file at or after id, or Len() if none. A directory lies
// in a run whose end is a file or Len().
func (x *Index) fileFrom(id ID) ID {
	if n := ID(x.Len()); id >= n {
		return n
	}
	k := sort.Search(len(x.dirRuns), func(k int) bool { return x.dirRuns[k].end > id })
	if k < len(x.dirRuns) && x.dirRuns[k].start <= id {
		return x.dirRuns[k].end
	}
	return id
}

// raw decodes entry id without checking that its block was checked.
func (x *Index) raw(id ID) Entry {
	b := x.entries[int(id)*entrySize : int(id+1)*entrySize]
	e := Entry{
		Parent: ID(le.Uint32(b[eParent:])),
		Mode:   uint32(le.Uint16(b[eMode:])),
		MTime:  int64(le.Uint64(b[eMTime:])),
	}
	if e.IsDir() {
		// The block checks bound them by the table size, so the narrowing is exact.
		e.FirstChild, e.NumChildren = ID(le.Uint64(b[eA:])), uint32(u40(b[eB:]))
	} else {
		e.Offset, e.Size, e.Shard, e.CRC = le.Uint64(b[eA:]), u40(b[eB:]), le.Uint32(b[eShard:]), le.Uint32(b[eCRC:])
	}
	return e
}

// rawName returns the name of entry id without checking that its block was checked.
func (x *Index) rawName(id ID) []byte {
	b := x.entries[int(id)*entrySize:]
	off := u40(b[eName:])
	return x.names[off : off+uint64(b[eNameLen])]
}

// Name returns the name bytes of entry id (empty for the root, and for an entry whose block
// failed its checks). The slice aliases the index and must not be modified.
func (x *Index) Name(id ID) []byte {
	if !x.ready(id) {
		return nil
	}
	return x.rawName(id)
}

// ErrNotFound is returned by the lookups for a name that is not there.
var ErrNotFound = errors.New("no such entry")

// LookupPath resolves a slash-separated path relative to the root: empty and "." components
// are skipped, so "", "." and "/" are the root and "a//b/" is "a/b"; ".." is looked up as a
// name (and never found). It returns ErrNotFound, or an error wrapping ErrCorrupt where a block
// it needed failed its checks. It allocates nothing.
func (x *Index) LookupPath(path string) (ID, error) {
	id := Root
	for path != "" {
		var part string
		part, path, _ = strings.Cut(path, "/")
		if part == "" || part == "." {
			continue
		}
		var err error
		if id, err = x.Lookup(id, part); err != nil {
			return 0, err
		}
	}
	if !x.ready(id) {
		return 0, x.Err()
	}
	return id, nil
}

// LookupPathBytes is LookupPath for a path held in bytes (a line of a plan), without copying
// it and without allocating. It keeps no reference to path.
func (x *Index) LookupPathBytes(path []byte) (ID, error) {
	return x.LookupPath(unsafe.String(unsafe.SliceData(path), len(path)))
}

// Path returns the slash-separated path of id relative to the root ("" for the root). It
// allocates; use it for messages, not on the read path.
func (x *Index) Path(id ID) string {
	var parts [][]byte
	for ; id != Root; id = x.Entry(id).Parent {
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
