package layout

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"testing"
)

// tree builds an in-memory tree from paths ("a/b/file" is a file, "a/dir/" an empty directory)
// with content size len(path), packed densely into shards of shardTarget bytes.
func tree(shardTarget uint64, paths ...string) ([]*Node, []Shard) {
	root := &Node{Mode: ModeDir | 0o755}
	for _, p := range paths {
		d := root
		parts := strings.Split(strings.TrimSuffix(p, "/"), "/")
		for i, part := range parts {
			var child *Node
			for _, c := range d.Children {
				if c.Name == part {
					child = c
				}
			}
			if child == nil {
				child = &Node{Name: part, Mode: ModeDir | 0o755, MTime: int64(i)}
				if i == len(parts)-1 && !strings.HasSuffix(p, "/") {
					child.Mode, child.Size = ModeRegular|0o644, uint64(len(p))
				}
				d.Children = append(d.Children, child)
			}
			d = child
		}
	}
	nodes := Number(root)
	var files []*Node
	for _, n := range nodes {
		if !n.IsDir() {
			files = append(files, n)
			n.CRC = crc32.Checksum([]byte(n.Name), castagnoli)
		}
	}
	return nodes, assignShards(files, shardTarget)
}

func testIndex(t testing.TB) []byte {
	nodes, shards := tree(64, "b/y", "a/x2", "a/x1", "a/sub/deep/f", "empty/", "zero", "c")
	return EncodeIndex(nodes, shards, false)
}

func TestLookupAndList(t *testing.T) {
	x, err := Parse(testIndex(t))
	if err != nil {
		t.Fatal(err)
	}
	var listing []string
	root := x.Entry(Root)
	for c := root.FirstChild; c < root.FirstChild+ID(root.NumChildren); c++ {
		listing = append(listing, string(x.Name(c)))
	}
	if got, want := strings.Join(listing, ","), "a,b,c,empty,zero"; got != want {
		t.Errorf("root listing = %s, want %s", got, want)
	}
	for _, p := range []string{"a/x1", "a/x2", "a/sub/deep/f", "b/y", "c", "zero", "empty"} {
		id, err := x.LookupPath(p)
		if err != nil {
			t.Fatalf("LookupPath(%q) not found", p)
		}
		if got := x.Path(id); got != p {
			t.Errorf("Path(LookupPath(%q)) = %q", p, got)
		}
		if e := x.Entry(id); !e.IsDir() && e.Size != uint64(len(p)) {
			t.Errorf("%s: size %d, want %d", p, e.Size, len(p))
		}
	}
	for _, p := range []string{"a/x3", "a/x1/y", "d", "a/sub/deep/g", "0", "zz"} {
		if _, err := x.LookupPath(p); err == nil {
			t.Errorf("LookupPath(%q) found a missing path", p)
		}
	}
}

// TestPackOrder checks the FORMAT.md promise that file ids ascend in pack order.
func TestPackOrder(t *testing.T) {
	x, err := Parse(testIndex(t))
	if err != nil {
		t.Fatal(err)
	}
	var last Entry
	var files []string
	for i := 0; i < x.Len(); i++ {
		e := x.Entry(ID(i))
		if e.IsDir() {
			continue
		}
		if len(files) > 0 && (e.Shard < last.Shard || e.Shard == last.Shard && e.Offset != last.Offset+last.Size) {
			t.Errorf("%s at shard %d offset %d does not follow the previous file", x.Path(ID(i)), e.Shard, e.Offset)
		}
		last = e
		files = append(files, x.Path(ID(i)))
	}
	if got, want := strings.Join(files, ","), "c,zero,a/x1,a/x2,a/sub/deep/f,b/y"; got != want {
		t.Errorf("pack order %s, want %s", got, want)
	}
}

// tarLaidTree is tree as a tar set would lay it out (version 2): each shard's files stored in the
// reverse of id order, with a gap of 512 bytes (a header) before each, and the file "c" a hard
// link to the last file. Its index carries the extent order.
func tarLaidTree(t testing.TB, shardTarget uint64, paths ...string) ([]*Node, []Shard) {
	nodes, shards := tree(shardTarget, paths...)
	var files []*Node
	for _, n := range nodes {
		if !n.IsDir() {
			files = append(files, n)
		}
	}
	for i := range shards {
		shards[i].Kind, shards[i].Size = ShardTar, 0
	}
	for i := len(files) - 1; i >= 0; i-- {
		f, s := files[i], &shards[files[i].Shard]
		f.Offset = s.Size + 512
		s.Size = f.Offset + f.Size
	}
	last := files[len(files)-1]
	for _, f := range files {
		if f.Name == "c" && f != last {
			f.Shard, f.Offset, f.Size, f.CRC = last.Shard, last.Offset, last.Size, last.CRC
		}
	}
	if extentOrder(nodes) == nil {
		t.Fatal("tarLaidTree: extents in id order")
	}
	return nodes, shards
}

