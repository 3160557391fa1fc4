package fs

// Tier-2 tests: the FS's RawFileSystem methods called directly, with no kernel and no
// mount, over a shard set packed from a source tree in t.TempDir() and served from memory. The
// expected answers come from stat(2) and reads of the source tree, not from the index.

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"go.uber.org/zap/zaptest"

	"github.com/aifs/aifs/backend"
	"github.com/aifs/aifs/backend/memory"
	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/layout/pack"
)

// bigSize is larger than one READ window (1 MiB, mount.go's maxRead) and ends mid-page.
const bigSize = 5<<19 + 17

// oddNames are names with bytes that are not plain ASCII words, in the "odd" directory.
var oddNames = []string{"a b", "new\nline", "\xff\xfe.bin", "ünï", "tab\there", strings.Repeat("n", 255)}

// writeSourceTree creates the test tree under dir: files at the root and in nested directories,
// an empty file, an empty directory, a file larger than a READ window, names with odd bytes, a
// directory of 50 files (listed over several READDIRs), symlinks to a file and to a directory
// (packed as what they point to) and a dangling symlink (skipped). Every file and directory gets
// its own mode and an mtime with nanoseconds.
func writeSourceTree(t *testing.T, dir string) {
	rng := rand.New(rand.NewPCG(7, 7))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	files := map[string][]byte{
		"a.txt":                  []byte("hello, aifs\n"),
		"empty":                  nil,
		"big.bin":                random(bigSize),
		"exec.sh":                []byte("#!/bin/sh\necho hi\n"),
		"readonly":               []byte("r"),
		"nested/x":               []byte("x"),
		"nested/deeper/leaf.dat": random(5000),
		"nested/deeper/zz":       random(4096),
	}
	for _, n := range oddNames {
		files["odd/"+n] = []byte("odd:" + n)
	}
	for i := range 50 {
		files[fmt.Sprintf("many/f%03d", i)] = random(rng.IntN(3000))
	}
	for p, data := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "emptydir"), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"link": "a.txt", "linkdir": "nested", "dangling": "nowhere"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	modes := map[string]os.FileMode{"exec.sh": 0o755, "readonly": 0o400, "big.bin": 0o600, "nested": 0o750, "emptydir": 0o700}
	for p, m := range modes {
		if err := os.Chmod(filepath.Join(dir, p), m); err != nil {
			t.Fatal(err)
		}
	}
	// mtimes last: creating entries changes their directory's mtime.
	paths := append(slices.Sorted(maps.Keys(files)), "", "emptydir", "nested", "nested/deeper", "odd", "many")
	for i, p := range paths {
		mt := time.Unix(1_700_000_000+int64(i)*1000, int64(i)*1_000_003+1)
		if err := os.Chtimes(filepath.Join(dir, p), mt, mt); err != nil {
			t.Fatal(err)
		}
	}
}

// srcEntry is what the source tree holds at one path, following symlinks as Pack does.
type srcEntry struct {
	mode     uint32
	sec      int64 // mtime
	nsec     int64
	data     []byte   // files
	children []string // directories: names in byte order
}

func (e srcEntry) isDir() bool { return e.mode&syscall.S_IFMT == syscall.S_IFDIR }

// walkSource returns the entries of the tree at root by path ("" is the root), skipping dangling
// symlinks.
func walkSource(t *testing.T, root string) map[string]srcEntry {
	want := map[string]srcEntry{}
	var walk func(rel string)
	walk = func(rel string) {
		full := filepath.Join(root, rel)
		var st syscall.Stat_t
		if err := syscall.Stat(full, &st); err != nil {
			t.Fatal(err)
		}
		e := srcEntry{mode: st.Mode, sec: st.Mtim.Sec, nsec: st.Mtim.Nsec}
		if e.isDir() {
			ents, err := os.ReadDir(full)
			if err != nil {
				t.Fatal(err)
			}
			for _, de := range ents { // sorted by name
				if _, err := os.Stat(filepath.Join(full, de.Name())); err != nil {
					continue // dangling
				}
				e.children = append(e.children, de.Name())
				walk(path.Join(rel, de.Name()))
			}
		} else {
			var err error
			if e.data, err = os.ReadFile(full); err != nil {
				t.Fatal(err)
			}
		}
		want[rel] = e
	}
	walk("")
	return want
}

// shardSet is a packed tree: its index, its shards' bytes, and the source it was packed from.
type shardSet struct {
	x      *layout.Index
	shards map[string][]byte // shard name → contents
	want   map[string]srcEntry
	paths  []string // keys of want, sorted
}

