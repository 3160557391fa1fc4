//go:build integration

package integration

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aifs/aifs/layout"
)

// ---------------------------------------------------------------------------------------------
// Source trees

// writeFile creates path (and its parents) holding data.
func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t testing.TB, path string) {
	t.Helper()
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
}

func symlink(t testing.TB, target, path string) {
	t.Helper()
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
}

// prng is xorshift64*: fast, seeded, good enough to make content that does not repeat.
type prng uint64

func (r *prng) fill(b []byte) {
	x := uint64(*r)
	for len(b) >= 8 {
		x ^= x >> 12
		x ^= x << 25
		x ^= x >> 27
		binary.LittleEndian.PutUint64(b, x*0x2545F4914F6CDD1D)
		b = b[8:]
	}
	for i := range b {
		x ^= x >> 12
		x ^= x << 25
		x ^= x >> 27
		b[i] = byte((x * 0x2545F4914F6CDD1D) >> 56)
	}
	*r = prng(x)
}

func randomBytes(seed uint64, n int) []byte {
	r := prng(seed | 1)
	b := make([]byte, n)
	r.fill(b)
	return b
}

const (
	bigDirEntries = 100_000
	deepLevels    = 200
)

// deepDir is the path of the innermost directory of the deep chain of the edge-case tree.
func deepDir() string {
	p := "deep"
	for i := range deepLevels {
		p += fmt.Sprintf("/d%03d", i)
	}
	return p
}

// The edge-case tree is built once and shared; tests must not modify it.
var edge struct {
	once sync.Once
	dir  string
	err  error
}

// edgeTree returns a source tree with every case the packer must get right: zero-byte files,
// names that are not UTF-8 or hold spaces and newlines, a 255-byte name, 200 levels of nesting, an
// empty directory, a directory of 100,000 entries, permission bits, symlinks to a file and to a
// directory (followed), two ways into a symlink loop, a dangling symlink, a symlink to itself and
// a FIFO (all skipped).
func edgeTree(t testing.TB) string {
	t.Helper()
	edge.once.Do(func() {
		edge.dir = filepath.Join(workDir, "edge-tree")
		edge.err = makeEdgeTree(edge.dir)
	})
	if edge.err != nil {
		t.Fatalf("building the edge-case tree: %v", edge.err)
	}
	return edge.dir
}