// TestExtentPos checks ByExtent and the binary search of ExtentPos against a scan of every
// file, for every offset of every shard and one past each end: over a packed tree with
// directories between its files and a zero-byte file in several shards (version 1, extent
// order = id order), and over the same tree laid out as tars (version 2, an extent order of its
// own, with a hard link).
func TestExtentPos(t *testing.T) {
	paths := []string{"b/y", "a/x2", "a/x1", "a/sub/deep/f", "empty/", "zero", "c", "d/e/f/g"}
	for _, set := range []struct {
		name  string
		nodes func() ([]*Node, []Shard)
	}{
		{"packed", func() ([]*Node, []Shard) { return tree(8, paths...) }},
		{"tars", func() ([]*Node, []Shard) { return tarLaidTree(t, 16, paths...) }},
	} {
		t.Run(set.name, func(t *testing.T) {
			nodes, shards := set.nodes()
			x, err := Parse(EncodeIndex(nodes, shards, false))
			if err != nil {
				t.Fatal(err)
			}
			if len(x.Shards()) < 2 {
				t.Fatalf("%d shards, want several", len(x.Shards()))
			}
			// Every file once, in (shard, offset) order.
			seen := map[ID]bool{}
			for pos := range x.Files() {
				id := x.ByExtent(pos)
				if seen[id] || x.Entry(id).IsDir() {
					t.Fatalf("ByExtent(%d) = %d: a directory or seen before", pos, id)
				}
				seen[id] = true
				if pos > 0 {
					a, b := x.Entry(x.ByExtent(pos-1)), x.Entry(id)
					if a.Shard > b.Shard || a.Shard == b.Shard && a.Offset > b.Offset {
						t.Errorf("ByExtent(%d), ByExtent(%d): %+v before %+v", pos-1, pos, a, b)
					}
				}
			}
			scan := func(shard uint32, off uint64) int {
				for pos := range x.Files() {
					if e := x.Entry(x.ByExtent(pos)); e.Shard > shard || e.Shard == shard && e.Offset >= off {
						return pos
					}
				}
				return x.Files()
			}
			for si, sh := range x.Shards() {
				for off := uint64(0); off <= sh.Size+1; off++ {
					if got, want := x.ExtentPos(uint32(si), off), scan(uint32(si), off); got != want {
						t.Errorf("ExtentPos(%d, %d) = %d, want %d", si, off, got, want)
					}
				}
			}
			if got := x.ExtentPos(uint32(len(x.Shards())), 0); got != x.Files() {
				t.Errorf("ExtentPos past the last shard = %d, want %d", got, x.Files())
			}
			if allocs := testing.AllocsPerRun(100, func() { x.ByExtent(x.ExtentPos(0, 10) % x.Files()) }); allocs != 0 {
				t.Errorf("ExtentPos allocates %.0f times", allocs)
			}
		})
	}
}

func TestLookupAllocatesNothing(t *testing.T) {
	x, err := Parse(testIndex(t))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := x.Lookup(Root, "a")
	if n := testing.AllocsPerRun(100, func() {
		if _, err := x.Lookup(a, "x2"); err != nil {
			t.Fatal("not found")
		}
		_ = x.Entry(a)
	}); n != 0 {
		t.Errorf("Lookup+Entry allocate %v times per call", n)
	}
}

// formats are the index versions a test runs over: version 3, which aifs writes, and the
// versions 1 and 2 sets written before it, which must load and be checked as before.
var formats = []struct {
	name   string
	encode func(nodes []*Node, shards []Shard, noCRC bool) []byte
}{{"v3", EncodeIndex}, {"old", encodeOld}}

// parseAll parses buf and checks every block, as a version 1 or 2 Parse did.
func parseAll(buf []byte) (*Index, error) {
	x, err := Parse(buf)
	if err != nil {
		return nil, err
	}
	return x, x.CheckAll()
}

// TestEveryByteFlipIsDetected flips each bit position of a small index in turn: the checksums
// cover every byte, so each must fail to parse, or (version 3) to check.
func TestEveryByteFlipIsDetected(t *testing.T) {
	nodes, shards := tree(64, "b/y", "a/x2", "a/x1", "a/sub/deep/f", "empty/", "zero", "c")
	for _, f := range formats {
		good := f.encode(nodes, shards, false)
		for i := range good {
			buf := bytes.Clone(good)
			buf[i] ^= 0x10
			if _, err := parseAll(buf); err == nil {
				t.Fatalf("%s: flip at byte %d was accepted", f.name, i)
			}
		}
	}
}

