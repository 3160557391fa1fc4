package pack

import (
	"bytes"
	"cmp"
	"context"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aifs/aifs/layout"
)

// writeTree creates files (path → content) and empty directories (path ending in "/") under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, p)
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
	}
}

var edgeTree = map[string]string{
	"train/cat/1.jpg":        "meow",
	"train/cat/2.jpg":        strings.Repeat("c", 5000),
	"train/dog/a b.jpg":      "woof woof",
	"train/dog/new\nline":    "nl",
	"train/dog/\xff\xfe.bin": "not utf-8",
	"zero":                   "",
	"empty/":                 "",
	"big":                    strings.Repeat("0123456789", 600_000), // > streamLimit: streamed
}

func pack(t *testing.T, src, dst string, opt Options) *layout.Index {
	t.Helper()
	if _, err := Pack(context.Background(), src, dst, opt); err != nil {
		t.Fatal(err)
	}
	x, err := layout.Load(dst)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// readSample returns the bytes of a packed file straight from its shard.
func readSample(t *testing.T, dir string, x *layout.Index, id layout.ID) []byte {
	t.Helper()
	e := x.Entry(id)
	f, err := os.Open(filepath.Join(dir, x.Shards()[e.Shard].Name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, e.Size)
	if _, err := f.ReadAt(b, int64(e.Offset)); err != nil && len(b) > 0 {
		t.Fatal(err)
	}
	return b
}

func TestPackRoundTrip(t *testing.T) {
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "set")
	writeTree(t, src, edgeTree)
	x := pack(t, src, dst, Options{ShardSize: 4096, Jobs: 3})
	if len(x.Shards()) < 3 {
		t.Errorf("%d shards, want several with a 4 KiB target", len(x.Shards()))
	}
	for p, content := range edgeTree {
		id, err := x.LookupPath(strings.TrimSuffix(p, "/"))
		if err != nil {
			t.Fatalf("%q missing", p)
		}
		e := x.Entry(id)
		if strings.HasSuffix(p, "/") {
			if !e.IsDir() || e.NumChildren != 0 {
				t.Errorf("%q: want an empty directory, got %+v", p, e)
			}
			continue
		}
		if e.Size > 0 && e.Offset%DefaultAlign != 0 {
			t.Errorf("%q starts at byte %d of its shard, not on a %d-byte boundary", p, e.Offset, DefaultAlign)
		}
		if got := readSample(t, dst, x, id); string(got) != content {
			t.Errorf("%q: content differs (%d bytes, want %d)", p, len(got), len(content))
		}
		fi, _ := os.Stat(filepath.Join(src, p))
		if e.Mode != layout.ModeRegular|0o640 || e.MTime != fi.ModTime().UnixNano() {
			t.Errorf("%q: mode %#o mtime %d, want %#o %d", p, e.Mode, e.MTime, layout.ModeRegular|0o640, fi.ModTime().UnixNano())
		}
	}
	dog, _ := x.LookupPath("train/dog")
	d := x.Entry(dog)
	var names []string
	for c := d.FirstChild; c < d.FirstChild+layout.ID(d.NumChildren); c++ {
		names = append(names, string(x.Name(c)))
	}
	if !sort.StringsAreSorted(names) || len(names) != 3 {
		t.Errorf("train/dog lists %q", names)
	}
	var problems []layout.Problem
	if _, err := layout.Verify(context.Background(), dst, x, layout.VerifyOptions{}, func(p layout.Problem) { problems = append(problems, p) }); err != nil || len(problems) > 0 {
		t.Errorf("Verify = %v, %v", problems, err)
	}
}

func TestPackIsDeterministic(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, edgeTree)
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	pack(t, src, a, Options{ShardSize: 4096, Jobs: 1})
	pack(t, src, b, Options{ShardSize: 4096, Jobs: 8})
	ents, _ := os.ReadDir(a)
	for _, e := range ents {
		x, _ := os.ReadFile(filepath.Join(a, e.Name()))
		y, err := os.ReadFile(filepath.Join(b, e.Name()))
		if err != nil || !bytes.Equal(x, y) {
			t.Errorf("%s differs between two packs of the same tree (%v)", e.Name(), err)
		}
	}
}