func makeEdgeTree(root string) error {
	var firstErr error
	check := func(err error) {
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	write := func(rel string, data []byte) {
		p := filepath.Join(root, rel)
		check(os.MkdirAll(filepath.Dir(p), 0o755))
		check(os.WriteFile(p, data, 0o644))
	}
	write("empty.bin", nil)
	write("a/zero", nil)
	write("a/one", []byte("1"))
	write("a/zzz-zero", nil)
	write("\xff\xfe", []byte("a name that is not UTF-8\n"))
	write("dir \xff/inner \xfe", []byte("inside a directory whose name is not UTF-8\n"))
	write("with space.txt", []byte("spaces\n"))
	write("with\nnewline.txt", []byte("newline\n"))
	write(" leading and trailing ", []byte("padded\n"))
	write(strings.Repeat("n", 255), []byte("the longest name\n"))
	write(deepDir()+"/leaf.txt", []byte("200 levels down\n"))
	check(os.MkdirAll(filepath.Join(root, "emptydir"), 0o755))
	write("large.bin", randomBytes(1, 200_000)) // larger than the 64K shards: a shard of its own
	write("exact.bin", randomBytes(2, 64<<10))  // exactly one shard
	write("real/x.txt", []byte("reached through linkfile and linkdir too\n"))
	write("real/sub/y.txt", []byte("y\n"))
	check(os.Symlink("../..", filepath.Join(root, "real/sub/loop")))
	check(os.Symlink("real/x.txt", filepath.Join(root, "linkfile")))
	check(os.Symlink("real", filepath.Join(root, "linkdir")))
	check(os.Symlink("nowhere", filepath.Join(root, "dangling")))
	check(os.Symlink("selfloop", filepath.Join(root, "selfloop")))
	check(syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644))
	write("exec.sh", []byte("#!/bin/sh\n"))
	check(os.Chmod(filepath.Join(root, "exec.sh"), 0o755))
	write("private", []byte("secret\n"))
	check(os.Chmod(filepath.Join(root, "private"), 0o600))
	write("setuid", []byte("#!/bin/sh\n"))
	check(os.Chmod(filepath.Join(root, "setuid"), 0o4755))
	write("sticky/in", []byte("in a sticky directory\n"))
	check(os.Chmod(filepath.Join(root, "sticky"), 0o1777))

	// The big directory, written by two goroutines. Sizes vary from 0 to 24 bytes.
	big := filepath.Join(root, "big")
	check(os.MkdirAll(big, 0o755))
	var wg sync.WaitGroup
	var mu sync.Mutex
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < bigDirEntries; i += 2 {
				content := []byte(strings.Repeat("x", i%7) + strconv.Itoa(i*i) + "\n")
				if i%1000 == 0 {
					content = nil
				}
				if err := os.WriteFile(filepath.Join(big, fmt.Sprintf("f%06d", i)), content, 0o644); err != nil {
					mu.Lock()
					check(err)
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// ---------------------------------------------------------------------------------------------
// Models of a source tree and of a shard set, to compare

// entry is one directory or file, as a source tree has it or as a shard set records it.
type entry struct {
	path  string // relative to the root, slash-separated; "" for the root
	dir   bool
	size  int64  // files: content bytes; directories: number of children
	mode  uint32 // permission, setuid, setgid and sticky bits
	mtime int64  // nanoseconds
	sum   [32]byte
}

func (e entry) String() string {
	kind := "file"
	if e.dir {
		kind = "dir"
	}
	return fmt.Sprintf("%q %s size=%d mode=%#o mtime=%d sha256=%x", e.path, kind, e.size, e.mode, e.mtime, e.sum[:6])
}

func modeBits(m fs.FileMode) uint32 {
	b := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		b |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		b |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		b |= 0o1000
	}
	return b
}

// sourceEntries models what packing root should record, written independently of the packer:
// symlinks are followed, a directory that is one of its own ancestors is left out, and anything
// that is neither a regular file nor a directory is left out. withContent hashes file contents.
func sourceEntries(t testing.TB, root string, withContent bool) []entry {
	t.Helper()
	type devIno struct{ dev, ino uint64 }
	idOf := func(fi fs.FileInfo) devIno {
		st := fi.Sys().(*syscall.Stat_t)
		return devIno{uint64(st.Dev), uint64(st.Ino)}
	}
	var out []entry
	var walk func(abs, rel string, fi fs.FileInfo, ancestors []devIno) int
	walk = func(abs, rel string, fi fs.FileInfo, ancestors []devIno) int {
		e := entry{path: rel, mode: modeBits(fi.Mode()), mtime: fi.ModTime().UnixNano()}
		switch {
		case fi.Mode().IsRegular():
			e.size = fi.Size()
			if withContent {
				data, err := os.ReadFile(abs)
				if err != nil {
					t.Fatal(err)
				}
				e.sum = sha256.Sum256(data)
			}
		case fi.IsDir():
			if slices.Contains(ancestors, idOf(fi)) {
				return 0
			}
			e.dir = true
			names, err := os.ReadDir(abs)
			if err != nil {
				t.Fatal(err)
			}
			for _, de := range names {
				cfi, err := os.Stat(filepath.Join(abs, de.Name()))
				if err != nil {
					continue // dangling symlink
				}
				crel := de.Name()
				if rel != "" {
					crel = rel + "/" + crel
				}
				e.size += int64(walk(filepath.Join(abs, de.Name()), crel, cfi, append(slices.Clip(ancestors), idOf(fi))))
			}
		default:
			return 0
		}
		out = append(out, e)
		return 1
	}
	fi, err := os.Stat(root)
	if err != nil {
		t.Fatal(err)
	}
	walk(root, "", fi, nil)
	sortEntries(out)
	return out
}

func sortEntries(es []entry) {
	sort.Slice(es, func(i, j int) bool { return es[i].path < es[j].path })
}

// loadSet loads the index of the shard set in dir through the layout package.
func loadSet(t testing.TB, dir string) *layout.Index {
	t.Helper()
	x, err := layout.Load(dir)
	if err != nil {
		t.Fatalf("layout.Load(%s): %v", dir, err)
	}
	return x
}

// setEntries models the shard set in dir: the tree the index describes, with each file's
// content read from its shard at the extent the index gives.
func setEntries(t testing.TB, dir string) []entry {
	t.Helper()
	x := loadSet(t, dir)
	shards := map[uint32]*os.File{}
	defer func() {
		for _, f := range shards {
			f.Close()
		}
	}()
	var out []entry
	var buf []byte
	var walk func(id layout.ID)
	walk = func(id layout.ID) {
		e := x.Entry(id)
		path := x.Path(id)
		if got, err := x.LookupPath(path); err != nil || got != id {
			t.Fatalf("LookupPath(%q) = %d, %v; want %d", path, got, err, id)
		}
		m := entry{path: path, dir: e.IsDir(), mode: e.Mode & 0o7777, mtime: e.MTime}
		if e.IsDir() {
			m.size = int64(e.NumChildren)
			out = append(out, m)
			for c := e.FirstChild; c < e.FirstChild+layout.ID(e.NumChildren); c++ {
				walk(c)
			}
			return
		}
		m.size = int64(e.Size)
		f := shards[e.Shard]
		if f == nil {
			var err error
			if f, err = os.Open(filepath.Join(dir, layout.ShardName(int(e.Shard)))); err != nil {
				t.Fatal(err)
			}
			shards[e.Shard] = f
		}
		buf = slices.Grow(buf[:0], int(e.Size))[:e.Size]
		if _, err := f.ReadAt(buf, int64(e.Offset)); err != nil && len(buf) > 0 {
			t.Fatalf("%q: read [%d,+%d) of shard %d: %v", path, e.Offset, e.Size, e.Shard, err)
		}
		m.sum = sha256.Sum256(buf)
		out = append(out, m)
	}
	walk(layout.Root)
	sortEntries(out)
	return out
}

// compareEntries fails the test if the two models differ, listing the first differences.
func compareEntries(t testing.TB, what string, want, got []entry) {
	t.Helper()
	var diffs []string
	i, j := 0, 0
	for (i < len(want) || j < len(got)) && len(diffs) < 10 {
		switch {
		case j == len(got) || i < len(want) && want[i].path < got[j].path:
			diffs = append(diffs, "missing: "+want[i].String())
			i++
		case i == len(want) || got[j].path < want[i].path:
			diffs = append(diffs, "unexpected: "+got[j].String())
			j++
		default:
			if want[i] != got[j] {
				diffs = append(diffs, fmt.Sprintf("differs:\n\twant %s\n\tgot  %s", want[i], got[j]))
			}
			i, j = i+1, j+1
		}
	}
	if len(diffs) > 0 {
		t.Fatalf("%s: %d source entries, %d in the shard set; first differences:\n%s",
			what, len(want), len(got), strings.Join(diffs, "\n"))
	}
}

// digest is one hash over every entry of a model in path order.
func digest(es []entry) [32]byte {
	h := sha256.New()
	for _, e := range es {
		fmt.Fprintf(h, "%q %v %d %o %d %x\n", e.path, e.dir, e.size, e.mode, e.mtime, e.sum)
	}
	return [32]byte(h.Sum(nil))
}

// ---------------------------------------------------------------------------------------------
// Looking at destinations

// names lists the names in dir, sorted; nil if dir does not exist.
func names(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// wantShardSet fails unless dir holds exactly index.aifs and the shards its index names, in
// order shard-000000.dat upwards, and nothing else (no temporary files).
func wantShardSet(t testing.TB, dir string) *layout.Index {
	t.Helper()
	x := loadSet(t, dir)
	want := []string{layout.IndexName}
	for i, s := range x.Shards() {
		if s.Name != layout.ShardName(i) {
			t.Errorf("shard %d is called %q, want %q", i, s.Name, layout.ShardName(i))
		}
		want = append(want, s.Name)
	}
	slices.Sort(want)
	if got := names(t, dir); !slices.Equal(got, want) {
		t.Fatalf("%s holds %q, want exactly %q", dir, got, want)
	}
	return x
}

// wantNoDir fails unless path does not exist.
func wantNoDir(t testing.TB, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s exists after a failed pack (holding %q); want nothing written", path, names(t, path))
	}
}

// wantEmptyDir fails unless path is a directory with nothing in it.
func wantEmptyDir(t testing.TB, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil || !fi.IsDir() {
		t.Fatalf("%s: want an empty directory, have %v, %v", path, fi, err)
	}
	if got := names(t, path); len(got) > 0 {
		t.Fatalf("%s holds %q after a failed pack; want it left empty", path, got)
	}
}

// snapshot reads every file under dir (not following symlinks) into a map of relative path to
// content; directories map to "dir", symlinks to "-> target".
func snapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.IsDir():
			out[rel] = "dir"
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			out[rel] = "-> " + target
			return err
		case d.Type().IsRegular():
			data, err := os.ReadFile(p)
			out[rel] = string(data)
			return err
		default:
			out[rel] = d.Type().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func wantSameSnapshot(t testing.TB, what string, before, after map[string]string) {
	t.Helper()
	var diffs []string
	for k, v := range before {
		if w, ok := after[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%q removed", k))
		} else if w != v {
			diffs = append(diffs, fmt.Sprintf("%q changed", k))
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%q added", k))
		}
	}
	if len(diffs) > 0 {
		sort.Strings(diffs)
		t.Fatalf("%s changed: %s", what, strings.Join(diffs, ", "))
	}
}

// lsLine is one parsed line of `aifs ls`.
type lsLine struct {
	mode string
	size int64
	name string
	dir  bool
}

var lsRE = regexp.MustCompile(`^(\S+) +(\d+) (\d{4}-\d\d-\d\d \d\d:\d\d) (.+)$`)

// ls runs `aifs ls dir [path]` and parses its output; names shown quoted are unquoted.
func ls(t testing.TB, dir string, path ...string) []lsLine {
	t.Helper()
	r := mustAifs(t, append([]string{"ls", dir}, path...)...)
	var out []lsLine
	for _, line := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		if line == "" && r.stdout == "" {
			break
		}
		m := lsRE.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("aifs ls %s %q: cannot parse line %q", dir, path, line)
		}
		l := lsLine{mode: m[1], name: m[4]}
		l.size, _ = strconv.ParseInt(m[2], 10, 64)
		if strings.HasSuffix(l.name, "/") {
			l.dir, l.name = true, strings.TrimSuffix(l.name, "/")
		}
		if strings.HasPrefix(l.name, `"`) {
			uq, err := strconv.Unquote(l.name)
			if err != nil {
				t.Fatalf("aifs ls: bad quoted name %s: %v", l.name, err)
			}
			l.name = uq
		}
		out = append(out, l)
	}
	return out
}