// reseal recomputes every checksum (section, block and header) after a test edits buf, so that
// the structural checks behind them are exercised.
func reseal(buf []byte) []byte {
	if le.Uint32(buf[8:]) == versionBlocks {
		return reseal3(buf)
	}
	for i := range numSections + 1 {
		d := buf[32+24*i:]
		if i == numSections {
			if le.Uint32(buf[12:])&flagExtentOrder == 0 {
				break
			}
			d = buf[orderDesc:]
		}
		off, n := le.Uint64(d), le.Uint64(d[8:])
		if off > uint64(len(buf)) || n > uint64(len(buf))-off {
			continue
		}
		le.PutUint32(d[16:], crc32.Checksum(buf[off:off+n], castagnoli))
	}
	le.PutUint32(buf[124:], crc32.Checksum(buf[:124], castagnoli))
	return buf
}

func reseal3(buf []byte) []byte {
	if len(buf) < headerSize3 {
		return buf
	}
	sec := func(k int) ([]byte, bool) {
		d := buf[h3Desc+h3DescSize*k:]
		off, n := le.Uint64(d), le.Uint64(d[8:])
		if off > uint64(len(buf)) || n > uint64(len(buf))-off {
			return nil, false
		}
		return buf[off : off+n], true
	}
	perBlock, blockBytes := uint64(le.Uint32(buf[h3PerBlock:])), uint64(le.Uint32(buf[h3BlockBytes:]))
	var sums []byte
	for _, k := range []int{s3Entries, s3Names, s3Table, s3Order} {
		b, ok := sec(k)
		size := blockBytes
		if k == s3Entries {
			size = perBlock * entrySize
		}
		if !ok || size == 0 {
			sums = nil
			break
		}
		for len(b) > 0 {
			n := min(uint64(len(b)), size)
			sums = le.AppendUint32(sums, crc32.Checksum(b[:n], castagnoli))
			b = b[n:]
		}
	}
	if dst, ok := sec(s3Sums); ok && sums != nil && len(dst) == len(sums) {
		copy(dst, sums)
	}
	for _, k := range []int{s3Shards, s3Sums, s3Runs} {
		if b, ok := sec(k); ok {
			le.PutUint32(buf[h3Desc+h3DescSize*k+16:], crc32.Checksum(b, castagnoli))
		}
	}
	le.PutUint32(buf[252:], crc32.Checksum(buf[:252], castagnoli))
	return buf
}

// sectionAt returns the offset of section k (secEntries, secShards or secNames) of buf, of
// either format.
func sectionAt(buf []byte, k int) int {
	if le.Uint32(buf[8:]) != versionBlocks {
		return int(le.Uint64(buf[32+24*k:]))
	}
	v3 := [3]int{s3Entries, s3Shards, s3Names}[k]
	return int(le.Uint64(buf[h3Desc+h3DescSize*v3:]))
}

// recordShape is where an entry record's fields lie in a format.
type recordShape struct {
	size, name, nameLen, parent, mode, a, b, shard, crc int
	wide                                                bool // name offset and B are u64, else u40
}

func shapeOf(buf []byte) recordShape {
	if le.Uint32(buf[8:]) == versionBlocks {
		return recordShape{entrySize, eName, eNameLen, eParent, eMode, eA, eB, eShard, eCRC, false}
	}
	return recordShape{oldEntrySize, oldEName, oldENameLen, oldEParent, oldEMode, oldEA, oldEB, oldEShard, oldECRC, true}
}

func (r recordShape) put(rec []byte, field int, v uint64) {
	if r.wide {
		le.PutUint64(rec[field:], v)
	} else {
		put40(rec[field:], min(v, maxU40))
	}
}

func (r recordShape) get(rec []byte, field int) uint64 {
	if r.wide {
		return le.Uint64(rec[field:])
	}
	return u40(rec[field:])
}