// packTree builds a tree with write in a temporary directory, packs it into shards of about
// 1 MiB and loads the result.
func packTree(t *testing.T, write func(t *testing.T, dir string)) *shardSet {
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "set")
	write(t, src)
	if _, err := pack.Pack(t.Context(), src, dst, pack.Options{ShardSize: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	x, err := layout.Load(dst)
	if err != nil {
		t.Fatal(err)
	}
	s := &shardSet{x: x, shards: map[string][]byte{}, want: walkSource(t, src)}
	for _, sh := range x.Shards() {
		if s.shards[sh.Name], err = os.ReadFile(filepath.Join(dst, sh.Name)); err != nil {
			t.Fatal(err)
		}
	}
	s.paths = slices.Sorted(maps.Keys(s.want))
	return s
}

// serve returns an FS over b (the memory backend over s's shards if b is nil), closed with the test.
func (s *shardSet) serve(t *testing.T, b backend.Backend, opt Options) *FS {
	if b == nil {
		b = memory.New(s.shards)
	}
	t.Cleanup(func() { b.Close() })
	if opt.Logger == nil {
		opt.Logger = zaptest.NewLogger(t)
	}
	f, err := New(t.Context(), s.x, b, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// newTestFS packs the standard test tree and serves it from memory.
func newTestFS(t *testing.T, opt Options) (*FS, *shardSet) {
	s := packTree(t, writeSourceTree)
	if len(s.x.Shards()) < 3 {
		t.Fatalf("%d shards, want several", len(s.x.Shards()))
	}
	return s.serve(t, nil, opt), s
}

// inoOf returns the inode number that p must have: its index entry id + 1.
func (s *shardSet) inoOf(t testing.TB, p string) uint64 {
	id, err := s.x.LookupPath(p)
	if err != nil {
		t.Fatalf("%q is not in the index", p)
	}
	return uint64(id) + 1
}

func lookup(f *FS, parent uint64, name string) (fuse.EntryOut, fuse.Status) {
	var out fuse.EntryOut
	st := f.Lookup(nil, &fuse.InHeader{NodeId: parent}, name, &out)
	return out, st
}

// lookupPath looks p up one name at a time from the root, as the kernel does.
func lookupPath(t testing.TB, f *FS, p string) fuse.EntryOut {
	out := fuse.EntryOut{NodeId: fuse.FUSE_ROOT_ID}
	for _, name := range strings.Split(p, "/") {
		var st fuse.Status
		if out, st = lookup(f, out.NodeId, name); st != fuse.OK || out.NodeId == 0 {
			t.Fatalf("Lookup %q of %q: %v, node %d", name, p, st, out.NodeId)
		}
	}
	return out
}

func getAttr(f *FS, ino uint64) (fuse.AttrOut, fuse.Status) {
	var out fuse.AttrOut
	st := f.GetAttr(nil, &fuse.GetAttrIn{InHeader: fuse.InHeader{NodeId: ino}}, &out)
	return out, st
}

// checkAttr compares a with what the source holds for p, and its inode number with ino.
func checkAttr(t testing.TB, p string, a *fuse.Attr, ino uint64, e srcEntry) {
	t.Helper()
	type attr struct {
		Ino, Size                       uint64
		Mode, Nlink, Blksize, Uid, Gid  uint32
		Mtime, Atime, Ctime             uint64
		Mtimensec, Atimensec, Ctimensec uint32
	}
	got := attr{a.Ino, a.Size, a.Mode, a.Nlink, a.Blksize, a.Uid, a.Gid,
		a.Mtime, a.Atime, a.Ctime, a.Mtimensec, a.Atimensec, a.Ctimensec}
	// The index has one time: atime and ctime repeat mtime. Directories report 2 links and
	// 4096 bytes whatever they hold.
	want := attr{Ino: ino, Mode: e.mode, Nlink: 1, Blksize: 1 << 20, Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid()),
		Mtime: uint64(e.sec), Atime: uint64(e.sec), Ctime: uint64(e.sec),
		Mtimensec: uint32(e.nsec), Atimensec: uint32(e.nsec), Ctimensec: uint32(e.nsec)}
	if !e.isDir() && len(e.data) > 1<<20 { // larger than a sample: blocks as ext4 reports them
		want.Blksize = 4096
	}
	if e.isDir() {
		want.Nlink, want.Size = 2, 4096
	} else {
		want.Size = uint64(len(e.data))
		if a.Blocks != (want.Size+511)/512 {
			t.Errorf("%q: %d blocks, want %d", p, a.Blocks, (want.Size+511)/512)
		}
	}
	if got != want {
		t.Errorf("%q: attributes\n got %+v\nwant %+v", p, got, want)
	}
}

// TestLookup looks up every entry of the tree name by name and checks its inode number (entry
// id + 1), attributes and timeouts.
func TestLookup(t *testing.T) {
	f, s := newTestFS(t, Options{})
	for _, p := range s.paths[1:] { // not the root
		out := lookupPath(t, f, p)
		if want := s.inoOf(t, p); out.NodeId != want || out.Attr.Ino != want {
			t.Errorf("%q: node %d, ino %d, want %d (entry id + 1)", p, out.NodeId, out.Attr.Ino, want)
		}
		if out.EntryTimeout() != time.Hour || out.AttrTimeout() != time.Hour {
			t.Errorf("%q: entry timeout %v, attr timeout %v, want 1h", p, out.EntryTimeout(), out.AttrTimeout())
		}
		checkAttr(t, p, &out.Attr, out.NodeId, s.want[p])
	}
	// Symlinks were packed as what they point to.
	if link, target := lookupPath(t, f, "linkdir/deeper/leaf.dat"), lookupPath(t, f, "nested/deeper/leaf.dat"); link.NodeId == target.NodeId || link.Size != target.Size {
		t.Errorf("linkdir/deeper/leaf.dat: node %d, %d bytes; nested/deeper/leaf.dat: node %d, %d bytes", link.NodeId, link.Size, target.NodeId, target.Size)
	}
	if _, st := lookup(f, fuse.FUSE_ROOT_ID, "dangling"); st != fuse.OK {
		t.Errorf("Lookup of the skipped dangling symlink: %v", st)
	}
}

// TestLookupMissing: an absent name is a negative entry (node 0) that the kernel may cache as
// long as a positive one; a name under a file is ENOTDIR; an unknown parent is ESTALE.
func TestLookupMissing(t *testing.T) {
	f, s := newTestFS(t, Options{})
	for _, c := range []struct {
		parent string // "" is the root
		name   string
	}{
		{"", "nope"}, {"", "A.TXT"}, {"", "a.tx"}, {"", "a.txt2"}, {"", "dangling"}, {"nested", "nope"},
		{"nested/deeper", "leaf"}, {"emptydir", "x"}, {"odd", "\xff"}, {"odd", "a  b"}, {"", strings.Repeat("n", 256)},
	} {
		out, st := lookup(f, s.inoOf(t, c.parent), c.name)
		if st != fuse.OK || out.NodeId != 0 || out.EntryTimeout() != time.Hour || out.Attr != (fuse.Attr{}) {
			t.Errorf("Lookup %q in %q: %v, node %d, entry timeout %v, attr %v; want OK, node 0, 1h, no attributes",
				c.name, c.parent, st, out.NodeId, out.EntryTimeout(), out.Attr)
		}
	}
	for _, c := range []struct {
		parent uint64
		name   string
		want   fuse.Status
	}{
		{s.inoOf(t, "a.txt"), "x", fuse.Status(syscall.ENOTDIR)},
		{s.inoOf(t, "empty"), "x", fuse.Status(syscall.ENOTDIR)},
		{s.inoOf(t, "nested/x"), "x", fuse.Status(syscall.ENOTDIR)},
		{uint64(s.x.Len()) + 1, "x", fuse.Status(syscall.ESTALE)},
		{0, "x", fuse.Status(syscall.ESTALE)},
		{1<<62 - 1, "x", fuse.Status(syscall.ESTALE)},
	} {
		if out, st := lookup(f, c.parent, c.name); st != c.want || out.NodeId != 0 {
			t.Errorf("Lookup %q in inode %d: %v, node %d, want %v", c.name, c.parent, st, out.NodeId, c.want)
		}
	}
}

func TestGetAttr(t *testing.T) {
	f, s := newTestFS(t, Options{})
	for _, p := range []string{"", "nested", "nested/deeper", "emptydir", "a.txt", "empty", "big.bin", "exec.sh",
		"readonly", "link", "linkdir", "linkdir/x", "odd/\xff\xfe.bin", "many/f049"} {
		ino := s.inoOf(t, p)
		out, st := getAttr(f, ino)
		if st != fuse.OK {
			t.Errorf("GetAttr %q: %v", p, st)
			continue
		}
		if out.Timeout() != time.Hour {
			t.Errorf("GetAttr %q: timeout %v, want 1h", p, out.Timeout())
		}
		checkAttr(t, p, &out.Attr, ino, s.want[p])
	}
	if ino := s.inoOf(t, ""); ino != fuse.FUSE_ROOT_ID {
		t.Errorf("the root is inode %d, want %d", ino, fuse.FUSE_ROOT_ID)
	}
	for _, ino := range []uint64{0, uint64(s.x.Len()) + 1, 1 << 40, 1<<62 - 1} {
		if _, st := getAttr(f, ino); st != fuse.Status(syscall.ESTALE) {
			t.Errorf("GetAttr of unknown inode %d: %v, want ESTALE", ino, st)
		}
	}
}

// TestMtimeBeforeEpoch: times before 1970 are split into seconds (rounded down) and nanoseconds
// in [0, 1e9), as stat(2) reports them.
func TestMtimeBeforeEpoch(t *testing.T) {
	times := map[string]time.Time{
		"minus-half": time.Unix(-1, 500_000_000),
		"minus-one":  time.Unix(-1, 0),
		"minus-two":  time.Unix(-2, 0),
		"one-ns":     time.Unix(-1, 999_999_999),
		"long-ago":   time.Unix(-1_000_000_000, 0),
		"epoch":      time.Unix(0, 0),
	}
	s := packTree(t, func(t *testing.T, dir string) {
		for name, mt := range times {
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, []byte(name), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(p, mt, mt); err != nil {
				t.Fatal(err)
			}
		}
	})
	f := s.serve(t, nil, Options{})
	for name := range times {
		out := lookupPath(t, f, name)
		checkAttr(t, name, &out.Attr, s.inoOf(t, name), s.want[name])
	}
}

// listDir reads directory ino from offset off with one READDIR (READDIRPLUS if plus) into a
// buffer of size bytes.
func listDir(t testing.TB, f *FS, ino, off uint64, plus bool, size int) ([]fuse.DirEntry, []fuse.EntryOut, fuse.Status) {
	t.Helper()
	out := fuse.NewDirEntryList(make([]byte, size), off)
	in := &fuse.ReadIn{InHeader: fuse.InHeader{NodeId: ino}, Offset: off, Size: uint32(size)}
	var st fuse.Status
	if plus {
		st = f.ReadDirPlus(nil, in, out)
	} else {
		st = f.ReadDir(nil, in, out)
	}
	if st != fuse.OK {
		return nil, nil, st
	}
	var ents []fuse.DirEntry
	var eos []fuse.EntryOut
	var err error
	if plus {
		ents, eos, err = fuse.ParseDirLookupEntries(out.Bytes())
	} else {
		ents, err = fuse.ParseDirEntries(out.Bytes())
	}
	if err != nil {
		t.Fatalf("parsing the listing of inode %d: %v", ino, err)
	}
	return ents, eos, st
}

// listAll lists directory ino with calls of size bytes each, resuming each at the offset of the
// last entry it got, and returns the entries and the number of calls that returned some.
func listAll(t testing.TB, f *FS, ino uint64, plus bool, size int) ([]fuse.DirEntry, []fuse.EntryOut, int) {
	t.Helper()
	var all []fuse.DirEntry
	var allEOs []fuse.EntryOut
	var off uint64
	for calls := 0; ; calls++ {
		ents, eos, st := listDir(t, f, ino, off, plus, size)
		if st != fuse.OK {
			t.Fatalf("listing inode %d from %d: %v", ino, off, st)
		}
		if len(ents) == 0 {
			return all, allEOs, calls
		}
		all, allEOs = append(all, ents...), append(allEOs, eos...)
		off = ents[len(ents)-1].Off
		if calls > 1000 {
			t.Fatalf("listing inode %d does not end", ino)
		}
	}
}

// TestReadDir lists every directory with READDIR and READDIRPLUS, in one call and in calls too
// small for more than a few entries, and checks names, order, types, inode numbers, offsets and
// (with plus) the attributes.
func TestReadDir(t *testing.T) {
	f, s := newTestFS(t, Options{})
	for _, p := range s.paths {
		e := s.want[p]
		if !e.isDir() {
			continue
		}
		ino := s.inoOf(t, p)
		parent := uint64(fuse.FUSE_ROOT_ID) // also the root's parent
		if dir := path.Dir(p); p != "" && dir != "." {
			parent = s.inoOf(t, dir)
		}
		wantNames := append([]string{".", ".."}, e.children...)
		for _, plus := range []bool{false, true} {
			ents, eos, calls := listAll(t, f, ino, plus, 1<<16)
			if calls != 1 {
				t.Errorf("%q (plus %v): %d calls with a 64 KiB buffer, want 1", p, plus, calls)
			}
			var gotNames []string
			for i, de := range ents {
				gotNames = append(gotNames, de.Name)
				if de.Off != uint64(i)+1 {
					t.Errorf("%q (plus %v): entry %d %q has offset %d, want %d", p, plus, i, de.Name, de.Off, i+1)
				}
				var wantIno uint64
				var wantType uint32
				switch de.Name {
				case ".":
					wantIno, wantType = ino, syscall.S_IFDIR
				case "..":
					wantIno, wantType = parent, syscall.S_IFDIR
				default:
					cp := path.Join(p, de.Name)
					wantIno, wantType = s.inoOf(t, cp), s.want[cp].mode&syscall.S_IFMT
					if plus {
						if eos[i].NodeId != wantIno || eos[i].EntryTimeout() != time.Hour || eos[i].AttrTimeout() != time.Hour {
							t.Errorf("%q: READDIRPLUS entry of %q: node %d, timeouts %v %v; want node %d, 1h", p, de.Name,
								eos[i].NodeId, eos[i].EntryTimeout(), eos[i].AttrTimeout(), wantIno)
						}
						checkAttr(t, cp, &eos[i].Attr, wantIno, s.want[cp])
					}
				}
				if de.Ino != wantIno || de.Mode != wantType {
					t.Errorf("%q (plus %v): entry %q: ino %d, type %o; want %d, %o", p, plus, de.Name, de.Ino, de.Mode, wantIno, wantType)
				}
				if plus && (de.Name == "." || de.Name == "..") && eos[i].NodeId != 0 {
					t.Errorf("%q: READDIRPLUS entry %q has node %d, want 0 (no kernel reference)", p, de.Name, eos[i].NodeId)
				}
			}
			if !slices.Equal(gotNames, wantNames) {
				t.Errorf("%q (plus %v): names\n got %q\nwant %q", p, plus, gotNames, wantNames)
			}
			// 512 bytes hold one entry with the longest name, with or without attributes.
			small, smallEOs, calls := listAll(t, f, ino, plus, 512)
			if !slices.Equal(small, ents) || (plus && !slices.Equal(smallEOs, eos)) {
				t.Errorf("%q (plus %v): listing in 512-byte calls differs from the listing in one", p, plus)
			}
			if p == "many" && calls < 3 {
				t.Errorf("%q (plus %v): %d calls of 512 bytes, want several", p, plus, calls)
			}
		}
	}
}

// TestReadDirOffsets resumes listings at given offsets, past the end, and on things that are
// not directories.
func TestReadDirOffsets(t *testing.T) {
	f, s := newTestFS(t, Options{})
	many := s.inoOf(t, "many")
	for _, plus := range []bool{false, true} {
		for _, off := range []uint64{1, 2, 10, 51, 52, 53, 1000} {
			ents, _, st := listDir(t, f, many, off, plus, 1<<16)
			want := max(0, 52-int(off)) // ".", "..", 50 files
			if st != fuse.OK || len(ents) != want {
				t.Errorf("many from %d (plus %v): %v, %d entries, want %d", off, plus, st, len(ents), want)
				continue
			}
			if want > 0 && (ents[0].Off != off+1 || (off >= 2 && ents[0].Name != s.want["many"].children[off-2])) {
				t.Errorf("many from %d (plus %v): first entry %q at %d", off, plus, ents[0].Name, ents[0].Off)
			}
		}
		for _, c := range []struct {
			ino  uint64
			want fuse.Status
		}{
			{s.inoOf(t, "a.txt"), fuse.Status(syscall.ENOTDIR)},
			{s.inoOf(t, "empty"), fuse.Status(syscall.ENOTDIR)},
			{uint64(s.x.Len()) + 1, fuse.Status(syscall.ESTALE)},
			{0, fuse.Status(syscall.ESTALE)},
		} {
			if _, _, st := listDir(t, f, c.ino, 0, plus, 1<<16); st != c.want {
				t.Errorf("listing inode %d (plus %v): %v, want %v", c.ino, plus, st, c.want)
			}
		}
	}
	// A buffer too small for any entry returns none, and no error.
	if ents, _, st := listDir(t, f, many, 0, false, 8); st != fuse.OK || len(ents) != 0 {
		t.Errorf("listing into 8 bytes: %v, %d entries", st, len(ents))
	}
}

func TestOpenDir(t *testing.T) {
	f, s := newTestFS(t, Options{})
	for _, c := range []struct {
		ino       uint64
		want      fuse.Status
		wantFlags uint32
	}{
		{fuse.FUSE_ROOT_ID, fuse.OK, fuse.FOPEN_KEEP_CACHE | fuse.FOPEN_CACHE_DIR},
		{s.inoOf(t, "nested/deeper"), fuse.OK, fuse.FOPEN_KEEP_CACHE | fuse.FOPEN_CACHE_DIR},
		{s.inoOf(t, "a.txt"), fuse.Status(syscall.ENOTDIR), 0},
		{uint64(s.x.Len()) + 1, fuse.Status(syscall.ESTALE), 0},
	} {
		var out fuse.OpenOut
		if st := f.OpenDir(nil, &fuse.OpenIn{InHeader: fuse.InHeader{NodeId: c.ino}}, &out); st != c.want || out.OpenFlags != c.wantFlags {
			t.Errorf("OpenDir %d: %v, flags %#x; want %v, %#x", c.ino, st, out.OpenFlags, c.want, c.wantFlags)
		}
	}
}

// TestOpen: with the kernel cache on, OPEN of a sample answers ENOSYS (no-open mode); with it
// off, FOPEN_DIRECT_IO. Opening for writing or truncation is EROFS in both modes.
func TestOpen(t *testing.T) {
	for _, mode := range []CacheMode{CacheOn, CacheOff} {
		f, s := newTestFS(t, Options{KernelCache: mode})
		ino := s.inoOf(t, "a.txt")
		wantRead, wantFlags := fuse.ENOSYS, uint32(0)
		if mode == CacheOff {
			wantRead, wantFlags = fuse.OK, fuse.FOPEN_DIRECT_IO
		}
		for _, c := range []struct {
			flags     uint32
			want      fuse.Status
			wantFlags uint32
		}{
			{syscall.O_RDONLY, wantRead, wantFlags},
			{syscall.O_RDONLY | syscall.O_NOATIME | syscall.O_CLOEXEC, wantRead, wantFlags},
			{syscall.O_WRONLY, fuse.EROFS, 0},
			{syscall.O_RDWR, fuse.EROFS, 0},
			{syscall.O_RDONLY | syscall.O_TRUNC, fuse.EROFS, 0},
			{syscall.O_WRONLY | syscall.O_APPEND, fuse.EROFS, 0},
		} {
			var out fuse.OpenOut
			st := f.Open(nil, &fuse.OpenIn{InHeader: fuse.InHeader{NodeId: ino}, Flags: c.flags}, &out)
			if st != c.want || out.OpenFlags != c.wantFlags {
				t.Errorf("cache %v: Open(%#o): %v, flags %#x; want %v, %#x", mode, c.flags, st, out.OpenFlags, c.want, c.wantFlags)
			}
		}
		// ENOSYS is the protocol answer of no-open mode, not an error; EROFS is.
		if got := f.Stats().Snapshot().Ops["open"]; got.Count != 6 || got.Errors != 4 {
			t.Errorf("cache %v: open stats %+v, want 6 requests and 4 errors", mode, got)
		}
	}
}

// TestFlushIoctlRelease: FLUSH is ENOSYS (the kernel stops sending it), every ioctl ENOTTY;
// neither counts as an error.
func TestFlushIoctlRelease(t *testing.T) {
	f, s := newTestFS(t, Options{})
	ino := s.inoOf(t, "a.txt")
	if st := f.Flush(nil, &fuse.FlushIn{InHeader: fuse.InHeader{NodeId: ino}}); st != fuse.ENOSYS {
		t.Errorf("Flush: %v, want ENOSYS", st)
	}
	for _, cmd := range []uint32{syscall.TCGETS, syscall.TIOCGWINSZ, 0x80086601 /* FS_IOC_GETFLAGS */, 0} {
		var out fuse.IoctlOut
		if st := f.Ioctl(nil, &fuse.IoctlIn{InHeader: fuse.InHeader{NodeId: ino}, Cmd: cmd}, nil, &out, make([]byte, 64)); st != fuse.Status(syscall.ENOTTY) {
			t.Errorf("Ioctl %#x: %v, want ENOTTY", cmd, st)
		}
	}
	f.Release(nil, &fuse.ReleaseIn{InHeader: fuse.InHeader{NodeId: ino}})
	f.Forget(ino, 1)
	snap := f.Stats().Snapshot()
	for op, want := range map[string]uint64{"flush": 1, "ioctl": 4, "release": 1, "forget": 1} {
		if got := snap.Ops[op]; got.Count != want || got.Errors != 0 {
			t.Errorf("%s stats %+v, want %d requests and no errors", op, got, want)
		}
	}
	if snap.Errors != 0 {
		t.Errorf("%d errors counted, want 0", snap.Errors)
	}
}

// TestReadOnly: every request that would change the tree is EROFS, and counted as a write.
func TestReadOnly(t *testing.T) {
	f, s := newTestFS(t, Options{})
	ino := s.inoOf(t, "a.txt")
	h := fuse.InHeader{NodeId: ino}
	root := fuse.InHeader{NodeId: fuse.FUSE_ROOT_ID}
	ops := map[string]func() fuse.Status{
		"SetAttr": func() fuse.Status {
			return f.SetAttr(nil, &fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{InHeader: h, Valid: fuse.FATTR_SIZE}}, &fuse.AttrOut{})
		},
		"Mknod":  func() fuse.Status { return f.Mknod(nil, &fuse.MknodIn{InHeader: root}, "n", &fuse.EntryOut{}) },
		"Mkdir":  func() fuse.Status { return f.Mkdir(nil, &fuse.MkdirIn{InHeader: root}, "d", &fuse.EntryOut{}) },
		"Unlink": func() fuse.Status { return f.Unlink(nil, &root, "a.txt") },
		"Rmdir":  func() fuse.Status { return f.Rmdir(nil, &root, "emptydir") },
		"Rename": func() fuse.Status {
			return f.Rename(nil, &fuse.RenameIn{InHeader: root, Newdir: fuse.FUSE_ROOT_ID}, "a.txt", "b.txt")
		},
		"Link": func() fuse.Status {
			return f.Link(nil, &fuse.LinkIn{InHeader: root, Oldnodeid: ino}, "l", &fuse.EntryOut{})
		},
		"Symlink": func() fuse.Status { return f.Symlink(nil, &root, "a.txt", "s", &fuse.EntryOut{}) },
		"Create": func() fuse.Status {
			return f.Create(nil, &fuse.CreateIn{InHeader: root, Flags: syscall.O_WRONLY | syscall.O_CREAT}, "c", &fuse.CreateOut{})
		},
		"Tmpfile": func() fuse.Status { return f.Tmpfile(nil, &fuse.CreateIn{InHeader: root}, &fuse.CreateOut{}) },
		"Write": func() fuse.Status {
			n, st := f.Write(nil, &fuse.WriteIn{InHeader: h, Size: 3}, []byte("abc"))
			if n != 0 {
				t.Errorf("Write wrote %d bytes", n)
			}
			return st
		},
		"CopyFileRange": func() fuse.Status {
			n, st := f.CopyFileRange(nil, &fuse.CopyFileRangeIn{InHeader: h, NodeIdOut: ino, Len: 10})
			if n != 0 {
				t.Errorf("CopyFileRange copied %d bytes", n)
			}
			return st
		},
		"Fallocate":   func() fuse.Status { return f.Fallocate(nil, &fuse.FallocateIn{InHeader: h, Length: 10}) },
		"SetXAttr":    func() fuse.Status { return f.SetXAttr(nil, &fuse.SetXAttrIn{InHeader: h}, "user.x", []byte("v")) },
		"RemoveXAttr": func() fuse.Status { return f.RemoveXAttr(nil, &h, "user.x") },
	}
	for name, op := range ops {
		if st := op(); st != fuse.EROFS {
			t.Errorf("%s: %v, want EROFS", name, st)
		}
	}
	if got := f.Stats().Snapshot().Ops["write"]; got.Count != uint64(len(ops)) || got.Errors != uint64(len(ops)) {
		t.Errorf("write stats %+v, want %d requests, all errors", got, len(ops))
	}
	// Nothing changed.
	if out := lookupPath(t, f, "a.txt"); out.Size != uint64(len(s.want["a.txt"].data)) {
		t.Errorf("a.txt has %d bytes after the refused writes", out.Size)
	}
}

// TestUnimplemented: requests aifs does not serve are ENOSYS (so the kernel stops sending most
// of them), counted as "other" and not as errors.
func TestUnimplemented(t *testing.T) {
	f, s := newTestFS(t, Options{})
	h := fuse.InHeader{NodeId: s.inoOf(t, "a.txt")}
	ops := map[string]func() fuse.Status{
		"Readlink": func() fuse.Status { _, st := f.Readlink(nil, &h); return st },
		"Access":   func() fuse.Status { return f.Access(nil, &fuse.AccessIn{InHeader: h, Mask: 4}) },
		"GetLk":    func() fuse.Status { return f.GetLk(nil, &fuse.LkIn{InHeader: h}, &fuse.LkOut{}) },
		"SetLk":    func() fuse.Status { return f.SetLk(nil, &fuse.LkIn{InHeader: h}) },
		"SetLkw":   func() fuse.Status { return f.SetLkw(nil, &fuse.LkIn{InHeader: h}) },
		"Lseek":    func() fuse.Status { return f.Lseek(nil, &fuse.LseekIn{InHeader: h}, &fuse.LseekOut{}) },
		"Fsync":    func() fuse.Status { return f.Fsync(nil, &fuse.FsyncIn{InHeader: h}) },
		"FsyncDir": func() fuse.Status { return f.FsyncDir(nil, &fuse.FsyncIn{InHeader: h}) },
		"Statx":    func() fuse.Status { return f.Statx(nil, &fuse.StatxIn{InHeader: h}, &fuse.StatxOut{}) },
	}
	for name, op := range ops {
		if st := op(); st != fuse.ENOSYS {
			t.Errorf("%s: %v, want ENOSYS", name, st)
		}
	}
	snap := f.Stats().Snapshot()
	if got := snap.Ops["other"]; got.Count != uint64(len(ops)) || got.Errors != 0 {
		t.Errorf("other stats %+v, want %d requests and no errors", got, len(ops))
	}
}

// TestXAttr: files have no extended attributes: LISTXATTR an empty list, as a native file
// system answers, and GETXATTR ENOSYS, which the kernel remembers (it stops sending GETXATTR,
// which ls -l sends twice an entry); both count as "xattr", not as errors.
func TestXAttr(t *testing.T) {
	f, s := newTestFS(t, Options{})
	for _, ino := range []uint64{s.inoOf(t, "a.txt"), fuse.FUSE_ROOT_ID, ctlDirIno, ctlPlanIno} {
		h := fuse.InHeader{NodeId: ino}
		for _, size := range []int{0, 64} {
			if n, st := f.ListXAttr(nil, &h, make([]byte, size)); n != 0 || st != fuse.OK {
				t.Errorf("ListXAttr %d (size %d): %d, %v; want 0, OK", ino, size, n, st)
			}
			if n, st := f.GetXAttr(nil, &h, "user.x", make([]byte, size)); n != 0 || st != fuse.ENOSYS {
				t.Errorf("GetXAttr %d (size %d): %d, %v; want 0, ENOSYS", ino, size, n, st)
			}
		}
	}
	if got := f.Stats().Snapshot().Ops["xattr"]; got.Count != 16 || got.Errors != 0 {
		t.Errorf("xattr stats %+v, want 16 requests and no errors", got)
	}
}

func TestStatFs(t *testing.T) {
	f, s := newTestFS(t, Options{})
	var bytes, files uint64
	for _, e := range s.want {
		bytes += uint64(len(e.data))
		if !e.isDir() {
			files++
		}
	}
	var out fuse.StatfsOut
	if st := f.StatFs(nil, &fuse.InHeader{NodeId: fuse.FUSE_ROOT_ID}, &out); st != fuse.OK {
		t.Fatalf("StatFs: %v", st)
	}
	want := fuse.StatfsOut{Blocks: (bytes + 4095) / 4096, Files: uint64(len(s.want)), Bsize: 1 << 20, Frsize: 4096, NameLen: 255}
	if out != want {
		t.Errorf("StatFs\n got %+v\nwant %+v", out, want)
	}
	if bytes < bigSize || want.Files < 70 {
		t.Fatalf("the test tree holds %d bytes in %d entries", bytes, want.Files)
	}
	snap := f.Stats().Snapshot()
	if snap.Files != files || snap.DatasetBytes != bytes || snap.Entries != len(s.want) {
		t.Errorf("stats: %d files, %d bytes, %d entries; want %d, %d, %d", snap.Files, snap.DatasetBytes, snap.Entries,
			files, bytes, len(s.want))
	}
}

// TestConcurrent runs lookups, attribute requests, listings and reads from 16 goroutines at once
// (run it with -race) and checks every answer.
func TestConcurrent(t *testing.T) {
	f, s := newTestFS(t, Options{})
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			for range 300 {
				p := s.paths[1+rng.IntN(len(s.paths)-1)]
				e, ino := s.want[p], s.inoOf(t, p)
				if out := lookupPath(t, f, p); out.NodeId != ino {
					t.Errorf("%q: node %d, want %d", p, out.NodeId, ino)
				}
				if a, st := getAttr(f, ino); st != fuse.OK || a.Mode != e.mode {
					t.Errorf("GetAttr %q: %v, mode %o, want %o", p, st, a.Mode, e.mode)
				}
				if e.isDir() {
					ents, _, _ := listAll(t, f, ino, rng.IntN(2) == 0, 512+rng.IntN(4096))
					if len(ents) != len(e.children)+2 {
						t.Errorf("listing %q: %d entries, want %d", p, len(ents), len(e.children)+2)
					}
					continue
				}
				off := uint64(rng.IntN(len(e.data) + 1))
				size := uint32(rng.IntN(2 << 20))
				got, st := readFile(t, f, ino, off, size)
				if want := e.data[off:min(off+uint64(size), uint64(len(e.data)))]; st != fuse.OK || !bytes.Equal(got, want) {
					t.Errorf("Read %q [%d,+%d): %v, %d bytes, want %d", p, off, size, st, len(got), len(want))
				}
			}
		})
	}
	wg.Wait()
}