// lsLineFor is the line `aifs ls` should print for source entry e.
func lsLineFor(e entry) lsLine {
	m := fs.FileMode(e.mode & 0o777)
	if e.mode&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if e.mode&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if e.mode&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	if e.dir {
		m |= fs.ModeDir
	}
	return lsLine{mode: m.String(), size: e.size, name: e.path[strings.LastIndex(e.path, "/")+1:], dir: e.dir}
}

// ---------------------------------------------------------------------------------------------
// 1. Round trip

func TestPackRoundTrip(t *testing.T) {
	src := edgeTree(t)
	dst := filepath.Join(t.TempDir(), "set")
	const shardTarget = 64 << 10

	start := time.Now()
	r := mustAifs(t, "pack", "--shard-size", "64K", src, dst)
	model := sourceEntries(t, src, false)
	if want := fmt.Sprintf("packed %d files (%d directories)", countFiles(model), len(model)-countFiles(model)); !strings.Contains(r.stdout, want) {
		t.Errorf("pack summary: want %q; %s", want, r)
	}
	t.Logf("packed the edge-case tree in %v: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(r.stdout))

	t.Run("warnings", func(t *testing.T) {
		// Exactly these are skipped, each with a warning.
		wantWarn := map[string]string{
			filepath.Join(src, "fifo"):                "FIFO",
			filepath.Join(src, "real/sub/loop"):       "symlink loop",
			filepath.Join(src, "linkdir", "sub/loop"): "symlink loop",
			filepath.Join(src, "dangling"):            "dangling symlink",
			filepath.Join(src, "selfloop"):            "symlink",
		}
		var warnings []string
		for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
			if strings.Contains(line, "warning") {
				warnings = append(warnings, line)
			}
		}
		for path, why := range wantWarn {
			found := false
			for _, w := range warnings {
				found = found || strings.Contains(w, path+":") && strings.Contains(w, why)
			}
			if !found {
				t.Errorf("no warning naming %s (%s) on stderr:\n%s", path, why, r.stderr)
			}
		}
		if len(warnings) != len(wantWarn) {
			t.Errorf("%d warnings, want %d:\n%s", len(warnings), len(wantWarn), strings.Join(warnings, "\n"))
		}
	})

	t.Run("content", func(t *testing.T) {
		want := sourceEntries(t, src, true)
		got := setEntries(t, dst)
		compareEntries(t, "pack of the edge-case tree", want, got)
		if digest(want) != digest(got) {
			t.Fatal("digests differ")
		}
		// Spot checks that do not rely on the model walker agreeing with the packer.
		x := loadSet(t, dst)
		for _, p := range []string{"linkfile", "linkdir/x.txt", "linkdir/sub/y.txt", "emptydir", "\xff\xfe",
			"with\nnewline.txt", deepDir() + "/leaf.txt", "big/f099999", strings.Repeat("n", 255)} {
			if _, err := x.LookupPath(p); err != nil {
				t.Errorf("%q is not in the shard set", p)
			}
		}
		for _, p := range []string{"fifo", "real/sub/loop", "linkdir/sub/loop", "dangling", "selfloop"} {
			if _, err := x.LookupPath(p); err == nil {
				t.Errorf("%q is in the shard set; it should have been skipped", p)
			}
		}
		if id, _ := x.LookupPath("big"); x.Entry(id).NumChildren != bigDirEntries {
			t.Errorf("big has %d children, want %d", x.Entry(id).NumChildren, bigDirEntries)
		}
	})

	t.Run("shards", func(t *testing.T) {
		// FORMAT.md: samples in pack order (file ids ascending), each non-empty one at the next
		// multiple of 4096 (the default --align), each shard padded to one, a new shard only
		// when the next sample would not fit, and a sample larger than the target alone.
		x := wantShardSet(t, dst)
		shards := x.Shards()
		if len(shards) < 5 {
			t.Fatalf("%d shards with --shard-size 64K; want several", len(shards))
		}
		nonzero := make([]int, len(shards))
		aligned := func(off uint64) uint64 { return (off + 4095) &^ 4095 }
		var cur uint32
		var end uint64
		for i := 0; i < x.Len(); i++ {
			e := x.Entry(layout.ID(i))
			if e.IsDir() {
				continue
			}
			if e.Shard != cur {
				if e.Shard != cur+1 || aligned(end) != shards[cur].Size {
					t.Fatalf("%q: shard %d after shard %d ended at %d of %d bytes", x.Path(layout.ID(i)), e.Shard, cur, end, shards[cur].Size)
				}
				if e.Size > 0 && aligned(shards[cur].Size)+e.Size <= shardTarget {
					t.Errorf("%q (%d bytes) starts shard %d though shard %d had room (%d bytes)", x.Path(layout.ID(i)), e.Size, e.Shard, cur, shards[cur].Size)
				}
				cur, end = e.Shard, 0
			}
			if e.Size > 0 {
				end = aligned(end)
			}
			if e.Offset != end {
				t.Fatalf("%q: offset %d in shard %d, want %d (aligned, in pack order)", x.Path(layout.ID(i)), e.Offset, e.Shard, end)
			}
			end += e.Size
			if e.Size > 0 {
				nonzero[e.Shard]++
			}
		}
		if int(cur) != len(shards)-1 || aligned(end) != shards[cur].Size {
			t.Fatalf("samples end in shard %d at %d; the index has %d shards, the last of %d bytes", cur, end, len(shards), shards[len(shards)-1].Size)
		}
		for i, s := range shards {
			fi, err := os.Stat(filepath.Join(dst, s.Name))
			if err != nil || uint64(fi.Size()) != s.Size {
				t.Errorf("%s: %v, size on disk differs from the index's %d", s.Name, err, s.Size)
			}
			if s.Size > shardTarget && nonzero[i] != 1 {
				t.Errorf("%s is %d bytes, over the 64K target, with %d samples", s.Name, s.Size, nonzero[i])
			}
		}
	})

	t.Run("ls", func(t *testing.T) {
		model := sourceEntries(t, src, false)
		children := map[string][]entry{}
		for _, e := range model {
			if e.path != "" {
				parent := ""
				if i := strings.LastIndex(e.path, "/"); i >= 0 {
					parent = e.path[:i]
				}
				children[parent] = append(children[parent], e)
			}
		}
		var dirs []string
		for _, e := range model {
			if e.dir && (!strings.HasPrefix(e.path, "deep/") || e.path == "deep/d000" || e.path == deepDir()) {
				dirs = append(dirs, e.path)
			}
		}
		for _, d := range dirs {
			var want []lsLine
			for _, e := range children[d] {
				want = append(want, lsLineFor(e))
			}
			// Listings are in name byte order.
			sort.Slice(want, func(i, j int) bool { return want[i].name < want[j].name })
			var got []lsLine
			if d == "" {
				got = ls(t, dst)
			} else {
				got = ls(t, dst, d)
			}
			if !slices.Equal(got, want) {
				for i := range min(len(got), len(want)) {
					if got[i] != want[i] {
						t.Fatalf("aifs ls %q: line %d is %+v, want %+v (%d lines, want %d)", d, i, got[i], want[i], len(got), len(want))
					}
				}
				t.Fatalf("aifs ls %q: %d lines, want %d", d, len(got), len(want))
			}
		}
		// A file path lists that file alone.
		for _, p := range []string{"with\nnewline.txt", "\xff\xfe", "linkfile", deepDir() + "/leaf.txt"} {
			got := ls(t, dst, p)
			var want lsLine
			for _, e := range model {
				if e.path == p {
					want = lsLineFor(e)
				}
			}
			if len(got) != 1 || got[0] != want {
				t.Errorf("aifs ls %q = %+v, want [%+v]", p, got, want)
			}
		}
		if r := aifs(t, "ls", dst, "no/such/path"); r.code != 1 || !strings.Contains(r.stderr, "no/such/path") {
			t.Errorf("aifs ls of a missing path: want exit 1 naming it; %s", r)
		}
	})

	t.Run("verify", func(t *testing.T) {
		r := mustAifs(t, "verify", dst)
		want := fmt.Sprintf("ok: %d samples", countFiles(sourceEntries(t, src, false)))
		if !strings.Contains(r.stdout, want) {
			t.Errorf("aifs verify: want %q in stdout; %s", want, r)
		}
	})
}

