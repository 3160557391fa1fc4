package erofsmeta

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/erofs/go-erofs"

	"github.com/aifs/aifs/internal/testenv"
	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/layout/pack"
	"github.com/aifs/aifs/layout/tarindex"
	"github.com/aifs/aifs/layout/view"
)

// edgeTree is a source tree with what a tree can hold that an image might get wrong: names of
// any bytes (a newline, invalid UTF-8, a whiteout's ".wh." prefix, 255 bytes, names sorting
// before "." and ".."), empty files and directories, a file larger than a shard, a directory
// whose entries take many blocks, and (set by writeEdgeTree) nanosecond and pre-1970 mtimes
// and setuid, setgid and sticky bits.
var edgeTree = map[string]string{
	"train/cat/1.jpg":        "meow",
	"train/cat/2.jpg":        strings.Repeat("c", 5000),
	"train/dog/a b.jpg":      "woof woof",
	"train/dog/new\nline":    "nl",
	"train/dog/\xff\xfe.bin": "not utf-8",
	"train/dog/.wh.whiteout": "not a whiteout",
	"train/dog/.wh..wh..opq": "not opaque",
	"train/dog/-dash":        "-",
	"train/dog/!bang":        "!",
	"train/dog/...":          "three dots",
	strings.Repeat("n", 255): "long name",
	"zero":                   "",
	"empty/":                 "",
	"big":                    strings.Repeat("0123456789", 2000), // 20 KB: larger than a shard of 4 KiB
}

