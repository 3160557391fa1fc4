package layout

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestMain makes the writer's blocks small (4 entries, 64 bytes), so that the tests' small
// indexes have many blocks and every rule that compares across a block boundary is exercised.
// Benchmarks restore the sizes aifs writes (realBlocks).
func TestMain(m *testing.M) {
	defaultPerBlock, defaultBlockBytes = 4, 64
	os.Exit(m.Run())
}

func realBlocks(b *testing.B) {
	pb, bb := defaultPerBlock, defaultBlockBytes
	defaultPerBlock, defaultBlockBytes = 1024, 64<<10
	b.Cleanup(func() { defaultPerBlock, defaultBlockBytes = pb, bb })
}

// blocksRead counts the blocks of x read so far.
func blocksRead(x *Index) (n int) {
	for i := range x.v.read {
		for w := x.v.read[i].Load(); w != 0; w &= w - 1 {
			n++
		}
	}
	return n
}

// manyFiles returns the paths of a tree of dirs directories of per files each.
func manyFiles(dirs, per int) []string {
	var paths []string
	for d := range dirs {
		for f := range per {
			paths = append(paths, fmt.Sprintf("d%03d/f%04d.jpg", d, f))
		}
	}
	return paths
}

// loadTree writes the version 3 index of a tree of paths into a new directory and loads it
// (closed at cleanup).
func loadTree(t *testing.T, paths []string) (string, *Index) {
	t.Helper()
	nodes, shards := tree(1<<20, paths...)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, IndexName), EncodeIndex(nodes, shards, false), 0o644); err != nil {
		t.Fatal(err)
	}
	x, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(x.Close)
	return dir, x
}

// TestLoadReadsOnUse writes a version 3 index of 20,000 entries and checks that Load reads only
// its header and small sections, that a lookup reads a few blocks, that everything is found,
// and that a block changed or cut off after Load is reported when used (an error, not a crash).
func TestLoadReadsOnUse(t *testing.T) {
	paths := manyFiles(100, 200)
	dir, x := loadTree(t, paths)
	total := int(x.v.first[bOrder]) // blocks of entries, names and table
	if n := blocksRead(x); n > 1 {
		t.Errorf("Load read %d blocks of %d, want the shard table's names only", n, total)
	}
	if _, err := x.LookupPath(paths[12345]); err != nil {
		t.Fatal(err)
	}
	if n := blocksRead(x); n == 0 || n > 40 {
		t.Errorf("one lookup read %d blocks of %d, want a few", n, total)
	}
	for _, p := range paths {
		id, err := x.LookupPath(p)
		if err != nil || x.Path(id) != p {
			t.Fatalf("LookupPath(%q) = %q, %v", p, x.Path(id), err)
		}
	}
	if err := x.CheckAll(); err != nil {
		t.Fatal(err)
	}

	// Changed and truncated under a loaded index: reported on first use of what changed.
	for _, damage := range []string{"flip", "truncate"} {
		t.Run(damage, func(t *testing.T) {
			y, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer y.Close()
			f, err := os.OpenFile(filepath.Join(dir, IndexName), os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			fi, _ := f.Stat()
			last := paths[50*200+100] // a file amid a directory: no other block's checks read its block
			ent := sectionOffset(t, f, s3Entries)
			if damage == "flip" {
				id, _ := x.LookupPath(last)
				var b [1]byte
				f.ReadAt(b[:], ent+int64(id)*entrySize+eMTime)
				b[0] ^= 1
				f.WriteAt(b[:], ent+int64(id)*entrySize+eMTime)
			} else {
				orig, _ := os.ReadFile(f.Name())
				defer os.WriteFile(f.Name(), orig, 0o644)
				f.Truncate(fi.Size() / 2)
			}
			f.Close()
			if damage == "flip" {
				defer func() { // undo
					g, _ := os.OpenFile(filepath.Join(dir, IndexName), os.O_RDWR, 0)
					id, _ := x.LookupPath(last)
					var b [1]byte
					g.ReadAt(b[:], ent+int64(id)*entrySize+eMTime)
					b[0] ^= 1
					g.WriteAt(b[:], ent+int64(id)*entrySize+eMTime)
					g.Close()
				}()
			}
			if _, err := y.LookupPath(paths[0]); damage == "flip" && err != nil {
				t.Fatalf("a path far from the damage: %v", err)
			}
			id, err := y.LookupPath(last)
			if want := map[string]string{"flip": "entries block", "truncate": "EOF"}[damage]; err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("LookupPath of a damaged block = %d, %v; want an error containing %q", id, err, want)
			}
			if y.Err() == nil || y.CheckAll() == nil {
				t.Errorf("Err = %v, CheckAll passed: want both to report the damage", y.Err())
			}
		})
	}
}