func countFiles(es []entry) int {
	n := 0
	for _, e := range es {
		if !e.dir {
			n++
		}
	}
	return n
}

// TestPackDegenerateTrees packs trees with nothing to store: no entries, only directories, only
// zero-byte files.
func TestPackDegenerateTrees(t *testing.T) {
	for _, c := range []struct {
		name   string
		files  []string // ending in "/": an empty directory
		shards int
	}{
		{"empty", nil, 0},
		{"only directories", []string{"a/b/c/", "d/"}, 0},
		{"only zero-byte files", []string{"z", "a/z", "a/b/z"}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := filepath.Join(t.TempDir(), "src")
			mkdir(t, src)
			for _, f := range c.files {
				if strings.HasSuffix(f, "/") {
					mkdir(t, filepath.Join(src, f))
				} else {
					writeFile(t, filepath.Join(src, f), nil)
				}
			}
			dst := filepath.Join(t.TempDir(), "set")
			mustAifs(t, "pack", src, dst)
			if n := len(wantShardSet(t, dst).Shards()); n != c.shards {
				t.Errorf("%d shards, want %d", n, c.shards)
			}
			compareEntries(t, c.name, sourceEntries(t, src, true), setEntries(t, dst))
			mustAifs(t, "verify", dst)
			if got := ls(t, dst); len(got) != len(names(t, src)) {
				t.Errorf("aifs ls lists %+v; the source root holds %q", got, names(t, src))
			}
		})
	}
}

// TestPackRelativeSource runs `aifs pack` from a working directory with a relative source, "."
// included, over a tree whose symlinks stay inside it (issue 28: each was refused as outside the
// source tree, its relative target compared with the absolute root). The set must hold what an
// absolute source gives.
func TestPackRelativeSource(t *testing.T) {
	base := t.TempDir()
	writeFile(t, filepath.Join(base, "t/a/f"), []byte("hi\n"))
	mkdir(t, filepath.Join(base, "t/b"))
	symlink(t, "../a/f", filepath.Join(base, "t/b/l"))
	symlink(t, "../a", filepath.Join(base, "t/b/d"))
	want := sourceEntries(t, filepath.Join(base, "t"), true)
	for _, c := range []struct{ cwd, src, dst string }{
		{base, "t", "s1"},
		{filepath.Join(base, "t"), ".", "../s2"},
		{filepath.Join(base, "t/b"), "..", "../../s3"},
	} {
		cmd := exec.Command(aifsBin, "pack", "--quiet", c.src, c.dst)
		cmd.Dir = c.cwd
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("aifs pack %s %s in %s: %v\n%s", c.src, c.dst, c.cwd, err, out)
			continue
		}
		set := filepath.Join(c.cwd, c.dst)
		compareEntries(t, "pack "+c.src+" from "+c.cwd, want, setEntries(t, set))
		mustAifs(t, "verify", set)
	}
}

// TestLsNamesUnambiguous checks that `aifs ls` prints distinct names distinctly. A name that
// is shown quoted (here a control character) must not print the same as a printable name that
// happens to look like that quoted form.
func TestLsNamesUnambiguous(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	srcNames := []string{"\x01", `"\x01"`, `"quoted"`, "quoted", `back\slash`}
	for i, n := range srcNames {
		writeFile(t, filepath.Join(src, n), []byte(strconv.Itoa(i)))
	}
	dst := filepath.Join(t.TempDir(), "set")
	mustAifs(t, "pack", "--quiet", src, dst)
	r := mustAifs(t, "ls", dst)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	shown := map[string][]string{}
	for _, line := range lines {
		m := lsRE.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("cannot parse line %q", line)
		}
		shown[m[4]] = append(shown[m[4]], line)
	}
	if len(lines) != len(srcNames) || len(shown) != len(srcNames) {
		for name, ls := range shown {
			if len(ls) > 1 {
				t.Errorf("aifs ls shows %d different entries as %s:\n%s", len(ls), name, strings.Join(ls, "\n"))
			}
		}
		t.Fatalf("aifs ls of %q: %d lines, %d distinct names, want %d; %s", srcNames, len(lines), len(shown), len(srcNames), r)
	}
}

// ---------------------------------------------------------------------------------------------
// 2. Determinism

func TestPackDeterministic(t *testing.T) {
	src := edgeTree(t)
	tmp := t.TempDir()
	a, b := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
	// Different parallelism must not change a byte.
	for _, r := range []result{
		mustAifs(t, "pack", "--quiet", "--shard-size", "64K", "--jobs", "1", src, a),
		mustAifs(t, "pack", "--quiet", "--shard-size", "64K", "--jobs", "16", src, b),
	} {
		if r.stdout != "" {
			t.Errorf("pack --quiet printed %q", r.stdout)
		}
	}
	na, nb := names(t, a), names(t, b)
	if !slices.Equal(na, nb) || len(na) < 3 {
		t.Fatalf("the two packs hold different files:\n%q\n%q", na, nb)
	}
	for _, n := range na {
		da, err := os.ReadFile(filepath.Join(a, n))
		if err != nil {
			t.Fatal(err)
		}
		db, err := os.ReadFile(filepath.Join(b, n))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(da, db) {
			i := 0
			for i < min(len(da), len(db)) && da[i] == db[i] {
				i++
			}
			t.Errorf("%s differs between the two packs (%d and %d bytes, first difference at byte %d)", n, len(da), len(db), i)
		}
	}
}

// ---------------------------------------------------------------------------------------------
// 3. Atomicity

const bigSourceFiles = 64

// The big source is built once and shared by the interruption tests.
var bigSrc struct {
	once sync.Once
	dir  string
	err  error
}