// writeEdgeTree writes edgeTree under src, with 600 files in one directory (their entries take
// many blocks of 512 bytes), and odd modes and mtimes.
func writeEdgeTree(t *testing.T, src string) {
	t.Helper()
	tree := map[string]string{}
	for p, c := range edgeTree {
		tree[p] = c
	}
	for i := range 600 {
		tree[fmt.Sprintf("many/sample-%05d.jpg", i)] = fmt.Sprint(i)
	}
	for p, c := range tree {
		full := filepath.Join(src, p)
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	odd := []struct {
		path  string
		mode  fs.FileMode
		mtime time.Time
	}{
		{"train/cat/1.jpg", 0o755 | fs.ModeSetuid | fs.ModeSetgid, time.Unix(1_700_000_000, 123_456_789)},
		{"train/cat/2.jpg", 0o600, time.Unix(-86_400*365, 999_999_999)}, // 1969
		{"empty", 0o700 | fs.ModeDir | fs.ModeSticky, time.Unix(0, 1)},
		{"zero", 0o444, time.Unix(2_000_000_000, 5)},
	}
	for _, o := range odd {
		full := filepath.Join(src, o.path)
		if err := os.Chmod(full, o.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(full, o.mtime, o.mtime); err != nil {
			t.Fatal(err)
		}
	}
}

// packed packs the edge tree into shards of 4 KiB aligned to align and returns the set's
// directory and index.
func packed(t *testing.T, align int64) (string, *layout.Index) {
	t.Helper()
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "set")
	writeEdgeTree(t, src)
	if _, err := pack.Pack(context.Background(), src, dst, pack.Options{ShardSize: 4096, Align: align}); err != nil {
		t.Fatal(err)
	}
	x, err := layout.Load(dst)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(x.Close)
	return dst, x
}

// shardReaders returns the shards of the set in dir, in order, as devices for go-erofs.
func shardReaders(t *testing.T, dir string, x *layout.Index) []io.ReaderAt {
	t.Helper()
	var devs []io.ReaderAt
	for _, s := range x.Shards() {
		b, err := os.ReadFile(layout.ShardPath(dir, s))
		if err != nil {
			t.Fatal(err)
		}
		devs = append(devs, bytes.NewReader(b))
	}
	return devs
}

// build builds x's image with block size bs.
func build(t *testing.T, x *layout.Index, bs int) []byte {
	t.Helper()
	img := filepath.Join(t.TempDir(), "img")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := Build(x, f, bs); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// unixMode returns a Go file mode as st_mode bits of a directory or regular file.
func unixMode(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	for _, b := range []struct {
		g fs.FileMode
		u uint32
	}{{fs.ModeSetuid, 0o4000}, {fs.ModeSetgid, 0o2000}, {fs.ModeSticky, 0o1000}} {
		if m&b.g != 0 {
			u |= b.u
		}
	}
	switch {
	case m.IsDir():
		u |= layout.ModeDir
	case m.IsRegular():
		u |= layout.ModeRegular
	}
	return u
}

// compareImage opens img with go-erofs over the shards devs and compares every entry of x with
// it: the listing of every directory (names and order), and every entry's mode, size, mtime to
// the nanosecond, owner and link count, and every file's bytes with its extent's. It fails if
// the image holds an entry the index does not (a .aifs directory, say).
func compareImage(t *testing.T, x *layout.Index, img []byte, devs []io.ReaderAt) {
	t.Helper()
	fsys, err := erofs.Open(bytes.NewReader(img), erofs.WithExtraDevices(devs...))
	if err != nil {
		t.Fatalf("go-erofs refuses the image: %v", err)
	}
	seen := 0
	err = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		seen++
		id := layout.Root
		if p != "." {
			if id, err = x.LookupPath(p); err != nil {
				t.Errorf("the image holds %q, the index does not", p)
				return nil
			}
		}
		e := x.Entry(id)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st := fi.Sys().(*erofs.Stat)
		wantLinks, wantSize := 1, int64(e.Size)
		if e.IsDir() {
			wantLinks, wantSize = 2, fi.Size() // a directory's size is its entries'
		}
		// go-erofs's FileInfo.Mode drops the setuid, setgid and sticky bits the image holds;
		// its Stat's Mode has them.
		if got := unixMode(st.Mode); got != e.Mode || fi.Size() != wantSize || fi.ModTime().UnixNano() != e.MTime ||
			st.UID != 0 || st.GID != 0 || st.Nlink != wantLinks {
			t.Errorf("%q: mode %#o size %d mtime %d owner %d:%d nlink %d; want %#o %d %d 0:0 %d",
				p, got, fi.Size(), fi.ModTime().UnixNano(), st.UID, st.GID, st.Nlink, e.Mode, e.Size, e.MTime, wantLinks)
		}
		if e.IsDir() {
			ents, err := fs.ReadDir(fsys, p)
			if err != nil {
				return err
			}
			if len(ents) != int(e.NumChildren) {
				t.Errorf("%q lists %d entries, the index %d", p, len(ents), e.NumChildren)
				return nil
			}
			for i, de := range ents {
				if want := string(x.Name(e.FirstChild + layout.ID(i))); de.Name() != want {
					t.Errorf("%q: entry %d is %q, want %q", p, i, de.Name(), want)
				}
			}
			return nil
		}
		got, err := fs.ReadFile(fsys, p)
		if err != nil {
			t.Errorf("%q: %v", p, err)
			return nil
		}
		want := make([]byte, e.Size)
		if _, err := devs[e.Shard].ReadAt(want, int64(e.Offset)); err != nil && e.Size > 0 {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%q: the image gives %d bytes that differ from the shard's %d", p, len(got), len(want))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen != x.Len() {
		t.Errorf("the image holds %d entries, the index %d", seen, x.Len())
	}
}

func TestBuildPacked(t *testing.T) {
	for _, align := range []int64{512, 4096} {
		t.Run(fmt.Sprint(align), func(t *testing.T) {
			dir, x := packed(t, align)
			bs, err := Check(x)
			if err != nil || bs != int(align) {
				t.Fatalf("Check = %d, %v; want %d", bs, err, align)
			}
			if len(x.Shards()) < 3 {
				t.Fatalf("%d shards: the test wants several", len(x.Shards()))
			}
			img := build(t, x, bs)
			compareImage(t, x, img, shardReaders(t, dir, x))
			checkDeviceTable(t, x, img, bs)
			if again := build(t, x, bs); !bytes.Equal(img, again) {
				t.Error("two builds of one index differ")
			}
			if align == 4096 { // a set aligned to 4 KiB is aligned to 512 bytes too
				compareImage(t, x, build(t, x, 512), shardReaders(t, dir, x))
			}
		})
	}
}

// checkDeviceTable checks the image's device table as the kernel reads it (go-erofs's reader
// ignores it): one slot per shard, where the superblock says, each giving its shard's size in
// blocks.
func checkDeviceTable(t *testing.T, x *layout.Index, img []byte, bs int) {
	t.Helper()
	sb := img[superblockOffset:]
	n, slot := int(binary.LittleEndian.Uint16(sb[86:])), int(binary.LittleEndian.Uint16(sb[88:]))*deviceSlotSize
	if n != len(x.Shards()) {
		t.Fatalf("the superblock counts %d devices; the set has %d shards", n, len(x.Shards()))
	}
	for i, s := range x.Shards() {
		if got, want := binary.LittleEndian.Uint32(img[slot+i*deviceSlotSize+64:]), blocks(s.Size, bs); uint64(got) != want {
			t.Fatalf("device %d is %d blocks in the device table; shard %s is %d bytes, %d blocks", i+1, got, s.Name, s.Size, want)
		}
	}
}

// tarOf returns a tar holding members in order, directories where a name ends in "/".
func tarOf(t *testing.T, members ...[2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	mtime := time.Unix(1_600_000_000, 0)
	for _, m := range members {
		h := &tar.Header{Name: m[0], Mode: 0o644, Size: int64(len(m[1])), Typeflag: tar.TypeReg, ModTime: mtime, Format: tar.FormatPAX}
		if strings.HasSuffix(m[0], "/") {
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		}
		if m[1] == "=link" {
			h.Typeflag, h.Linkname, h.Size = tar.TypeLink, "a/1.txt", 0
		}
		if err := w.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			w.Write([]byte(m[1]))
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestBuildTars(t *testing.T) {
	tars := [][]byte{
		tarOf(t, [2]string{"a/", ""}, [2]string{"a/2.txt", "two"}, [2]string{"a/1.txt", strings.Repeat("1", 700)},
			[2]string{"a/link", "=link"}, [2]string{"a/empty", ""}, [2]string{"b/new\nline", "x"}),
		tarOf(t, [2]string{"k1.jpg", "jpeg one"}, [2]string{"k1.cls", "3"}, [2]string{"k2.jpg", "jpeg two"}, [2]string{"k2.cls", "7"}),
	}
	for _, view := range []view.Kind{view.Tree, view.Merge, view.ImageFolder} {
		t.Run(fmt.Sprint(view), func(t *testing.T) {
			var srcs []tarindex.Source
			var devs []io.ReaderAt
			for i, b := range tars {
				srcs = append(srcs, tarindex.Source{Name: fmt.Sprintf("t%d.tar", i), Label: fmt.Sprint(i), Size: int64(len(b)), MTime: 1e18,
					Open: func(context.Context) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }})
				devs = append(devs, bytes.NewReader(b))
			}
			idx, _, err := tarindex.IndexTars(context.Background(), srcs, tarindex.Options{View: view})
			if err != nil {
				t.Fatal(err)
			}
			x, err := layout.Parse(idx)
			if err != nil {
				t.Fatal(err)
			}
			bs, err := Check(x)
			if err != nil || bs != MinBlockSize {
				t.Fatalf("Check of a tar set = %d, %v; want %d", bs, err, MinBlockSize)
			}
			img := build(t, x, bs)
			compareImage(t, x, img, devs)
			checkDeviceTable(t, x, img, bs)
		})
	}
}

func TestCheckRefusesUnaligned(t *testing.T) {
	_, x := packed(t, 1)
	bs, err := Check(x)
	var ns *NotServable
	if !errors.As(err, &ns) || !strings.Contains(ns.Reason, "not aligned to 512 bytes") || !strings.Contains(ns.Reason, "aifs pack") {
		t.Fatalf("Check of a set packed tight = %d, %v; want a NotServable saying to repack", bs, err)
	}
	var out bytes.Buffer
	if err := Build(x, &nopSeeker{&out}, 512); !errors.As(err, &ns) || out.Len() > 0 {
		t.Errorf("Build of a set packed tight = %v with %d bytes written; want NotServable and nothing", err, out.Len())
	}
}

// TestCheckRefuses checks Check's other reasons: a shard that is not whole blocks (EROFS fails
// the read of its last block), and more shards than EROFS has devices.
func TestCheckRefuses(t *testing.T) {
	encode := func(size uint64, shards int) *layout.Index {
		root := &layout.Node{Mode: layout.ModeDir | 0o755, Children: []*layout.Node{
			{Name: "a", Mode: layout.ModeRegular | 0o644, Size: 10, Offset: 4096},
		}}
		ss := make([]layout.Shard, shards)
		for i := range ss {
			ss[i] = layout.Shard{Name: layout.ShardName(i), Size: size}
		}
		x, err := layout.Parse(layout.EncodeIndex(layout.Number(root), ss, true))
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	for _, c := range []struct {
		x      *layout.Index
		bs     int
		reason string
	}{
		{encode(8192, 1), 4096, ""},
		{encode(4096+512, 1), 512, ""},
		{encode(4096+10, 1), 0, "not a whole number of 512-byte blocks"},
		{encode(8192, MaxDevices+1), 0, "EROFS takes at most 65535 devices"},
	} {
		bs, err := Check(c.x)
		var ns *NotServable
		if c.reason == "" && (err != nil || bs != c.bs) || c.reason != "" && (!errors.As(err, &ns) || !strings.Contains(ns.Reason, c.reason)) {
			t.Errorf("Check = %d, %v; want %d %q", bs, err, c.bs, c.reason)
		}
	}
}

// TestBuildRefusesCorruptIndex flips a byte in each of an index's blocks in turn (a version 3
// index is checked block by block as it is used) and checks that Build writes nothing.
func TestBuildRefusesCorruptIndex(t *testing.T) {
	dir, x := packed(t, 4096)
	good, err := os.ReadFile(filepath.Join(dir, layout.IndexName))
	if err != nil {
		t.Fatal(err)
	}
	refused := 0 // by Build, the rest at load (the header, the small sections)
	for off := 256; off < len(good); off += 97 {
		bad := bytes.Clone(good)
		bad[off] ^= 0x40
		y, err := layout.Parse(bad)
		if err != nil {
			continue
		}
		var out bytes.Buffer
		if err := Build(y, &nopSeeker{&out}, 4096); err == nil {
			t.Fatalf("Build of an index with byte %d flipped succeeded", off)
		} else if out.Len() > 0 {
			t.Fatalf("Build of an index with byte %d flipped wrote %d bytes before failing (%v)", off, out.Len(), err)
		}
		refused++
	}
	if refused < 10 {
		t.Fatalf("Build refused %d corrupt indexes: the test does not reach it", refused)
	}
	if x.Err() != nil {
		t.Fatal(x.Err())
	}
}

// nopSeeker is a WriteSeeker over a buffer that only counts what is written: a test fails on
// any byte, so seeking need not be right.
type nopSeeker struct{ w io.Writer }

func (n *nopSeeker) Write(p []byte) (int, error)    { return n.w.Write(p) }
func (n *nopSeeker) Seek(int64, int) (int64, error) { return 0, nil }

// TestCachedBuildBound: with no image yet, a bound under BuildBytes refuses to build, with a
// NotServable naming the memory; an image already built is reused under any bound.
func TestCachedBuildBound(t *testing.T) {
	dir, x := packed(t, 4096)
	need := BuildBytes(x.Len())
	_, _, err := Cached(x, dir, need-1)
	var ns *NotServable
	if !errors.As(err, &ns) || !strings.Contains(err.Error(), "memory") {
		t.Fatalf("Cached under a bound of %d bytes for %d entries = %v; want a NotServable about memory", need-1, x.Len(), err)
	}
	if ents, _ := os.ReadDir(dir); slices.ContainsFunc(ents, func(e os.DirEntry) bool { return strings.HasPrefix(e.Name(), ImagePrefix) }) {
		t.Error("an image was written though building was refused")
	}
	p, _, err := Cached(x, dir, need)
	if err != nil {
		t.Fatalf("Cached at a bound of BuildBytes: %v", err)
	}
	if p2, _, err := Cached(x, dir, 1); err != nil || p2 != p {
		t.Errorf("Cached of a built image under a bound of 1 byte = %q, %v; want %q reused", p2, err, p)
	}
}

func TestCached(t *testing.T) {
	dir, x := packed(t, 4096)
	p, bs, err := Cached(x, dir, 0)
	if err != nil || bs != 4096 || filepath.Dir(p) != dir || !strings.HasPrefix(filepath.Base(p), ImagePrefix) {
		t.Fatalf("Cached = %q, %d, %v; want an image beside the index", p, bs, err)
	}
	st1, _ := os.Stat(p)
	p2, _, err := Cached(x, dir, 0)
	st2, _ := os.Stat(p2)
	if err != nil || p2 != p || !os.SameFile(st1, st2) {
		t.Errorf("Cached again = %q, %v: want the same file reused", p2, err)
	}
	img, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	compareImage(t, x, img, shardReaders(t, dir, x))
	// A damaged image is not reused: it is rebuilt.
	if err := os.WriteFile(p, img[:len(img)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	p3, _, err := Cached(x, dir, 0)
	if b, _ := os.ReadFile(p3); err != nil || !bytes.Equal(b, img) {
		t.Errorf("Cached after the image was truncated = %q, %v, %d bytes; want it rebuilt (%d bytes)", p3, err, len(b), len(img))
	}
	// One that others may write is not reused either.
	os.Chmod(p3, 0o666)
	if p4, _, err := Cached(x, dir, 0); err != nil {
		t.Error(err)
	} else if fi, _ := os.Stat(p4); fi.Mode().Perm() != 0o644 {
		t.Errorf("Cached reused an image others may write (%v)", fi.Mode())
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ImagePrefix) && e.Name() != filepath.Base(p) {
			t.Errorf("%s left beside the index", e.Name())
		}
	}
	// aifs pack --force replaces the set and its cached image.
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "f"), []byte("f"), 0o644)
	if _, err := pack.Pack(context.Background(), src, dir, pack.Options{Force: true}); err != nil {
		t.Fatalf("pack --force over a set with a cached image: %v", err)
	}
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the cached image of the replaced set is still there (%v)", err)
	}
}

// TestCachedReadOnlyDir checks that the image of a set in a directory Cached cannot write goes
// to the cache directory, and is found there the next time.
func TestCachedReadOnlyDir(t *testing.T) {
	dir, x := packed(t, 4096)
	cache := t.TempDir()
	if os.Geteuid() == 0 { // root writes into a directory of mode 0555: make it a read-only mount
		testenv.Need(t, "a read-only bind mount, as root")
		systemCacheDir = filepath.Join(cache, "system")
		t.Cleanup(func() { systemCacheDir = SystemCacheDir })
		if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
			t.Fatalf("bind mount: %v", err)
		}
		t.Cleanup(func() { syscall.Unmount(dir, 0) })
		if err := syscall.Mount("", dir, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
			t.Fatalf("remount read-only: %v", err)
		}
	} else {
		t.Setenv("XDG_CACHE_HOME", cache)
		os.Chmod(dir, 0o555)
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
	}
	p, _, err := Cached(x, dir, 0)
	if err != nil || !strings.HasPrefix(p, cache+"/") {
		t.Fatalf("Cached for a read-only set = %q, %v; want an image under %s", p, err, cache)
	}
	st1, _ := os.Stat(p)
	p2, _, err := Cached(x, dir, 0)
	if st2, _ := os.Stat(p2); err != nil || !os.SameFile(st1, st2) {
		t.Errorf("Cached again = %q, %v; want %q reused", p2, err, p)
	}
}

// BenchmarkBuildFlat builds the image of a set of 1 M files of 100 KiB in one directory
// (docs/bench/erofs-notes.md): go test -run - -bench BuildFlat -benchmem ./layout/erofsmeta.
func BenchmarkBuildFlat(b *testing.B) {
	const files, size, perShard = 1 << 20, 100 << 10, 10_000
	root := &layout.Node{Mode: layout.ModeDir | 0o755, MTime: 1e18}
	var shards []layout.Shard
	for i := range files {
		if i%perShard == 0 {
			shards = append(shards, layout.Shard{Name: layout.ShardName(len(shards)), Size: perShard * size})
		}
		root.Children = append(root.Children, &layout.Node{Name: fmt.Sprintf("n%08d.JPEG", i), Mode: layout.ModeRegular | 0o644,
			MTime: 1e18 + int64(i), Size: size, Offset: uint64(i%perShard) * size, Shard: uint32(len(shards) - 1)})
	}
	x, err := layout.Parse(layout.EncodeIndex(layout.Number(root), shards, true))
	if err != nil {
		b.Fatal(err)
	}
	root = nil
	b.ResetTimer()
	for range b.N {
		f, err := os.Create(filepath.Join(b.TempDir(), "img"))
		if err != nil {
			b.Fatal(err)
		}
		if err := Build(x, f, BlockSize); err != nil {
			b.Fatal(err)
		}
		fi, _ := f.Stat()
		b.ReportMetric(float64(fi.Size()), "image-bytes")
		f.Close()
	}
}