func TestReadWholeDetectsSizeChange(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	os.WriteFile(p, []byte("12345"), 0o644)
	for _, listed := range []uint64{4, 6} {
		if _, err := readWhole(p, listed); err == nil || !strings.Contains(err.Error(), "changed size") || !strings.Contains(err.Error(), p) {
			t.Errorf("readWhole with listed size %d: %v", listed, err)
		}
		if _, err := streamFile(&bytes.Buffer{}, p, listed, make([]byte, 2)); err == nil || !strings.Contains(err.Error(), "changed size") {
			t.Errorf("streamFile with listed size %d: %v", listed, err)
		}
	}
	// A file whose stat size understates its content, as /proc files do.
	if _, err := readWhole("/proc/self/status", 0); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("readWhole(/proc/self/status): %v", err)
	}
}

func TestPackRefusesBadDestinations(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, map[string]string{"a": "x"})
	notEmpty := t.TempDir()
	os.WriteFile(filepath.Join(notEmpty, "mine.txt"), []byte("keep"), 0o644)
	existing := filepath.Join(t.TempDir(), "set")
	pack(t, src, existing, Options{})
	for _, c := range []struct {
		dst   string
		force bool
		want  string
	}{
		{filepath.Join(src, "inside"), false, "inside the source"},
		{src, false, "inside the source"},
		{notEmpty, true, "not empty"},
		{existing, false, "already holds a shard set"},
		{filepath.Join(src, "a"), false, "inside the source"},
	} {
		if _, err := Pack(context.Background(), src, c.dst, Options{Force: c.force}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Pack to %s (force %v) = %v, want %q", c.dst, c.force, err, c.want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(notEmpty, "mine.txt")); string(b) != "keep" {
		t.Error("a refused pack touched a user file")
	}
	if _, err := os.Stat(filepath.Join(src, "inside")); err == nil {
		t.Error("a refused pack created its destination")
	}
	// Replacing with --force: the new set is valid and the old set's surplus shards are gone.
	writeTree(t, src, map[string]string{"b": strings.Repeat("y", 10000)})
	pack(t, src, existing, Options{Force: true, ShardSize: 4096})
	pack(t, src, existing, Options{Force: true})
	ents, _ := os.ReadDir(existing)
	if len(ents) != 2 {
		t.Errorf("after replacing, the destination holds %d files, want index and 1 shard", len(ents))
	}
}

func TestVerifyFindsCorruptSamples(t *testing.T) {
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "set")
	writeTree(t, src, edgeTree)
	x := pack(t, src, dst, Options{ShardSize: 4096})
	id, _ := x.LookupPath("train/dog/a b.jpg")
	e := x.Entry(id)
	shard := filepath.Join(dst, x.Shards()[e.Shard].Name)
	b, _ := os.ReadFile(shard)
	b[e.Offset+3] ^= 1
	os.WriteFile(shard, b, 0o644)

	var got []string
	verify := func() {
		got = nil
		layout.Verify(context.Background(), dst, x, layout.VerifyOptions{Jobs: 2}, func(p layout.Problem) {
			got = append(got, p.Path+": "+p.Reason)
		})
		sort.Strings(got)
	}
	verify()
	if len(got) != 2 || !strings.HasPrefix(got[0], ": shard checksum mismatch") || !strings.HasPrefix(got[1], "train/dog/a b.jpg: content checksum mismatch") {
		t.Errorf("after flipping a byte of one sample, layout.Verify reports %q", got)
	}
	os.Remove(shard)
	verify()
	if len(got) < 2 || !strings.Contains(strings.Join(got, "\n"), "train/dog/a b.jpg: shard missing") {
		t.Errorf("after deleting its shard, layout.Verify reports %q", got)
	}
}