// bigSource returns a tree of 64 files of 1 to 10 MiB (320 MiB), some read whole by the packer
// and some streamed, so that a pack takes a moment.
func bigSource(t testing.TB) string {
	t.Helper()
	bigSrc.once.Do(func() {
		dir := filepath.Join(workDir, "big-source")
		sizes := []int{1 << 20, 3 << 20, 6 << 20, 10 << 20}
		buf := make([]byte, 10<<20)
		r := prng(0x9e3779b97f4a7c15)
		for i := range bigSourceFiles {
			p := filepath.Join(dir, fmt.Sprintf("part-%d", i%2), fmt.Sprintf("file-%03d.bin", i))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				bigSrc.err = err
				return
			}
			b := buf[:sizes[i%len(sizes)]]
			r.fill(b)
			if err := os.WriteFile(p, b, 0o644); err != nil {
				bigSrc.err = err
				return
			}
		}
		bigSrc.dir = dir
	})
	if bigSrc.err != nil {
		t.Fatalf("building the big source: %v", bigSrc.err)
	}
	return bigSrc.dir
}

// tempFiles lists the names in dir with the packer's temporary prefix and their sizes.
func tempFiles(dir string) map[string]int64 {
	out := map[string]int64{}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".aifs-tmp-") {
			if fi, err := e.Info(); err == nil {
				out[e.Name()] = fi.Size()
			}
		}
	}
	return out
}

// waitForTemps polls dst every millisecond until the running pack p has n temporary files there,
// the newest with data in it. It fails the test if p exits first.
func waitForTemps(t testing.TB, p *started, dst string, n int) {
	t.Helper()
	for {
		temps := tempFiles(dst)
		if len(temps) >= n {
			for name, size := range temps {
				if size > 0 && (n == 1 || strings.Contains(name, layout.ShardName(n-1))) {
					return
				}
			}
		}
		if p.exited() {
			r, _ := p.wait(t)
			t.Fatalf("pack ended before %d temporary files appeared in %s; the source is too small to interrupt? %s", n, dst, r)
		}
		time.Sleep(time.Millisecond)
	}
}