// entryCases are edits of single entries of testIndex that break FORMAT.md's rules, with the
// error each must give; at and nameAt find an entry's record and name bytes in buf.
func entryCases(at, nameAt func(buf []byte, p string) []byte) []rejectCase {
	return []rejectCase{
		{"slash in name", "invalid name", func(b []byte) { nameAt(b, "a/x1")[1] = '/' }},
		{"NUL in name", "invalid name", func(b []byte) { nameAt(b, "b")[0] = 0 }},
		{"dot-dot name", "invalid name", func(b []byte) { copy(nameAt(b, "a/x1"), ".."); at(b, "a/x1")[shapeOf(b).nameLen] = 2 }},
		{"empty name", "invalid name", func(b []byte) { at(b, "c")[shapeOf(b).nameLen] = 0 }},
		{"name past section", "invalid name", func(b []byte) { shapeOf(b).put(at(b, "c"), shapeOf(b).name, 1<<20) }},
		{"unsorted siblings", "not strictly sorted", func(b []byte) { nameAt(b, "a/x2")[1] = '0' }},
		{"duplicate siblings", "not strictly sorted", func(b []byte) { nameAt(b, "a/x2")[1] = '1' }},
		{"shard out of range", "names shard", func(b []byte) { le.PutUint32(at(b, "c")[shapeOf(b).shard:], 99) }},
		{"extent past shard", "runs past the end", func(b []byte) { shapeOf(b).put(at(b, "b/y"), shapeOf(b).b, 1<<30) }},
		{"overlapping extents", "overlaps or precedes", func(b []byte) { le.PutUint64(at(b, "b/y")[shapeOf(b).a:], 0) }},
		{"extent overflow", "runs past the end", func(b []byte) {
			le.PutUint64(at(b, "b/y")[shapeOf(b).a:], 1<<63)
			shapeOf(b).put(at(b, "b/y"), shapeOf(b).b, 1<<63)
		}},
		{"bad mode", "unsupported mode", func(b []byte) { le.PutUint16(at(b, "c")[shapeOf(b).mode:], 0o120777) }},
		{"root is a file", "not the root", func(b []byte) { le.PutUint16(b[sectionAt(b, secEntries)+shapeOf(b).mode:], ModeRegular) }},
		{"child range past table", "outside the table", func(b []byte) { shapeOf(b).put(at(b, "a"), shapeOf(b).b, 1000) }},
		{"child range before dir", "outside the table", func(b []byte) { le.PutUint64(at(b, "a")[shapeOf(b).a:], 0) }},
		{"wrong parent", "names parent", func(b []byte) { le.PutUint32(at(b, "a/x1")[shapeOf(b).parent:], 2) }},
		{"range takes a cousin", "directories list", func(b []byte) { shapeOf(b).put(at(b, "a"), shapeOf(b).b, 4) }},
		{"empty dir with first child", "has first child", func(b []byte) { le.PutUint64(at(b, "empty")[shapeOf(b).a:], 3) }},
		{"dir with file fields", "nonzero file fields", func(b []byte) {
			if shapeOf(b).wide {
				le.PutUint32(at(b, "a")[shapeOf(b).crc:], 7)
			} else {
				at(b, "a")[eHint+6] = 7 // past the hint of its children's names
			}
		}},
		{"shard kind", "unknown kind", func(b []byte) { le.PutUint16(b[sectionAt(b, secShards)+10:], 9) }},
		{"shard reserved without versions flag", "nonzero reserved", func(b []byte) { le.PutUint32(b[sectionAt(b, secShards)+12:], 3) }},
	}
}

// rejectCase is an edit of an index that breaks a rule, and the error it must give.
type rejectCase struct {
	name, want string
	edit       func(b []byte)
}

// rejects applies each case's edit to a copy of good, reseals it and checks that parsing and
// checking it fails with the case's message, wrapping ErrCorrupt (but for an unknown version).
func rejects(t *testing.T, good []byte, cases []rejectCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			buf := bytes.Clone(good)
			c.edit(buf)
			_, err := parseAll(reseal(buf))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Parse = %v, want an error containing %q", err, c.want)
			}
			if c.name != "version" && !errors.Is(err, ErrCorrupt) {
				t.Errorf("error %v does not wrap ErrCorrupt", err)
			}
		})
	}
}

func TestParseRejectsBadStructure(t *testing.T) {
	nodes, shards := tree(64, "b/y", "a/x2", "a/x1", "a/sub/deep/f", "empty/", "zero", "c")
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			good := f.encode(nodes, shards, false)
			x, err := Parse(good)
			if err != nil {
				t.Fatal(err)
			}
			at := func(buf []byte, p string) []byte {
				id, _ := x.LookupPath(p)
				return buf[sectionAt(buf, secEntries)+int(id)*shapeOf(buf).size:]
			}
			nameAt := func(buf []byte, p string) []byte {
				id, _ := x.LookupPath(p)
				sh := shapeOf(buf)
				return buf[sectionAt(buf, secNames)+int(sh.get(at(buf, p), sh.name)):][:len(x.Name(id))]
			}
			cases := entryCases(at, nameAt)
			if f.name == "old" {
				cases = append(cases, oldHeaderCases()...)
			} else {
				cases = append(cases, headerCases3(x)...)
			}
			rejects(t, good, cases)
		})
	}
}