// TestPackRelativeSource packs through a relative source path, "." included: symlinks inside
// the tree are followed (issue 28: a relative target was compared with the absolute root, and
// every internal symlink was refused as outside), and one out of the tree is still refused.
func TestPackRelativeSource(t *testing.T) {
	base := t.TempDir()
	writeTree(t, base, map[string]string{"t/a/f": "hi", "outside": "secret"})
	if err := os.Mkdir(filepath.Join(base, "t/b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../a/f", filepath.Join(base, "t/b/l")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../a", filepath.Join(base, "t/b/dir")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ cwd, src string }{{base, "t"}, {base, "t/"}, {base, "./t/b/.."}, {filepath.Join(base, "t"), "."}, {filepath.Join(base, "t/a"), ".."}} {
		t.Chdir(c.cwd)
		dst := filepath.Join(t.TempDir(), "set")
		x := pack(t, c.src, dst, Options{})
		for _, p := range []string{"a/f", "b/l", "b/dir/f"} {
			id, err := x.LookupPath(p)
			if err != nil {
				t.Errorf("pack %q from %s: %s missing", c.src, c.cwd, p)
			} else if got := readSample(t, dst, x, id); string(got) != "hi" {
				t.Errorf("pack %q from %s: %s holds %q, want %q", c.src, c.cwd, p, got, "hi")
			}
		}
	}
	if err := os.Symlink("../../outside", filepath.Join(base, "t/b/out")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Join(base, "t"))
	_, err := Pack(context.Background(), ".", filepath.Join(t.TempDir(), "set"), Options{})
	if err == nil || !strings.Contains(err.Error(), "outside the source tree") || !strings.Contains(err.Error(), "b/out") {
		t.Errorf("pack . with b/out -> ../../outside: err %v, want the symlink refused as outside the source tree", err)
	}
}

// TestListFiles checks that ListFiles lists what Pack packs, in the pack order the index
// records, that SkipTop leaves out only a top-level name, and that a symlink out of the tree
// fails the listing unless FollowExternal.
func TestListFiles(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, edgeTree)
	writeTree(t, src, map[string]string{".aifs/stats": "", "train/.aifs": "kept"})
	for _, l := range [][2]string{{"train/cat", "train/dog/cat"}, {"zero", "train/z"}, {"../..", "train/dog/loop"}, {"missing", "dangling"}} {
		if err := os.Symlink(l[0], filepath.Join(src, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	x := pack(t, src, filepath.Join(t.TempDir(), "set"), Options{})
	var want []string
	for i := range x.Files() {
		if p := x.Path(x.FileAt(i)); !strings.HasPrefix(p, ".aifs/") {
			want = append(want, p)
		}
	}
	got, err := ListFiles(context.Background(), src, ListOptions{SkipTop: ".aifs"})
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("ListFiles = %q, %v; want the packed files in pack order %q", got, err, want)
	}
	outside := filepath.Join(t.TempDir(), "f")
	writeTree(t, filepath.Dir(outside), map[string]string{"f": "x"})
	if err := os.Symlink(outside, filepath.Join(src, "train/out")); err != nil {
		t.Fatal(err)
	}
	if _, err := ListFiles(context.Background(), src, ListOptions{}); err == nil || !strings.Contains(err.Error(), "outside the source tree") {
		t.Errorf("ListFiles with a symlink out of the tree: err %v, want it refused", err)
	}
	got, err = ListFiles(context.Background(), src, ListOptions{FollowExternal: true})
	if err != nil || !slices.Contains(got, "train/out") || !slices.Contains(got, ".aifs/stats") {
		t.Errorf("ListFiles with FollowExternal = %q, %v; want train/out and .aifs/stats listed", got, err)
	}
}

// assignShards places files in pack order into shards of about target bytes each, each
// non-empty one starting on a multiple of align and each shard padded to one, as Pack does.
func assignShards(files []*layout.Node, target, align uint64) []layout.Shard {
	var shards []layout.Shard
	up := func(n uint64) uint64 { return (n + align - 1) / align * align }
	start := func(end, size uint64) uint64 {
		if size == 0 {
			return end
		}
		return up(end)
	}
	var end uint64
	for _, f := range files {
		if len(shards) == 0 || end > 0 && start(end, f.Size)+f.Size > target {
			if len(shards) > 0 {
				shards[len(shards)-1].Size = up(end)
			}
			shards = append(shards, layout.Shard{Name: layout.ShardName(len(shards)), Kind: layout.ShardData})
			end = 0
		}
		f.Shard, f.Offset = uint32(len(shards)-1), start(end, f.Size)
		end = f.Offset + f.Size
	}
	if len(shards) > 0 {
		shards[len(shards)-1].Size = up(end)
	}
	return shards
}

// TestPackIndexAsNodeTree checks that Pack writes, byte for byte, the index that Pack wrote when
// it held a *Node per entry: a tree walked as entries came, numbered by number, shards
// assigned by assignShards, encoded by EncodeIndex. The tree has symlinks followed and skipped,
// an empty directory, an empty file, one streamed and deep directories. It also checks that
// the index's size hint is not short.
func TestPackIndexAsNodeTree(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, edgeTree)
	writeTree(t, src, map[string]string{"train/dog/deep/er/f": "x", "a/b/": "", "a/c": "c"})
	for _, l := range [][2]string{{"train/cat", "train/dog/cat"}, {"zero", "train/z"}, {"../..", "train/dog/loop"}, {"missing", "dangling"}} {
		if err := os.Symlink(l[0], filepath.Join(src, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	for _, opt := range []Options{{ShardSize: 4096, Jobs: 3}, {Jobs: 1}, {ShardSize: 4096, Align: 1}, {ShardSize: 1 << 20, Align: 512}} {
		dst := filepath.Join(t.TempDir(), "set")
		x := pack(t, src, dst, opt)
		t.Cleanup(func() { x.Close() })
		got, err := os.ReadFile(filepath.Join(dst, layout.IndexName))
		if err != nil {
			t.Fatal(err)
		}
		if want := nodeTreeIndex(t, src, cmp.Or(opt.ShardSize, 1<<30), cmp.Or(opt.Align, DefaultAlign)); !bytes.Equal(got, want) {
			t.Errorf("shard size %d, align %d: the index differs from the layout.Node tree's (%d bytes, want %d)", opt.ShardSize, opt.Align, len(got), len(want))
		}
		p := &packer{w: walker{warn: func(string) {}, statFiles: true}}
		tr, err := p.walkTree(t.Context(), src)
		if err != nil {
			t.Fatal(err)
		}
		if hint := tr.indexSizeHint(x.Shards()); hint < len(got) {
			t.Errorf("shard size %d: index size hint %d, index %d bytes", opt.ShardSize, hint, len(got))
		}
	}
}

// nodeTreeIndex returns the index of src that Pack's Node tree gave.
func nodeTreeIndex(t *testing.T, src string, shardSize, align int64) []byte {
	w := walker{warn: func(string) {}, statFiles: true}
	fi, err := w.root(src)
	if err != nil {
		t.Fatal(err)
	}
	srcs := map[*layout.Node]string{}
	var walk func(dir string, d *layout.Node, ancestors []fileID)
	walk = func(dir string, d *layout.Node, ancestors []fileID) {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, de := range ents {
			e, ok, err := w.entry(dir, de, ancestors)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				continue
			}
			n := &layout.Node{Name: e.name, Mode: unixMode(e.info), MTime: e.info.ModTime().UnixNano()}
			if !e.dir {
				srcs[n], n.Size = e.path, uint64(e.info.Size())
			} else {
				walk(e.path, n, append(ancestors, e.id))
			}
			d.Children = append(d.Children, n)
		}
	}
	root := &layout.Node{Mode: unixMode(fi), MTime: fi.ModTime().UnixNano()}
	walk(src, root, []fileID{idOf(fi)})
	nodes := layout.Number(root)
	var files []*layout.Node
	for _, n := range nodes {
		if !n.IsDir() {
			files = append(files, n)
		}
	}
	shards := assignShards(files, uint64(shardSize), uint64(align))
	ends := make([]uint64, len(shards)) // where each shard's checksum has come to
	for _, f := range files {
		b, err := os.ReadFile(srcs[f])
		if err != nil {
			t.Fatal(err)
		}
		f.CRC = layout.Checksum(b)
		if f.Size == 0 {
			continue
		}
		s := &shards[f.Shard]
		s.CRC = layout.UpdateChecksum(s.CRC, make([]byte, f.Offset-ends[f.Shard])) // the padding
		s.CRC = layout.UpdateChecksum(s.CRC, b)
		ends[f.Shard] = f.Offset + f.Size
	}
	for i := range shards { // the padding after the last sample
		shards[i].CRC = layout.UpdateChecksum(shards[i].CRC, make([]byte, shards[i].Size-ends[i]))
	}
	return layout.EncodeIndex(nodes, shards, false)
}

// TestPackTreeStores fills a packTree's entries and names past several chunks and reads them
// back in order, as inOrder does.
func TestPackTreeStores(t *testing.T) {
	var tr packTree
	var offs []uint64
	for i := range entryChunk + 1000 {
		name := strings.Repeat(string(rune('a'+i%26)), 1+i%255)
		id, off, err := tr.add(packEntry{size: uint64(i), mode: layout.ModeRegular}, name)
		if err != nil || id != layout.ID(i) {
			t.Fatalf("add %d = %d, %v", i, id, err)
		}
		offs = append(offs, off)
	}
	if len(tr.entries.chunks) < 2 || len(tr.names.chunks) < 3 {
		t.Fatalf("%d entry chunks, %d name chunks: the test does not cross chunks", len(tr.entries.chunks), len(tr.names.chunks))
	}
	var off uint64
	for i := range tr.len() {
		e := tr.entries.at(layout.ID(i))
		off = nameStart(off, int(e.nameLen))
		want := strings.Repeat(string(rune('a'+i%26)), 1+i%255)
		if e.size != uint64(i) || off != offs[i] || string(tr.names.at(off, e.nameLen)) != want {
			t.Fatalf("entry %d: size %d, name at %d (added at %d) %q", i, e.size, off, offs[i], tr.names.at(off, e.nameLen))
		}
		off += uint64(e.nameLen)
	}
}