// wantCRCsMatch checks every source file against the CRC32C and size the index records, and
// `aifs verify` checks the shards against the index: together, content equality.
func wantCRCsMatch(t testing.TB, src, dst string) {
	t.Helper()
	x := loadSet(t, dst)
	table := crc32.MakeTable(crc32.Castagnoli)
	n := 0
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		id, err := x.LookupPath(filepath.ToSlash(rel))
		if err != nil {
			return fmt.Errorf("%s is not in the shard set", rel)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if e := x.Entry(id); e.Size != uint64(len(data)) || e.CRC != crc32.Checksum(data, table) {
			return fmt.Errorf("%s: index says %d bytes crc %08x; source has %d bytes crc %08x", rel, e.Size, e.CRC, len(data), crc32.Checksum(data, table))
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files := x.Len() - 3; n != files { // root, part-0, part-1
		t.Fatalf("source has %d files, shard set %d", n, files)
	}
	mustAifs(t, "verify", "--quiet", dst)
}

func TestPackInterrupted(t *testing.T) {
	src := bigSource(t)

	t.Run("SIGKILL", func(t *testing.T) {
		dst := filepath.Join(t.TempDir(), "set")
		p := start(t, "pack", "--shard-size", "64M", src, dst)
		waitForTemps(t, p, dst, 1)
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if r, sig := p.wait(t); sig != syscall.SIGKILL {
			t.Fatalf("pack was not killed by SIGKILL (finished first?): %s", r)
		}
		left := names(t, dst)
		if slices.Contains(left, layout.IndexName) {
			t.Fatalf("killed pack left %s in %s: %q", layout.IndexName, dst, left)
		}
		if len(tempFiles(dst)) == 0 {
			t.Fatalf("killed pack left no temporary files (%q); the test did not interrupt it", left)
		}
		for _, cmd := range []string{"verify", "ls"} {
			r := aifs(t, cmd, dst)
			if r.code != 1 || !strings.Contains(r.stderr, "not a shard set") || !strings.Contains(r.stderr, dst) {
				t.Errorf("aifs %s on a killed pack's leftovers: want exit 1 and %q naming %s; %s", cmd, "not a shard set", dst, r)
			}
		}
		r := aifs(t, "pack", src, dst)
		if r.code != 1 || !strings.Contains(r.stderr, "leftovers") || !strings.Contains(r.stderr, "--force") {
			t.Errorf("pack over leftovers without --force: want exit 1 mentioning leftovers and --force; %s", r)
		}
		if got := names(t, dst); !slices.Equal(got, left) {
			t.Errorf("refused pack changed the destination: %q, was %q", got, left)
		}
		mustAifs(t, "pack", "--force", "--shard-size", "64M", src, dst)
		wantShardSet(t, dst)
		wantCRCsMatch(t, src, dst)
	})

	t.Run("SIGINT", func(t *testing.T) {
		// Into a destination the pack creates (and so removes), then into an existing empty one.
		for _, existing := range []bool{false, true} {
			dst := filepath.Join(t.TempDir(), "set")
			if existing {
				mkdir(t, dst)
			}
			p := start(t, "pack", "--shard-size", "32M", src, dst)
			waitForTemps(t, p, dst, 2) // two shards under way, so that cleanup has several files
			if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			r, sig := p.wait(t)
			if r.code != 130 || sig != 0 || !strings.Contains(r.stderr, "interrupted") {
				t.Errorf("pack after SIGINT: want exit status 130 and %q on stderr; signal %v, %s", "interrupted", sig, r)
			}
			if existing {
				wantEmptyDir(t, dst)
			} else {
				wantNoDir(t, dst)
			}
		}
	})

	t.Run("SIGKILL while replacing", func(t *testing.T) {
		// The old set stays valid and usable beside the leftovers of the killed pack.
		dst := filepath.Join(t.TempDir(), "set")
		old := filepath.Join(t.TempDir(), "old")
		writeFile(t, filepath.Join(old, "a"), []byte("old a"))
		writeFile(t, filepath.Join(old, "b"), []byte("old b"))
		mustAifs(t, "pack", "--quiet", "--shard-size", "4", old, dst)
		p := start(t, "pack", "--force", "--shard-size", "32M", src, dst)
		waitForTemps(t, p, dst, 1)
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if r, sig := p.wait(t); sig != syscall.SIGKILL {
			t.Fatalf("pack was not killed by SIGKILL (finished first?): %s", r)
		}
		if len(tempFiles(dst)) == 0 {
			t.Fatalf("killed pack left no temporary files (%q); the test did not interrupt it", names(t, dst))
		}
		compareEntries(t, "the old shard set", sourceEntries(t, old, true), setEntries(t, dst))
		mustAifs(t, "verify", "--quiet", dst)
		if got := ls(t, dst); len(got) != 2 || got[0].name != "a" || got[1].name != "b" {
			t.Errorf("aifs ls of the old set = %+v, want a and b", got)
		}
		if r := aifs(t, "pack", old, dst); r.code != 1 || !strings.Contains(r.stderr, "--force") {
			t.Errorf("pack without --force over a set with leftovers: want exit 1 suggesting --force; %s", r)
		}
		mustAifs(t, "pack", "--force", "--quiet", old, dst)
		wantShardSet(t, dst)
		compareEntries(t, "the repacked set", sourceEntries(t, old, true), setEntries(t, dst))
	})

	t.Run("SIGINT while replacing", func(t *testing.T) {
		// With --force, the old set stays valid until the new data is fully written.
		dst := filepath.Join(t.TempDir(), "set")
		old := filepath.Join(t.TempDir(), "old")
		writeFile(t, filepath.Join(old, "a"), []byte("old a"))
		writeFile(t, filepath.Join(old, "b"), []byte("old b"))
		mustAifs(t, "pack", "--quiet", "--shard-size", "4", old, dst)
		before := snapshot(t, dst)
		p := start(t, "pack", "--force", "--shard-size", "32M", src, dst)
		waitForTemps(t, p, dst, 2)
		if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		if r, _ := p.wait(t); r.code != 130 {
			t.Errorf("pack after SIGINT: want exit status 130; %s", r)
		}
		wantSameSnapshot(t, "the old shard set", before, snapshot(t, dst))
		compareEntries(t, "the old shard set", sourceEntries(t, old, true), setEntries(t, dst))
		mustAifs(t, "verify", "--quiet", dst)
	})
}

// ---------------------------------------------------------------------------------------------
// 4. Refusals

func TestPackRefusals(t *testing.T) {
	nobody := &syscall.Credential{Uid: 65534, Gid: 65534}

	// smallTree writes a few files, enough for several 4K shards, under a world-readable dir.
	smallTree := func(t *testing.T, seed uint64) string {
		src := filepath.Join(worldDir(t), "src")
		for i := range 12 {
			writeFile(t, filepath.Join(src, fmt.Sprintf("m/f%02d", i)), randomBytes(seed+uint64(i), 1500))
		}
		return src
	}
	// outDir returns a directory the unprivileged user can create the destination in.
	outDir := func(t *testing.T) string {
		d := filepath.Join(worldDir(t), "out")
		mkdir(t, d)
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
		return d
	}

	t.Run("unreadable file", func(t *testing.T) {
		src := smallTree(t, 10)
		bad := filepath.Join(src, "m", "zz-unreadable") // last in pack order: shards are written first
		writeFile(t, bad, []byte("you cannot read me"))
		if err := os.Chmod(bad, 0); err != nil {
			t.Fatal(err)
		}
		out := outDir(t)

		dst := filepath.Join(out, "new")
		r := aifsAs(t, nobody, "pack", "--shard-size", "4K", src, dst)
		if r.code != 1 || !strings.Contains(r.stderr, bad) {
			t.Errorf("pack of a tree with an unreadable file (as uid 65534): want exit 1 naming %s; %s", bad, r)
		}
		wantNoDir(t, dst)

		// The same into an existing empty directory: it stays empty.
		dst = filepath.Join(out, "existing")
		mkdir(t, dst)
		if err := os.Chown(dst, int(nobody.Uid), int(nobody.Gid)); err != nil {
			t.Fatal(err)
		}
		r = aifsAs(t, nobody, "pack", "--shard-size", "4K", src, dst)
		if r.code != 1 || !strings.Contains(r.stderr, bad) {
			t.Errorf("pack of a tree with an unreadable file (as uid 65534): want exit 1 naming %s; %s", bad, r)
		}
		wantEmptyDir(t, dst)
	})

	t.Run("unreadable directory", func(t *testing.T) {
		src := smallTree(t, 20)
		bad := filepath.Join(src, "n-locked")
		writeFile(t, filepath.Join(bad, "inside"), []byte("x"))
		if err := os.Chmod(bad, 0); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(outDir(t), "new")
		r := aifsAs(t, nobody, "pack", "--shard-size", "4K", src, dst)
		if r.code != 1 || !strings.Contains(r.stderr, bad) {
			t.Errorf("pack of a tree with an unreadable directory (as uid 65534): want exit 1 naming %s; %s", bad, r)
		}
		wantNoDir(t, dst)
	})

	t.Run("size differs from content", func(t *testing.T) {
		// /proc files stat as 0 bytes and read as more.
		src := smallTree(t, 30)
		bad := filepath.Join(src, "status")
		symlink(t, "/proc/self/status", bad)
		dst := filepath.Join(t.TempDir(), "set")
		r := aifs(t, "pack", "--follow-external-symlinks", "--shard-size", "4K", src, dst)
		if r.code != 1 || !strings.Contains(r.stderr, bad+" changed size while being packed") {
			t.Errorf("pack of a tree with a /proc file: want exit 1 and %q; %s", bad+" changed size while being packed", r)
		}
		wantNoDir(t, dst)
	})

	t.Run("symlink out of the source", func(t *testing.T) {
		outside := t.TempDir()
		writeFile(t, filepath.Join(outside, "secret"), []byte("not part of the dataset"))
		mkdir(t, filepath.Join(outside, "dir"))
		writeFile(t, filepath.Join(outside, "dir", "f"), []byte("elsewhere"))
		for _, link := range []string{"to-file", "to-dir"} {
			t.Run(link, func(t *testing.T) {
				tree := smallTree(t, 31)
				path := filepath.Join(tree, "m", link)
				symlink(t, map[string]string{"to-file": filepath.Join(outside, "secret"), "to-dir": filepath.Join(outside, "dir")}[link], path)
				dst := filepath.Join(t.TempDir(), "set")
				if r := aifs(t, "pack", tree, dst); r.code != 1 || !strings.Contains(r.stderr, path) || !strings.Contains(r.stderr, "--follow-external-symlinks") {
					t.Errorf("pack of a tree with a symlink out of it: want exit 1 naming %s and the flag; %s", path, r)
				}
				wantNoDir(t, dst)
				mustAifs(t, "pack", "--quiet", "--follow-external-symlinks", tree, dst)
				if r := mustAifs(t, "ls", dst, "m"); !strings.Contains(r.stdout, link) {
					t.Errorf("--follow-external-symlinks did not pack %s: %s", link, r.stdout)
				}
			})
		}
		// A symlink inside the tree, even through "..", is followed without the flag.
		tree := smallTree(t, 32)
		symlink(t, "../m", filepath.Join(tree, "m", "up"))
		mustAifs(t, "pack", "--quiet", tree, filepath.Join(t.TempDir(), "set"))
	})

	t.Run("bad source or destination", func(t *testing.T) {
		dir := t.TempDir()
		file := filepath.Join(dir, "file")
		writeFile(t, file, []byte("x"))
		src := smallTree(t, 35)
		for _, c := range []struct{ src, dst, want string }{
			{filepath.Join(dir, "missing"), filepath.Join(dir, "set1"), filepath.Join(dir, "missing")},
			{file, filepath.Join(dir, "set2"), file},
			{src, file, file},
			{src, filepath.Join(dir, "no/such/parent/set"), filepath.Join(dir, "no/such/parent/set")},
		} {
			if r := aifs(t, "pack", c.src, c.dst); r.code != 1 || !strings.Contains(r.stderr, c.want) {
				t.Errorf("aifs pack %s %s: want exit 1 naming %s; %s", c.src, c.dst, c.want, r)
			}
		}
		if got := names(t, dir); !slices.Equal(got, []string{"file"}) {
			t.Errorf("failed packs left %q in %s", got, dir)
		}
		if data, _ := os.ReadFile(file); string(data) != "x" {
			t.Errorf("a failed pack changed the file given as destination")
		}
	})

	t.Run("destination inside source", func(t *testing.T) {
		src := smallTree(t, 40)
		link := filepath.Join(t.TempDir(), "link-to-src")
		symlink(t, src, link)
		before := snapshot(t, src)
		for _, dst := range []string{src, src + "/", filepath.Join(src, "out"), filepath.Join(src, "m", "out"),
			src + "/m/../out", filepath.Join(link, "out"), filepath.Join(src, "m", "f00")} {
			r := aifs(t, "pack", src, dst)
			if r.code != 1 || !strings.Contains(r.stderr, "inside the source") || !strings.Contains(r.stderr, dst) {
				t.Errorf("pack %s %s: want exit 1 and %q naming the destination; %s", src, dst, "inside the source", r)
			}
			wantSameSnapshot(t, "the source", before, snapshot(t, src))
		}
	})

	t.Run("destination not empty", func(t *testing.T) {
		src := smallTree(t, 50)
		dst := filepath.Join(t.TempDir(), "set")
		writeFile(t, filepath.Join(dst, "notes.txt"), []byte("mine"))
		before := snapshot(t, dst)
		for _, force := range []bool{false, true} {
			args := []string{"pack", src, dst}
			if force {
				args = []string{"pack", "--force", src, dst}
			}
			r := aifs(t, args...)
			if r.code != 1 || !strings.Contains(r.stderr, dst) || !strings.Contains(r.stderr, "notes.txt") {
				t.Errorf("aifs %q into a directory holding a user file: want exit 1 naming the directory and the file; %s", args, r)
			}
			wantSameSnapshot(t, "the destination", before, snapshot(t, dst))
		}
	})

	t.Run("existing shard set", func(t *testing.T) {
		oldSrc := smallTree(t, 60) // 12 files of 1500 bytes in 4K shards: 6 shards
		newSrc := filepath.Join(worldDir(t), "new")
		writeFile(t, filepath.Join(newSrc, "only/one"), randomBytes(99, 3000))
		writeFile(t, filepath.Join(newSrc, "only/two"), randomBytes(98, 3000))
		dst := filepath.Join(t.TempDir(), "set")
		mustAifs(t, "pack", "--quiet", "--shard-size", "4K", oldSrc, dst)
		if n := len(wantShardSet(t, dst).Shards()); n < 4 {
			t.Fatalf("old set has %d shards; the test wants more than the new set's 2", n)
		}
		before := snapshot(t, dst)

		r := aifs(t, "pack", "--shard-size", "4K", newSrc, dst)
		if r.code != 1 || !strings.Contains(r.stderr, dst) || !strings.Contains(r.stderr, "--force") {
			t.Errorf("pack over a shard set without --force: want exit 1 naming it and suggesting --force; %s", r)
		}
		wantSameSnapshot(t, "the old set", before, snapshot(t, dst))
		mustAifs(t, "verify", "--quiet", dst)

		// --force with a source that fails midway: the old set is untouched.
		badSrc := smallTree(t, 70)
		symlink(t, "/proc/self/status", filepath.Join(badSrc, "status"))
		if r := aifs(t, "pack", "--force", "--follow-external-symlinks", "--shard-size", "4K", badSrc, dst); r.code != 1 {
			t.Errorf("failing pack with --force: want exit 1; %s", r)
		}
		wantSameSnapshot(t, "the old set after a failed --force pack", before, snapshot(t, dst))
		mustAifs(t, "verify", "--quiet", dst)

		// A user file beside a shard set: refused even with --force, and kept.
		mixed := filepath.Join(t.TempDir(), "mixed")
		mustAifs(t, "pack", "--quiet", "--shard-size", "4K", oldSrc, mixed)
		writeFile(t, filepath.Join(mixed, "README"), []byte("mine"))
		mixedBefore := snapshot(t, mixed)
		if r := aifs(t, "pack", "--force", newSrc, mixed); r.code != 1 || !strings.Contains(r.stderr, "README") {
			t.Errorf("pack --force into a shard set with a user file: want exit 1 naming the file; %s", r)
		}
		wantSameSnapshot(t, "the shard set with a user file", mixedBefore, snapshot(t, mixed))

		// --force replaces the set; the old set's extra shards go.
		mustAifs(t, "pack", "--force", "--shard-size", "4K", newSrc, dst)
		if n := len(wantShardSet(t, dst).Shards()); n != 2 {
			t.Errorf("new set has %d shards, want 2", n)
		}
		compareEntries(t, "the replacing set", sourceEntries(t, newSrc, true), setEntries(t, dst))
		mustAifs(t, "verify", "--quiet", dst)
	})
}

// ---------------------------------------------------------------------------------------------
// 5. Corruption

// corruptionSet packs a tree of 30 files of 700-1800 bytes into 4K shards and returns it.
func corruptionSet(t *testing.T) string {
	src := t.TempDir()
	for i := range 30 {
		writeFile(t, filepath.Join(src, string(rune('a'+i%3)), fmt.Sprintf("sample-%02d.bin", i)), randomBytes(uint64(i)+1000, 700+37*i))
	}
	dst := filepath.Join(t.TempDir(), "set")
	// Packed end to end (--align 0), three samples to a 4 KiB shard: the tests that use it cut,
	// swap and flip shards by their sizes.
	mustAifs(t, "pack", "--quiet", "--align", "0", "--shard-size", "4K", src, dst)
	return dst
}

// copySet copies the flat shard-set directory src to a new directory.
func copySet(t *testing.T, src string) string {
	dst := filepath.Join(t.TempDir(), "copy")
	mkdir(t, dst)
	for _, n := range names(t, src) {
		data, err := os.ReadFile(filepath.Join(src, n))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dst, n), data)
	}
	return dst
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
}