// oldHeaderCases break the header of a version 1 index.
func oldHeaderCases() []rejectCase {
	return []rejectCase{
		{"version", "version 4 is not supported", func(b []byte) { le.PutUint32(b[8:], 4) }},
		{"flags", "unknown header flags", func(b []byte) { le.PutUint32(b[12:], 2) }},
		{"reserved header bytes", "nonzero reserved header", func(b []byte) { b[110] = 1 }},
		{"tar shard path in version 1", "invalid name", func(b []byte) {
			le.PutUint16(b[int(le.Uint64(b[56:]))+10:], uint16(ShardTar))
			b[int(le.Uint64(b[80:]))+int(le.Uint64(b[int(le.Uint64(b[56:])):]))] = '/'
		}},
		{"shard version past names", "invalid version", func(b []byte) {
			le.PutUint32(b[12:], flagShardVersions)
			le.PutUint32(b[int(le.Uint64(b[56:]))+12:], 1<<20)
		}},
		{"entry count", "entries section is", func(b []byte) { le.PutUint64(b[16:], 3) }},
		{"zero entries", "entries section is", func(b []byte) { le.PutUint64(b[16:], 0) }},
		{"section outside file", "lies outside", func(b []byte) { le.PutUint64(b[32+8:], 1<<40) }},
	}
}

// headerCases3 break the header and small sections of a version 3 index (x is it, parsed).
func headerCases3(x *Index) []rejectCase {
	desc := func(b []byte, k int) []byte { return b[h3Desc+h3DescSize*k:] }
	return []rejectCase{
		{"version", "version 4 is not supported", func(b []byte) { le.PutUint32(b[8:], 4) }},
		{"flags", "unknown header flags", func(b []byte) { le.PutUint32(b[12:], 8) }},
		{"reserved header bytes", "nonzero reserved header", func(b []byte) { b[240] = 1 }},
		{"descriptor reserved", "nonzero reserved fields", func(b []byte) { desc(b, s3Runs)[20] = 1 }},
		{"sum on a block section", "nonzero reserved fields", func(b []byte) { desc(b, s3Names)[16] = 1 }},
		{"entries per block", "not powers of two", func(b []byte) { le.PutUint32(b[h3PerBlock:], 3) }},
		{"block bytes", "not powers of two", func(b []byte) { le.PutUint32(b[h3BlockBytes:], 32) }},
		{"entry count", "entries section is", func(b []byte) { le.PutUint64(b[16:], 3) }},
		{"zero entries", "entries section is", func(b []byte) { le.PutUint64(b[16:], 0) }},
		{"section outside file", "lies outside", func(b []byte) { le.PutUint64(desc(b, s3Entries)[8:], 1<<40) }},
		{"file count", "directory runs leave", func(b []byte) { le.PutUint64(b[h3Files:], uint64(x.Files()+1)) }},
		{"file bytes", "bytes of files", func(b []byte) { le.PutUint64(b[h3FileBytes:], x.FileBytes()+1) }},
		{"table length", "lookup table section is", func(b []byte) { le.PutUint64(desc(b, s3Table)[8:], le.Uint64(desc(b, s3Table)[8:])-8) }},
		{"sums length", "block checksums section is", func(b []byte) { le.PutUint64(desc(b, s3Sums)[8:], le.Uint64(desc(b, s3Sums)[8:])-4) }},
		{"run overlaps", "out of order or range", func(b []byte) {
			r := b[le.Uint64(desc(b, s3Runs)):]
			le.PutUint32(r, 1)
		}},
		{"run says file is a directory", "directory runs contradict", func(b []byte) {
			d := desc(b, s3Runs)
			r := b[le.Uint64(d)+le.Uint64(d[8:])-8:]
			le.PutUint32(r[4:], le.Uint32(r[4:])+1) // the last run takes in the file after it
			le.PutUint64(b[h3Files:], uint64(x.Files()-1))
		}},
		{"order without flag", "extent order section without its flag", func(b []byte) { le.PutUint64(desc(b, s3Order)[8:], 4) }},
	}
}

