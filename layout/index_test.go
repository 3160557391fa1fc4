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
func tree(shardTarget uint64, paths ...string) ([]*node, []Shard) {
	root := &node{mode: modeDir | 0o755}
	for _, p := range paths {
		d := root
		parts := strings.Split(strings.TrimSuffix(p, "/"), "/")
		for i, part := range parts {
			var child *node
			for _, c := range d.children {
				if c.name == part {
					child = c
				}
			}
			if child == nil {
				child = &node{name: part, mode: modeDir | 0o755, mtime: int64(i)}
				if i == len(parts)-1 && !strings.HasSuffix(p, "/") {
					child.mode, child.size = modeRegular|0o644, uint64(len(p))
				}
				d.children = append(d.children, child)
			}
			d = child
		}
	}
	nodes := number(root)
	var files []*node
	for _, n := range nodes {
		if !n.isDir() {
			files = append(files, n)
			n.crc = crc32.Checksum([]byte(n.name), castagnoli)
		}
	}
	return nodes, assignShards(files, shardTarget)
}

func testIndex(t testing.TB) []byte {
	nodes, shards := tree(64, "b/y", "a/x2", "a/x1", "a/sub/deep/f", "empty/", "zero", "c")
	return encodeIndex(nodes, shards, false)
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
		id, ok := x.LookupPath(p)
		if !ok {
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
		if _, ok := x.LookupPath(p); ok {
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
func tarLaidTree(t testing.TB, shardTarget uint64, paths ...string) ([]*node, []Shard) {
	nodes, shards := tree(shardTarget, paths...)
	var files []*node
	for _, n := range nodes {
		if !n.isDir() {
			files = append(files, n)
		}
	}
	for i := range shards {
		shards[i].Kind, shards[i].Size = ShardTar, 0
	}
	for i := len(files) - 1; i >= 0; i-- {
		f, s := files[i], &shards[files[i].shard]
		f.offset = s.Size + 512
		s.Size = f.offset + f.size
	}
	last := files[len(files)-1]
	for _, f := range files {
		if f.name == "c" && f != last {
			f.shard, f.offset, f.size, f.crc = last.shard, last.offset, last.size, last.crc
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
		nodes func() ([]*node, []Shard)
	}{
		{"packed", func() ([]*node, []Shard) { return tree(8, paths...) }},
		{"tars", func() ([]*node, []Shard) { return tarLaidTree(t, 16, paths...) }},
	} {
		t.Run(set.name, func(t *testing.T) {
			nodes, shards := set.nodes()
			x, err := Parse(encodeIndex(nodes, shards, false))
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
		if _, ok := x.Lookup(a, "x2"); !ok {
			t.Fatal("not found")
		}
		_ = x.Entry(a)
	}); n != 0 {
		t.Errorf("Lookup+Entry allocate %v times per call", n)
	}
}

// TestEveryByteFlipIsDetected flips each bit position of a small index in turn: the checksums
// cover every byte, so each must fail to parse.
func TestEveryByteFlipIsDetected(t *testing.T) {
	good := testIndex(t)
	for i := range good {
		buf := bytes.Clone(good)
		buf[i] ^= 0x10
		if _, err := Parse(buf); err == nil {
			t.Fatalf("flip at byte %d was accepted", i)
		}
	}
}

// reseal recomputes every section checksum and the header checksum after a test edits buf, so
// that the structural checks behind them are exercised.
func reseal(buf []byte) []byte {
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

func TestParseRejectsBadStructure(t *testing.T) {
	good := testIndex(t)
	x, err := Parse(good)
	if err != nil {
		t.Fatal(err)
	}
	entriesOff := int(le.Uint64(good[32:]))
	namesOff := int(le.Uint64(good[32+48:]))
	at := func(buf []byte, p string) []byte {
		id, _ := x.LookupPath(p)
		return buf[entriesOff+int(id)*entrySize:]
	}
	nameAt := func(buf []byte, p string) []byte {
		id, _ := x.LookupPath(p)
		return buf[namesOff+int(le.Uint64(at(buf, p))):][:len(x.Name(id))]
	}
	cases := []struct {
		name, want string
		edit       func(b []byte)
	}{
		{"version", "version 3 is not supported", func(b []byte) { le.PutUint32(b[8:], 3) }},
		{"flags", "unknown header flags", func(b []byte) { le.PutUint32(b[12:], 2) }},
		{"reserved header bytes", "nonzero reserved header", func(b []byte) { b[110] = 1 }},
		{"tar shard path in version 1", "invalid name", func(b []byte) {
			le.PutUint16(b[int(le.Uint64(b[56:]))+10:], uint16(ShardTar))
			b[int(le.Uint64(b[80:]))+int(le.Uint64(b[int(le.Uint64(b[56:])):]))] = '/'
		}},
		{"shard reserved without versions flag", "nonzero reserved", func(b []byte) { le.PutUint32(b[int(le.Uint64(b[56:]))+12:], 3) }},
		{"shard version past names", "invalid version", func(b []byte) {
			le.PutUint32(b[12:], flagShardVersions)
			le.PutUint32(b[int(le.Uint64(b[56:]))+12:], 1<<20)
		}},
		{"entry count", "entries section is", func(b []byte) { le.PutUint64(b[16:], 3) }},
		{"zero entries", "entries section is", func(b []byte) { le.PutUint64(b[16:], 0) }},
		{"section outside file", "lies outside", func(b []byte) { le.PutUint64(b[32+8:], 1<<40) }},
		{"slash in name", "invalid name", func(b []byte) { nameAt(b, "a/x1")[1] = '/' }},
		{"NUL in name", "invalid name", func(b []byte) { nameAt(b, "b")[0] = 0 }},
		{"dot-dot name", "invalid name", func(b []byte) { copy(nameAt(b, "a/x1"), ".."); at(b, "a/x1")[eNameLen] = 2 }},
		{"empty name", "invalid name", func(b []byte) { at(b, "c")[eNameLen] = 0 }},
		{"name past section", "invalid name", func(b []byte) { le.PutUint64(at(b, "c"), 1<<20) }},
		{"unsorted siblings", "not strictly sorted", func(b []byte) { nameAt(b, "a/x2")[1] = '0' }},
		{"duplicate siblings", "not strictly sorted", func(b []byte) { nameAt(b, "a/x2")[1] = '1' }},
		{"shard out of range", "names shard", func(b []byte) { le.PutUint32(at(b, "c")[eShard:], 99) }},
		{"extent past shard", "runs past the end", func(b []byte) { le.PutUint64(at(b, "b/y")[eB:], 1<<30) }},
		{"overlapping extents", "overlaps or precedes", func(b []byte) { le.PutUint64(at(b, "b/y")[eA:], 0) }},
		{"extent overflow", "runs past the end", func(b []byte) { le.PutUint64(at(b, "b/y")[eA:], 1<<63); le.PutUint64(at(b, "b/y")[eB:], 1<<63) }},
		{"bad mode", "unsupported mode", func(b []byte) { le.PutUint16(at(b, "c")[eMode:], 0o120777) }},
		{"root is a file", "not the root", func(b []byte) { le.PutUint16(b[entriesOff+eMode:], modeRegular) }},
		{"child range past table", "outside the table", func(b []byte) { le.PutUint64(at(b, "a")[eB:], 1000) }},
		{"child range before dir", "outside the table", func(b []byte) { le.PutUint64(at(b, "a")[eA:], 0) }},
		{"wrong parent", "names parent", func(b []byte) { le.PutUint32(at(b, "a/x1")[eParent:], 2) }},
		{"empty dir with first child", "has first child", func(b []byte) { le.PutUint64(at(b, "empty")[eA:], 3) }},
		{"dir with file fields", "nonzero file fields", func(b []byte) { le.PutUint32(at(b, "a")[eCRC:], 7) }},
		{"shard kind", "unknown kind", func(b []byte) { le.PutUint16(b[int(le.Uint64(b[56:]))+10:], 9) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			buf := bytes.Clone(good)
			c.edit(buf)
			_, err := Parse(reseal(buf))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Parse = %v, want an error containing %q", err, c.want)
			}
			if !strings.Contains(c.name, "version") && !errors.Is(err, ErrCorrupt) {
				t.Errorf("error %v does not wrap ErrCorrupt", err)
			}
		})
	}
}

// TestParseRejectsBadTarSets corrupts a version 2 index (tar shards, extent order, a hard
// link) in the ways its own rules forbid, and checks that Parse names each one; the rules of
// version 1 are checked above and hold in version 2 too.
func TestParseRejectsBadTarSets(t *testing.T) {
	nodes, shards := tarLaidTree(t, 1<<20, "b/y", "a/x2", "a/x1", "c", "zero")
	shards[0].Name = "../tars/x.tar"
	good := encodeIndex(nodes, shards, false)
	x, err := Parse(good)
	if err != nil {
		t.Fatal(err)
	}
	if le.Uint32(good[8:]) != versionTars || x.order == nil || !x.Checksums() {
		t.Fatalf("version %d, order %v, checksums %v: want version 2 with an extent order and checksums", le.Uint32(good[8:]), x.order != nil, x.Checksums())
	}
	entriesOff, orderOff := int(le.Uint64(good[32:])), int(le.Uint64(good[orderDesc:]))
	shardName := func(b []byte) []byte {
		r := b[int(le.Uint64(b[56:])):]
		return b[int(le.Uint64(b[80:]))+int(le.Uint64(r)):][:le.Uint16(r[8:])]
	}
	at := func(buf []byte, p string) []byte {
		id, _ := x.LookupPath(p)
		return buf[entriesOff+int(id)*entrySize:]
	}
	cases := []struct {
		name, want string
		edit       func(b []byte)
	}{
		{"order names a directory", "not a file, or named twice", func(b []byte) { le.PutUint32(b[orderOff:], 1) }},
		{"order names a file twice", "not a file, or named twice", func(b []byte) { copy(b[orderOff:orderOff+4], b[orderOff+4:]) }},
		{"order past the table", "not a file, or named twice", func(b []byte) { le.PutUint32(b[orderOff:], 1<<30) }},
		{"order too short", "extent order section is", func(b []byte) { le.PutUint64(b[orderDesc+8:], 4) }},
		{"order not ascending", "in extent order", func(b []byte) {
			end := orderOff + 4*x.Files()
			first, last := bytes.Clone(b[orderOff:orderOff+4]), bytes.Clone(b[end-4:end])
			copy(b[orderOff:], last)
			copy(b[end-4:], first)
		}},
		{"overlap", "in extent order", func(b []byte) { le.PutUint64(at(b, "a/x2")[eA:], le.Uint64(at(b, "a/x1")[eA:])+1) }},
		{"hard link with another checksum", "in extent order", func(b []byte) { le.PutUint32(at(b, "c")[eCRC:], 1) }},
		{"order flag without section", "lies outside", func(b []byte) { le.PutUint64(b[orderDesc:], 1<<40) }},
		{"checksum without checksums", "has a checksum", func(b []byte) { le.PutUint32(b[12:], le.Uint32(b[12:])|flagNoChecksums) }},
		{"absolute path with dot-dot", "invalid name", func(b []byte) { copy(shardName(b), "/../tars/") }},
		{"empty path component", "invalid name", func(b []byte) { copy(shardName(b), "..//tars/") }},
		{"NUL in path", "invalid name", func(b []byte) { shardName(b)[3] = 0 }},
		{"path ends in slash", "invalid name", func(b []byte) { n := shardName(b); n[len(n)-1] = '/' }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			buf := bytes.Clone(good)
			c.edit(buf)
			_, err := Parse(reseal(buf))
			if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Parse = %v, want an error wrapping ErrCorrupt containing %q", err, c.want)
			}
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
// entry can be looked up by name and path without panicking. The seed corpus (f.Add and
// testdata/fuzz/FuzzParse) runs as a normal test.
func FuzzParse(f *testing.F) {
	good := testIndex(f)
	f.Add(good)
	f.Add(good[:headerSize])
	nodes, shards := tree(1<<20, "only")
	f.Add(encodeIndex(nodes, shards, false))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkParsed(t, data)
		if len(data) >= headerSize {
			// With checksums recomputed, mutations reach the structural checks behind them.
			checkParsed(t, reseal(bytes.Clone(data)))
		}
	})
}

// checkParsed parses data and, if it is accepted, looks up every entry by name and by path.
func checkParsed(t *testing.T, data []byte) {
	x, err := Parse(data)
	if err != nil {
		return
	}
	{
		for i := 0; i < x.Len(); i++ {
			e := x.Entry(ID(i))
			if !e.IsDir() {
				continue
			}
			for c := e.FirstChild; c < e.FirstChild+ID(e.NumChildren); c++ {
				if got, ok := x.Lookup(ID(i), string(x.Name(c))); !ok || got != c {
					t.Fatalf("Lookup(%d, %q) = %d, %v; want %d", i, x.Name(c), got, ok, c)
				}
				if got, ok := x.LookupPath(x.Path(c)); !ok || got != c {
					t.Fatalf("LookupPath(%q) = %d, %v; want %d", x.Path(c), got, ok, c)
				}
			}
		}
	}
}

func ExampleIndex_Lookup() {
	nodes, shards := tree(1<<20, "train/cat/1.jpg", "train/dog/2.jpg")
	x, _ := Parse(encodeIndex(nodes, shards, false))
	dog, _ := x.LookupPath("train/dog")
	id, ok := x.Lookup(dog, "2.jpg")
	fmt.Println(x.Path(id), ok, x.Entry(id).Size)
	// Output: train/dog/2.jpg true 15
}

// TestLookupLargeDirectory checks every child and many absent names of directories large enough
// for long probe sequences and wrap-around in their table regions.
func TestLookupLargeDirectory(t *testing.T) {
	var paths []string
	for i := range 5000 {
		paths = append(paths, fmt.Sprintf("big/%d", i), fmt.Sprintf("small%d/x", i%3))
	}
	nodes, shards := tree(1<<20, paths...)
	x, err := Parse(encodeIndex(nodes, shards, false))
	if err != nil {
		t.Fatal(err)
	}
	big, _ := x.LookupPath("big")
	for i := range 5000 {
		id, ok := x.Lookup(big, fmt.Sprint(i))
		if !ok || x.Path(id) != fmt.Sprintf("big/%d", i) {
			t.Fatalf("Lookup(big, %d) = %q, %v", i, x.Path(id), ok)
		}
		if _, ok := x.Lookup(big, fmt.Sprintf("%d.", i)); ok {
			t.Fatalf("Lookup(big, %d.) found a missing name", i)
		}
	}
	file, _ := x.LookupPath("small0/x")
	if _, ok := x.Lookup(file, "x"); ok {
		t.Error("Lookup under a file succeeded")
	}
}

// Shard versions (S3 ETags) round-trip through the index and set the header flag only when
// present, so local shard sets stay byte-identical to those of earlier versions.
func TestShardVersions(t *testing.T) {
	nodes, shards := tree(2, "b/y", "a/x2", "a/x1", "c")
	plain := encodeIndex(nodes, shards, false)
	if le.Uint32(plain[12:]) != 0 {
		t.Fatalf("flags = %#x without versions, want 0", le.Uint32(plain[12:]))
	}
	for i := range shards {
		shards[i].Version = fmt.Sprintf(`"%032x-%d"`, i*7919, i+1)
	}
	x, err := Parse(encodeIndex(nodes, shards, false))
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
	if id, ok := x.LookupPath("a/x1"); !ok || string(x.Name(id)) != "x1" {
		t.Errorf("lookup after versioned shard table: %v %q", ok, x.Name(id))
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

// TestIndexFacts checks Files, FileBytes, ShardBytes, NextFile and FileAt against scans in id
// order, for every id and every file index, and that NextFile and FileAt allocate nothing.
func TestIndexFacts(t *testing.T) {
	for _, paths := range factTrees {
		nodes, shards := tree(8, paths...)
		x, err := Parse(encodeIndex(nodes, shards, false))
		if err != nil {
			t.Fatal(err)
		}
		n := ID(x.Len())
		var files []ID
		var fileBytes, shardBytes uint64
		for id := ID(0); id < n; id++ {
			if e := x.Entry(id); !e.IsDir() {
				files = append(files, id)
				fileBytes += e.Size
			}
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
		id, ok := x.LookupPathBytes([]byte(c.path))
		sid, sok := x.LookupPath(c.path)
		if id != c.id || ok != c.ok || sid != c.id || sok != c.ok {
			t.Errorf("LookupPathBytes(%q) = %d, %v and LookupPath = %d, %v; want %d, %v", c.path, id, ok, sid, sok, c.id, c.ok)
		}
	}
	path := []byte("/a//sub/./deep/f")
	if allocs := testing.AllocsPerRun(100, func() {
		if _, ok := x.LookupPathBytes(path); !ok {
			t.Fatal("not found")
		}
	}); allocs != 0 {
		t.Errorf("LookupPathBytes allocates %.0f times", allocs)
	}
}