var corruptLineRE = regexp.MustCompile(`(?m)^corrupt: (.*?): `)

// reportedSamples runs `aifs verify` on dir and returns the sample paths of its "corrupt:" lines.
func reportedSamples(t *testing.T, dir string) (result, []string) {
	t.Helper()
	r := aifs(t, "verify", dir)
	var paths []string
	for _, m := range corruptLineRE.FindAllStringSubmatch(r.stdout, -1) {
		paths = append(paths, m[1])
	}
	sort.Strings(paths)
	return r, paths
}

func TestCorruption(t *testing.T) {
	pristine := corruptionSet(t)
	x := loadSet(t, pristine)
	var samples []layout.ID // file ids; pack order
	for i := 0; i < x.Len(); i++ {
		if !x.Entry(layout.ID(i)).IsDir() {
			samples = append(samples, layout.ID(i))
		}
	}
	inShard := func(s uint32) []layout.ID {
		var out []layout.ID
		for _, id := range samples {
			if x.Entry(id).Shard == s {
				out = append(out, id)
			}
		}
		return out
	}
	// A shard in the middle with at least three samples, and the middle sample of those.
	var shard uint32
	for s := uint32(1); s < uint32(len(x.Shards())); s++ {
		if len(inShard(s)) >= 3 {
			shard = s
			break
		}
	}
	if shard == 0 {
		t.Fatalf("no shard past the first holds 3 samples: %+v", x.Shards())
	}
	victim := inShard(shard)[1]
	shardPath := func(dir string) string { return filepath.Join(dir, layout.ShardName(int(shard))) }

	// wantReported checks that verify exits 1 and reports exactly the samples want, and that no
	// other sample's path appears anywhere in its output.
	wantReported := func(t *testing.T, dir string, want []layout.ID) {
		t.Helper()
		r, got := reportedSamples(t, dir)
		var wantPaths []string
		for _, id := range want {
			wantPaths = append(wantPaths, x.Path(id))
		}
		sort.Strings(wantPaths)
		if r.code != 1 || !slices.Equal(got, wantPaths) {
			t.Fatalf("aifs verify: want exit 1 reporting exactly %q; reported %q; %s", wantPaths, got, r)
		}
		for _, id := range samples {
			if p := x.Path(id); !slices.Contains(wantPaths, p) && strings.Contains(r.stdout+r.stderr, p) {
				t.Errorf("aifs verify mentions intact sample %s; %s", p, r)
			}
		}
	}

	t.Run("pristine", func(t *testing.T) {
		mustAifs(t, "verify", pristine)
	})

	t.Run("index", func(t *testing.T) {
		idx, err := os.ReadFile(filepath.Join(pristine, layout.IndexName))
		if err != nil {
			t.Fatal(err)
		}
		section := func(i int) (int64, int64) { // version 3's descriptors (layout/FORMAT.md)
			d := idx[56+24*i:]
			return int64(binary.LittleEndian.Uint64(d)), int64(binary.LittleEndian.Uint64(d[8:]))
		}
		entOff, entLen := section(0)
		shOff, _ := section(1)
		nameOff, nameLen := section(2)
		// lazy: a block read only when used, so aifs ls (which reads the blocks of the top
		// directory) need not meet the damage; aifs verify checks every block.
		cases := []struct {
			off  int64
			want string
			lazy bool
		}{
			{0, "magic", false},
			{9, "header", false},   // version
			{17, "header", false},  // entry count
			{40, "header", false},  // file bytes
			{230, "header", false}, // reserved
			{126, "header", false}, // a section descriptor
			{254, "header", false}, // header checksum
			{entOff + 3, "entries block 0", false},
			{entOff + entLen/2, "entries block", true},
			{entOff + entLen - 1, "entries block", true},
			{shOff + 17, "shards section", false},
			{nameOff, "names block 0", false},
			{nameOff + nameLen - 1, "names block", false}, // the shards' names, read at load
			{-1, "shorter than", false},                   // truncated to 100 bytes
			{-2, "outside", false},                        // last byte cut off
			{-3, "shorter than", false},                   // empty
		}
		for _, c := range cases {
			dir := copySet(t, pristine)
			path := filepath.Join(dir, layout.IndexName)
			var err error
			switch c.off {
			case -1:
				err = os.Truncate(path, 100)
			case -2:
				err = os.Truncate(path, int64(len(idx)-1))
			case -3:
				err = os.Truncate(path, 0)
			default:
				flipByte(t, path, c.off)
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, cmd := range []string{"verify", "ls"} {
				if cmd == "ls" && c.lazy {
					continue
				}
				r := aifs(t, cmd, dir)
				if r.code != 1 || !strings.Contains(r.stderr, "corrupt") || !strings.Contains(r.stderr, c.want) {
					t.Errorf("aifs %s with index byte %d flipped: want exit 1 and a message with %q and %q; %s", cmd, c.off, "corrupt", c.want, r)
				}
			}
		}
		// Every byte of the index is covered by a checksum: flipping any one is a load error, or
		// an error when its block is checked (CheckAll checks them all).
		for off := range idx {
			buf := bytes.Clone(idx)
			buf[off] ^= 0xff
			x, err := layout.Parse(buf)
			if err == nil {
				err = x.CheckAll()
			}
			if !errors.Is(err, layout.ErrCorrupt) {
				t.Errorf("index byte %d of %d flipped: Parse and CheckAll = %v, want an error wrapping ErrCorrupt", off, len(idx), err)
			}
		}
	})

	t.Run("sample byte", func(t *testing.T) {
		e := x.Entry(victim)
		for _, off := range []uint64{e.Offset, e.Offset + e.Size/2, e.Offset + e.Size - 1} {
			dir := copySet(t, pristine)
			flipByte(t, shardPath(dir), int64(off))
			wantReported(t, dir, []layout.ID{victim})
		}
	})

	t.Run("truncated shard", func(t *testing.T) {
		dir := copySet(t, pristine)
		e := x.Entry(victim)
		cut := e.Offset + e.Size/2
		if err := os.Truncate(shardPath(dir), int64(cut)); err != nil {
			t.Fatal(err)
		}
		var want []layout.ID
		for _, id := range inShard(shard) {
			if s := x.Entry(id); s.Offset+s.Size > cut {
				want = append(want, id)
			}
		}
		if len(want) < 2 {
			t.Fatalf("test wants at least two samples past the cut, has %d", len(want))
		}
		wantReported(t, dir, want)
	})

	t.Run("shard with bytes appended", func(t *testing.T) {
		dir := copySet(t, pristine)
		f, err := os.OpenFile(shardPath(dir), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte("garbage"))
		f.Close()
		wantReported(t, dir, nil)
		if r := aifs(t, "verify", dir); !strings.Contains(r.stdout, "bad shard: "+layout.ShardName(int(shard))) {
			t.Errorf("aifs verify does not report the grown shard %s; %s", layout.ShardName(int(shard)), r)
		}
	})

	t.Run("missing shard", func(t *testing.T) {
		dir := copySet(t, pristine)
		if err := os.Remove(shardPath(dir)); err != nil {
			t.Fatal(err)
		}
		r, _ := reportedSamples(t, dir)
		wantReported(t, dir, inShard(shard))
		if !strings.Contains(r.stdout, layout.ShardName(int(shard))) {
			t.Errorf("aifs verify does not name the missing shard %s; %s", layout.ShardName(int(shard)), r)
		}
	})
}

// ---------------------------------------------------------------------------------------------
// 6. Help and usage

func TestHelpAndUsage(t *testing.T) {
	for _, cmd := range []string{"pack", "verify", "ls"} {
		for _, flag := range []string{"--help", "-h"} {
			r := aifs(t, cmd, flag)
			if r.code != 0 || !strings.Contains(r.stdout, "Usage: aifs "+cmd) || r.stderr != "" {
				t.Errorf("aifs %s %s: want exit 0 and %q on stdout, nothing on stderr; %s", cmd, flag, "Usage: aifs "+cmd, r)
			}
			if cmd == "pack" && !strings.Contains(r.stdout, "(default 1GiB)") {
				t.Errorf("aifs pack %s does not show the shard size default %q; %s", flag, "(default 1GiB)", r)
			}
		}
	}
	if r := aifs(t, "--help"); r.code != 0 || !strings.Contains(r.stdout, "Usage: aifs") {
		t.Errorf("aifs --help: want exit 0 and usage on stdout; %s", r)
	}
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"pack"},
		{"pack", "a"},
		{"pack", "a", "b", "c"},
		{"pack", "--no-such-flag", "a", "b"},
		{"pack", "--shard-size", "0", "a", "b"},
		{"pack", "--shard-size", "lots", "a", "b"},
		{"verify"},
		{"verify", "a", "b"},
		{"ls"},
		{"ls", "a", "b", "c"},
	} {
		r := aifs(t, args...)
		if r.code != 2 || !strings.Contains(r.stderr, "Usage: aifs") || r.stdout != "" {
			t.Errorf("aifs %q: want exit 2 with usage on stderr and nothing on stdout; %s", args, r)
		}
	}
}