// TestParseRejectsBadTarSets corrupts a tar set's index (tar shards, extent order, a hard link)
// in the ways its own rules forbid, and checks that each is named; the rules of packed sets are
// checked above and hold for tar sets too.
func TestParseRejectsBadTarSets(t *testing.T) {
	nodes, shards := tarLaidTree(t, 1<<20, "b/y", "a/x2", "a/x1", "c", "zero")
	shards[0].Name = "../tars/x.tar"
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			good := f.encode(nodes, shards, false)
			x, err := Parse(good)
			if err != nil {
				t.Fatal(err)
			}
			if x.order == nil || !x.Checksums() {
				t.Fatalf("order %v, checksums %v: want an extent order and checksums", x.order != nil, x.Checksums())
			}
			orderOff := int(le.Uint64(good[orderDesc:]))
			lenAt := orderDesc + 8
			if f.name == "v3" {
				orderOff, lenAt = int(le.Uint64(good[h3Desc+h3DescSize*s3Order:])), h3Desc+h3DescSize*s3Order+8
			}
			shardName := func(b []byte) []byte {
				r := b[sectionAt(b, secShards):]
				return b[sectionAt(b, secNames)+int(le.Uint64(r)):][:le.Uint16(r[8:])]
			}
			at := func(buf []byte, p string) []byte {
				id, _ := x.LookupPath(p)
				return buf[sectionAt(buf, secEntries)+int(id)*shapeOf(buf).size:]
			}
			cases := []rejectCase{
				{"order names a directory", "not a file, or named twice", func(b []byte) { le.PutUint32(b[orderOff:], 1) }},
				{"order names a file twice", "not a file, or named twice", func(b []byte) { copy(b[orderOff:orderOff+4], b[orderOff+4:]) }},
				{"order past the table", "not a file, or named twice", func(b []byte) { le.PutUint32(b[orderOff:], 1<<30) }},
				{"order too short", "extent order section is", func(b []byte) { le.PutUint64(b[lenAt:], 4) }},
				{"order not ascending", "in extent order", func(b []byte) {
					end := orderOff + 4*x.Files()
					first, last := bytes.Clone(b[orderOff:orderOff+4]), bytes.Clone(b[end-4:end])
					copy(b[orderOff:], last)
					copy(b[end-4:], first)
				}},
				{"overlap", "in extent order", func(b []byte) {
					a := shapeOf(b).a
					le.PutUint64(at(b, "a/x2")[a:], le.Uint64(at(b, "a/x1")[a:])+1)
				}},
				{"hard link with another checksum", "in extent order", func(b []byte) { le.PutUint32(at(b, "c")[shapeOf(b).crc:], 1) }},
				{"checksum without checksums", "has a checksum", func(b []byte) { le.PutUint32(b[12:], le.Uint32(b[12:])|flagNoChecksums) }},
				{"absolute path with dot-dot", "invalid name", func(b []byte) { copy(shardName(b), "/../tars/") }},
				{"empty path component", "invalid name", func(b []byte) { copy(shardName(b), "..//tars/") }},
				{"NUL in path", "invalid name", func(b []byte) { shardName(b)[3] = 0 }},
				{"path ends in slash", "invalid name", func(b []byte) { n := shardName(b); n[len(n)-1] = '/' }},
			}
			if f.name == "old" {
				cases = append(cases, rejectCase{"order flag without section", "lies outside", func(b []byte) { le.PutUint64(b[orderDesc:], 1<<40) }})
			}
			rejects(t, good, cases)
		})
	}
}

func TestValidShardPath(t *testing.T) {
	for name, want := range map[string]bool{
		"a.tar": true, "../../x/a.tar": true, "/data/shards/a.tar": true, "d/a.tar": true, ".hidden.tar": true,
		strings.Repeat("x", maxShardPath): true,
		"":                                false, "/": false, "a/": false, "a//b": false, "./a": false, "a/../b": false, "/../a": false, "a\x00": false,
		strings.Repeat("x", maxShardPath+1): false,
	} {
		if got := validShardPath([]byte(name)); got != want {
			t.Errorf("validShardPath(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestValidName(t *testing.T) {
	for name, want := range map[string]bool{
		"a": true, "with space": true, "new\nline": true, "\xff\xfe": true, ".hidden": true, "...": true,
		strings.Repeat("x", 255): true,
		"":                       false, ".": false, "..": false, "a/b": false, "a\x00b": false, strings.Repeat("x", 256): false,
	} {
		if got := ValidName([]byte(name)); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", name, got, want)
		}
	}
}

// FuzzParse feeds arbitrary bytes to the loader: it must return an error or an index whose every
// entry can be looked up by name and path without panicking, each lookup finding the entry or
// reporting a corrupt block. The seed corpus (f.Add and testdata/fuzz/FuzzParse) runs as a
// normal test.
func FuzzParse(f *testing.F) {
	nodes, shards := tree(64, "b/y", "a/x2", "a/x1", "a/sub/deep/f", "empty/", "zero", "c")
	for _, fm := range formats {
		good := fm.encode(nodes, shards, false)
		f.Add(good)
		f.Add(good[:headerSize3])
		tn, ts := tarLaidTree(f, 1<<20, "b/y", "a/x2", "a/x1", "c", "zero")
		f.Add(fm.encode(tn, ts, false))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkParsed(t, data)
		if len(data) >= headerSize {
			// With checksums recomputed, mutations reach the structural checks behind them.
			checkParsed(t, reseal(bytes.Clone(data)))
		}
	})
}

// checkParsed parses data and, if it is accepted, looks up every entry by name and by path, and
// walks the extent order.
func checkParsed(t *testing.T, data []byte) {
	x, err := Parse(data)
	if err != nil {
		return
	}
	for i := 0; i < x.Len(); i++ {
		e := x.Entry(ID(i))
		if !e.IsDir() {
			continue
		}
		for c := e.FirstChild; c < e.FirstChild+ID(e.NumChildren); c++ {
			if x.Entry(c).Mode == 0 {
				continue // its block failed: Lookup must say so, not find another
			}
			if got, err := x.Lookup(ID(i), string(x.Name(c))); err == nil && got != c || err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Lookup(%d, %q) = %d, %v; want %d", i, x.Name(c), got, err, c)
			}
			if got, err := x.LookupPath(x.Path(c)); err == nil && got != c {
				t.Fatalf("LookupPath(%q) = %d; want %d", x.Path(c), got, c)
			}
		}
	}
	for pos := range x.Files() {
		x.ByExtent(pos)
	}
	x.ExtentPos(0, 0)
	if err := x.CheckAll(); err == nil && x.Err() != nil {
		t.Fatalf("CheckAll accepted an index whose blocks failed: %v", x.Err())
	}
}