func sectionOffset(t *testing.T, f *os.File, k int) int64 {
	var h [headerSize3]byte
	if _, err := f.ReadAt(h[:], 0); err != nil {
		t.Fatal(err)
	}
	return int64(le.Uint64(h[h3Desc+h3DescSize*k:]))
}

// TestLazyCorruptBlock corrupts one block of a parsed index: what lies elsewhere is answered,
// what lies in it is answered as missing (never with its bytes), and the error says which block.
func TestLazyCorruptBlock(t *testing.T) {
	paths := manyFiles(10, 20)
	nodes, shards := tree(1<<20, paths...)
	buf := EncodeIndex(nodes, shards, false)
	x, err := Parse(buf)
	if err != nil {
		t.Fatal(err)
	}
	victim := paths[105]
	id, _ := x.LookupPath(victim)
	// A fresh parse of a copy whose victim entry's size is changed.
	bad := append([]byte(nil), buf...)
	off := sectionAt(bad, secEntries) + int(id)*entrySize + eB
	le.PutUint64(bad[off:], le.Uint64(bad[off:])+1)
	y, err := Parse(bad)
	if err != nil {
		t.Fatalf("Parse read a block it did not need: %v", err)
	}
	if _, err := y.LookupPath(paths[0]); err != nil {
		t.Fatalf("LookupPath(%q) far from the damage: %v", paths[0], err)
	}
	if e := y.Entry(id); e.Mode != 0 || y.Name(id) != nil {
		t.Errorf("Entry of a corrupt block = %+v, %q; want the zero Entry and no name", e, y.Name(id))
	}
	_, err = y.LookupPath(victim)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "entries block") {
		t.Errorf("LookupPath(victim) = %v, want an ErrCorrupt naming the entries block", err)
	}
	if !errors.Is(y.Err(), ErrCorrupt) || y.CheckAll() == nil {
		t.Errorf("Err = %v and CheckAll = nil: want both to report it", y.Err())
	}
}

// TestConcurrentFirstUse looks every path up from 8 goroutines at once on a fresh index, so
// that blocks are read and checked concurrently (run with -race).
func TestConcurrentFirstUse(t *testing.T) {
	paths := manyFiles(20, 50)
	_, x := loadTree(t, paths)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range paths {
				p := paths[(i*7+g*131)%len(paths)]
				if id, err := x.LookupPath(p); err != nil || x.Path(id) != p {
					errs <- fmt.Errorf("LookupPath(%q) = %q, %v", p, x.Path(id), err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestChildNamesParent widens a directory's child range over its cousin (the rules a block can
// check all hold): listing the directory and looking the cousin up in it fail, naming the entry,
// and CheckAll finds the ranges overlapping.
func TestChildNamesParent(t *testing.T) {
	nodes, shards := tree(64, "b/y", "a/x2", "a/x1", "a/sub/deep/f", "empty/", "zero", "c")
	buf := EncodeIndex(nodes, shards, false)
	x, err := Parse(buf)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := x.LookupPath("a")
	put40(buf[sectionAt(buf, secEntries)+int(a)*entrySize+eB:], 4) // sub, x1, x2 and b/y
	y, err := Parse(reseal(buf))
	if err != nil {
		t.Fatal(err)
	}
	d := y.Entry(a)
	if d.NumChildren != 4 {
		t.Fatalf("a has %d children after the edit", d.NumChildren)
	}
	for k := range uint32(3) {
		if _, _, err := y.Child(a, d, k); err != nil {
			t.Fatalf("Child(a, %d): %v", k, err)
		}
	}
	if _, _, err := y.Child(a, d, 3); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "names parent") {
		t.Errorf("Child(a, 3) = %v, want an ErrCorrupt saying it names another parent", err)
	}
	if err := y.CheckAll(); err == nil || !strings.Contains(err.Error(), "directories list") {
		t.Errorf("CheckAll = %v, want the overlap found", err)
	}
}