func ExampleIndex_Lookup() {
	nodes, shards := tree(1<<20, "train/cat/1.jpg", "train/dog/2.jpg")
	x, _ := Parse(EncodeIndex(nodes, shards, false))
	dog, _ := x.LookupPath("train/dog")
	id, err := x.Lookup(dog, "2.jpg")
	fmt.Println(x.Path(id), err, x.Entry(id).Size)
	// Output: train/dog/2.jpg <nil> 15
}

// TestLookupLargeDirectory checks every child and many absent names of directories large enough
// for long probe sequences and wrap-around in their table regions.
func TestLookupLargeDirectory(t *testing.T) {
	var paths []string
	for i := range 5000 {
		paths = append(paths, fmt.Sprintf("big/%d", i), fmt.Sprintf("small%d/x", i%3))
	}
	nodes, shards := tree(1<<20, paths...)
	x, err := Parse(EncodeIndex(nodes, shards, false))
	if err != nil {
		t.Fatal(err)
	}
	big, _ := x.LookupPath("big")
	for i := range 5000 {
		id, err := x.Lookup(big, fmt.Sprint(i))
		if err != nil || x.Path(id) != fmt.Sprintf("big/%d", i) {
			t.Fatalf("Lookup(big, %d) = %q, %v", i, x.Path(id), err)
		}
		if _, err := x.Lookup(big, fmt.Sprintf("%d.", i)); err == nil {
			t.Fatalf("Lookup(big, %d.) found a missing name", i)
		}
	}
	file, _ := x.LookupPath("small0/x")
	if _, err := x.Lookup(file, "x"); err == nil {
		t.Error("Lookup under a file succeeded")
	}
}

// Shard versions (S3 ETags) round-trip through the index and set the header flag only when
// present, so local shard sets stay byte-identical to those of earlier versions.
func TestShardVersions(t *testing.T) {
	nodes, shards := tree(2, "b/y", "a/x2", "a/x1", "c")
	plain := EncodeIndex(nodes, shards, false)
	if le.Uint32(plain[12:]) != 0 {
		t.Fatalf("flags = %#x without versions, want 0", le.Uint32(plain[12:]))
	}
	for i := range shards {
		shards[i].Version = fmt.Sprintf(`"%032x-%d"`, i*7919, i+1)
	}
	x, err := Parse(EncodeIndex(nodes, shards, false))
	if err != nil {
		t.Fatal(err)
	}
	if len(x.Shards()) != len(shards) || len(shards) < 2 {
		t.Fatalf("%d shards, want %d (at least 2)", len(x.Shards()), len(shards))
	}
	for i, s := range x.Shards() {
		if s != shards[i] {
			t.Errorf("shard %d = %+v, want %+v", i, s, shards[i])
		}
	}
	if id, err := x.LookupPath("a/x1"); err != nil || string(x.Name(id)) != "x1" {
		t.Errorf("lookup after versioned shard table: %v %q", err, x.Name(id))
	}
}

// factTrees are trees whose directories fall into one run (ImageFolder-like), several runs,
// or cover the whole index, for the tests of the facts an Index keeps.
var factTrees = [][]string{
	{"b/y", "a/x2", "a/x1", "a/sub/deep/f", "empty/", "zero", "c"},
	{"b/y", "a/x2", "a/x1", "a/sub/deep/f", "empty/", "zero", "c", "d/e/f/g", "d/e/h/", "d/z"},
	{"train/cat/1", "train/cat/2", "train/dog/1", "val/cat/3"},
	{"only/dirs/", "x/"},
	{"f"},
	{},
}

// TestIndexFacts checks Files, FileBytes, ShardBytes, NextFile, FileAt and Dirs against scans in
// id order, for every id and every file index, and that NextFile and FileAt allocate nothing.
func TestIndexFacts(t *testing.T) {
	for _, paths := range factTrees {
		nodes, shards := tree(8, paths...)
		x, err := Parse(EncodeIndex(nodes, shards, false))
		if err != nil {
			t.Fatal(err)
		}
		n := ID(x.Len())
		var files, dirs []ID
		var fileBytes, shardBytes uint64
		for id := ID(0); id < n; id++ {
			if e := x.Entry(id); !e.IsDir() {
				files = append(files, id)
				fileBytes += e.Size
			} else {
				dirs = append(dirs, id)
			}
		}
		if count, seq := x.Dirs(); count != len(dirs) || !slices.Equal(slices.Collect(seq), dirs) {
			t.Errorf("%q: Dirs = %d, %v; want %d, %v", paths, count, slices.Collect(seq), len(dirs), dirs)
		}
		for _, s := range x.Shards() {
			shardBytes += s.Size
		}
		if x.Files() != len(files) || x.FileBytes() != fileBytes || x.ShardBytes() != shardBytes {
			t.Errorf("%q: Files, FileBytes, ShardBytes = %d, %d, %d; want %d, %d, %d",
				paths, x.Files(), x.FileBytes(), x.ShardBytes(), len(files), fileBytes, shardBytes)
		}
		for id := ID(0); id <= n; id++ {
			want := n
			if k, _ := slices.BinarySearch(files, id+1); k < len(files) {
				want = files[k]
			}
			if got := x.NextFile(id); got != want {
				t.Errorf("%q: NextFile(%d) = %d, want %d", paths, id, got, want)
			}
		}
		if got := x.NextFile(^ID(0)); got != n {
			t.Errorf("%q: NextFile(max ID) = %d, want %d", paths, got, n)
		}
		for i, want := range files {
			if got := x.FileAt(i); got != want {
				t.Errorf("%q: FileAt(%d) = %d, want %d", paths, i, got, want)
			}
		}
		for _, i := range []int{-1, len(files)} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%q: FileAt(%d) of %d files did not panic", paths, i, len(files))
					}
				}()
				x.FileAt(i)
			}()
		}
		if len(files) > 0 {
			if allocs := testing.AllocsPerRun(100, func() { x.NextFile(0); x.FileAt(len(files) - 1) }); allocs != 0 {
				t.Errorf("NextFile and FileAt allocate %.0f times", allocs)
			}
		}
	}
}

// TestLookupPathBytes checks that LookupPathBytes answers as LookupPath, for paths found and not,
// with empty and "." components, and allocates nothing.
func TestLookupPathBytes(t *testing.T) {
	x, err := Parse(testIndex(t))
	if err != nil {
		t.Fatal(err)
	}
	deep, _ := x.Lookup(Root, "a")
	deep, _ = x.Lookup(deep, "sub")
	deep, _ = x.Lookup(deep, "deep")
	deep, _ = x.Lookup(deep, "f")
	for _, c := range []struct {
		path string
		id   ID
		ok   bool
	}{
		{"a/sub/deep/f", deep, true}, {"/a//sub/./deep/f/", deep, true}, {"", Root, true}, {".", Root, true},
		{"/", Root, true}, {"a/sub/deep/g", 0, false}, {"a/../a", 0, false}, {"c/x", 0, false}, {"zz", 0, false},
	} {
		id, err := x.LookupPathBytes([]byte(c.path))
		sid, serr := x.LookupPath(c.path)
		if id != c.id || (err == nil) != c.ok || sid != c.id || (serr == nil) != c.ok {
			t.Errorf("LookupPathBytes(%q) = %d, %v and LookupPath = %d, %v; want %d, %v", c.path, id, err, sid, serr, c.id, c.ok)
		}
	}
	path := []byte("/a//sub/./deep/f")
	if allocs := testing.AllocsPerRun(100, func() {
		if _, err := x.LookupPathBytes(path); err != nil {
			t.Fatal("not found")
		}
	}); allocs != 0 {
		t.Errorf("LookupPathBytes allocates %.0f times", allocs)
	}
}

// assignShards places files in pack order into shards of about target bytes each, as Pack does.
func assignShards(files []*Node, target uint64) []Shard {
	var shards []Shard
	for _, f := range files {
		if len(shards) == 0 || shards[len(shards)-1].Size > 0 && shards[len(shards)-1].Size+f.Size > target {
			shards = append(shards, Shard{Name: ShardName(len(shards)), Kind: ShardData})
		}
		s := &shards[len(shards)-1]
		f.Shard, f.Offset = uint32(len(shards)-1), s.Size
		s.Size += f.Size
	}
	return shards
}
