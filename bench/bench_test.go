package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/aifs/aifs/internal/subset"
	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/layout/pack"
	"github.com/aifs/aifs/plan"
)

// writeTree creates the files (relative path → content) under a new temporary directory.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for rel, content := range files {
		path := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// sampleTree returns n files in a few class directories with distinct contents of varied sizes:
// an empty file, pairs of equal sizes, and one larger than a reader's first buffer.
func sampleTree(n int) map[string]string {
	files := make(map[string]string, n)
	for i := range n {
		size := (i / 2) * 37 // files 2k and 2k+1 have the same size
		if i == 7 {
			size = 700 << 10
		}
		content := strings.Repeat(fmt.Sprintf("%d,", i), size/2+1)[:size]
		files[fmt.Sprintf("class-%d/img-%03d.JPEG", i%4, i)] = content
	}
	return files
}

// wantDigest computes the digest of reading every file of files once, independently of readPass.
func wantDigest(files map[string]string) string {
	var sum uint64
	for rel, content := range files {
		sum += sampleHash([]byte(rel+"\x00"), []byte(content))
	}
	return fmt.Sprintf("%016x", sum)
}

func TestBenchDigests(t *testing.T) {
	files := sampleTree(40)
	a, b := writeTree(t, files), writeTree(t, files)
	var out bytes.Buffer
	rep, err := Run(t.Context(), Options{Dirs: []string{a, b}, Epochs: 2, Jobs: 3, Seed: 1}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Passes) != 4 {
		t.Fatalf("%d passes, want 4 (2 epochs × 2 dirs):\n%s", len(rep.Passes), out.String())
	}
	want := wantDigest(files)
	var size int64
	for _, c := range files {
		size += int64(len(c))
	}
	for i, p := range rep.Passes {
		if p.Dir != []string{a, b}[i%2] || p.Epoch != i/2+1 {
			t.Errorf("pass %d is %s epoch %d; want the dirs interleaved per epoch", i, p.Dir, p.Epoch)
		}
		if p.Digest != want || p.Files != len(files) || p.Bytes != size {
			t.Errorf("pass %d: digest %s, %d files, %d bytes; want %s, %d, %d", i, p.Digest, p.Files, p.Bytes, want, len(files), size)
		}
	}
	if len(rep.Mismatches) != 0 || !rep.Dirs[1].DigestsMatch {
		t.Errorf("copies reported as different: %q", rep.Mismatches)
	}
	if !strings.Contains(out.String(), "digest "+want) {
		t.Errorf("output does not show digest %s:\n%s", want, out.String())
	}

	// One byte changed: both epochs of b differ from a.
	changed := maps.Clone(files)
	changed["class-3/img-011.JPEG"] = "X" + files["class-3/img-011.JPEG"][1:]
	c := writeTree(t, changed)
	rep, err = Run(t.Context(), Options{Dirs: []string{a, c}, Epochs: 2, Jobs: 3, Seed: 1}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Mismatches) != 2 || rep.Dirs[1].DigestsMatch {
		t.Errorf("one byte changed: mismatches %q, digests match %v; want one per epoch", rep.Mismatches, rep.Dirs[1].DigestsMatch)
	}
	var summary bytes.Buffer
	PrintSummary(&summary, rep)
	if !strings.Contains(summary.String(), "DIGEST MISMATCH") || !strings.Contains(summary.String(), "DIGESTS DIFFER") {
		t.Errorf("summary does not report the mismatch loudly:\n%s", summary.String())
	}

	// Two files of the same size swap contents: an XOR of plain CRCs would not notice.
	swapped := maps.Clone(files)
	x, y := "class-0/img-004.JPEG", "class-1/img-005.JPEG"
	if len(files[x]) != len(files[y]) || files[x] == files[y] {
		t.Fatal("sampleTree no longer has two different files of the same size")
	}
	swapped[x], swapped[y] = files[y], files[x]
	if wantDigest(swapped) == want {
		t.Errorf("swapping the contents of %s and %s leaves the digest unchanged", x, y)
	}
}

func TestBenchSeqOrder(t *testing.T) {
	root := writeTree(t, map[string]string{
		"z.txt": "z", "a.txt": "a", "a/x": "x", "a/b/y": "y", "a-b/c": "c", "A/q": "q", "sub/.aifs/f": "f",
	})
	for _, l := range []struct{ name, target string }{
		{"link", "a/b"},         // a directory reached twice: listed under both names, as pack stores it
		{"a/b/loop", "../.."},   // back to the root: skipped
		{"dangling", "missing"}, // skipped
	} {
		if err := os.Symlink(l.target, filepath.Join(root, l.name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := []string{"a.txt", "z.txt", "A/q", "a/x", "a/b/y", "a-b/c", "link/y", "sub/.aifs/f"}

	// Pack the tree before adding the top-level .aifs that bench skips: the shard set's files in
	// id order are pack order.
	dst := filepath.Join(t.TempDir(), "set")
	if _, err := pack.Pack(t.Context(), root, dst, pack.Options{Jobs: 1}); err != nil {
		t.Fatal(err)
	}
	x, err := layout.Load(dst)
	if err != nil {
		t.Fatal(err)
	}
	var packed []string
	for id := range x.Len() {
		if !x.Entry(layout.ID(id)).IsDir() {
			packed = append(packed, x.Path(layout.ID(id)))
		}
	}
	if !slices.Equal(packed, want) {
		t.Fatalf("aifs pack stores %q; the test expects %q", packed, want)
	}
	if err := os.MkdirAll(filepath.Join(root, ".aifs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, ".aifs", "stats"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	paths, err := listTree(t.Context(), root)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(paths, want) {
		t.Fatalf("listTree = %q, want pack order %q", paths, want)
	}
	order := make([]uint32, len(paths))
	epochOrder(order, true, 1, 3)
	for i, o := range order {
		if o != uint32(i) {
			t.Fatalf("--seq order %v is not the listing's order", order)
		}
	}
	// packLess is the order listTree returns, so that diffPaths can tell which side lacks a path.
	shuffled := slices.Clone(want)
	slices.Reverse(shuffled)
	slices.SortFunc(shuffled, func(p, q string) int {
		if packLess(p, q) {
			return -1
		}
		if packLess(q, p) {
			return 1
		}
		return 0
	})
	if !slices.Equal(shuffled, want) {
		t.Errorf("sorting with packLess gives %q, want %q", shuffled, want)
	}
}

func TestEpochOrder(t *testing.T) {
	const n = 1000
	order := func(seed uint64, epoch int) []uint32 {
		o := make([]uint32, n)
		epochOrder(o, false, seed, epoch)
		return o
	}
	e1 := order(1, 1)
	sorted := slices.Clone(e1)
	slices.Sort(sorted)
	for i, v := range sorted {
		if v != uint32(i) {
			t.Fatalf("epoch order is not a permutation of 0..%d", n-1)
		}
	}
	if slices.Equal(e1, sorted) {
		t.Error("epoch order is not shuffled")
	}
	if !slices.Equal(e1, order(1, 1)) {
		t.Error("the same seed and epoch give different orders")
	}
	if slices.Equal(e1, order(1, 2)) {
		t.Error("epochs 1 and 2 read in the same order")
	}
	if slices.Equal(e1, order(2, 1)) {
		t.Error("seeds 1 and 2 give the same order")
	}
	// A buffer left in another epoch's order is refilled, not reshuffled.
	o := order(1, 2)
	epochOrder(o, false, 1, 1)
	if !slices.Equal(o, e1) {
		t.Error("an epoch's order depends on the previous contents of the buffer")
	}
}

func TestPercentile(t *testing.T) {
	us := func(n int) time.Duration { return time.Duration(n) * time.Microsecond }
	var thousand []time.Duration
	for i := 1000; i >= 1; i-- {
		thousand = append(thousand, us(i))
	}
	slices.Sort(thousand)
	for _, tc := range []struct {
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{thousand, 0.50, us(500)},
		{thousand, 0.99, us(990)},
		{thousand, 0.999, us(999)},
		{thousand, 1, us(1000)},
		{thousand[:10], 0.50, us(5)},
		{thousand[:10], 0.99, us(10)},
		{thousand[:10], 0.999, us(10)},
		{thousand[:1], 0.5, us(1)},
		{nil, 0.5, 0},
	} {
		if got := percentile(tc.sorted, tc.p); got != tc.want {
			t.Errorf("percentile of %d values, %v = %v, want %v", len(tc.sorted), tc.p, got, tc.want)
		}
	}
	if m := median([]float64{4, 1, 3}); m != 3 {
		t.Errorf("median(4, 1, 3) = %v", m)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median(4, 1, 3, 2) = %v", m)
	}
}

func TestParseCPUBusy(t *testing.T) {
	// user 100, nice 2, system 30, idle 5000, iowait 400, irq 7, softirq 11, steal 900.
	stat := "cpu  100 2 30 5000 400 7 11 900 0 0\ncpu0 50 1 15 2500 200 3 5 450 0 0\nintr 1\n"
	if d, ok := parseCPUBusy(stat); !ok || d != 1500*time.Millisecond {
		t.Errorf("parseCPUBusy = %v, %v; want 1.5s (150 ticks: not idle, iowait or steal), true", d, ok)
	}
	for _, bad := range []string{"", "intr 1\n", "cpu 1 2 3\n", "cpu 1 2 x 4 5 6 7 8\n"} {
		if d, ok := parseCPUBusy(bad); ok {
			t.Errorf("parseCPUBusy(%q) = %v, true; want false", bad, d)
		}
	}
	if _, err := os.Stat("/proc/stat"); err != nil {
		return // not Linux: cpuBusy reports nothing, and passes record 0
	}
	before, ok := cpuBusy()
	for spin := time.Now(); time.Since(spin) < 100*time.Millisecond; {
	}
	after, ok2 := cpuBusy()
	if !ok || !ok2 || after-before < 50*time.Millisecond {
		t.Errorf("cpuBusy rose by %v over 100 ms of spinning (ok %v %v), want 50 ms at least", after-before, ok, ok2)
	}
}

func TestBenchPathSetsDiffer(t *testing.T) {
	files := map[string]string{"c/1": "1", "c/2": "2", "d/3": "3"}
	a := writeTree(t, files)
	for _, tc := range []struct {
		name  string
		edit  func(map[string]string)
		wantA bool   // the path is only in a (else only in b)
		path  string // the first difference
	}{
		{"missing", func(m map[string]string) { delete(m, "c/2") }, true, "c/2"},
		{"extra", func(m map[string]string) { m["c/10"] = "10" }, false, "c/10"},
		{"extra at the end", func(m map[string]string) { m["e/4"] = "4" }, false, "e/4"},
		{"renamed", func(m map[string]string) { m["c/0"] = m["c/1"]; delete(m, "c/1") }, false, "c/0"},
		{"file before dirs", func(m map[string]string) { m["top"] = "t" }, false, "top"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			other := maps.Clone(files)
			tc.edit(other)
			b := writeTree(t, other)
			var out bytes.Buffer
			_, err := Run(t.Context(), Options{Dirs: []string{a, b}, Epochs: 1, Jobs: 2}, &out)
			only := b
			if tc.wantA {
				only = a
			}
			want := fmt.Sprintf("%s is only in %s", tc.path, only)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v, want one saying %q", err, want)
			}
			if strings.Contains(out.String(), "epoch") {
				t.Errorf("files were read before the listings were compared:\n%s", out.String())
			}
		})
	}
}

func TestBenchDropCaches(t *testing.T) {
	files := sampleTree(8)
	a, b := writeTree(t, files), writeTree(t, files)
	calls := 0
	opt := Options{Dirs: []string{a, b}, Epochs: 3, Jobs: 2, DropCaches: func() error { calls++; return nil }}
	if _, err := Run(t.Context(), opt, io.Discard); err != nil {
		t.Fatal(err)
	}
	if calls != 2+3*2 {
		t.Errorf("caches dropped %d times, want before each of 2 listings and 6 passes", calls)
	}
	denied := errors.New("--drop-caches needs root")
	opt.DropCaches = func() error { return denied }
	var out bytes.Buffer
	rep, err := Run(t.Context(), opt, &out)
	if !errors.Is(err, denied) || out.Len() != 0 || len(rep.Dirs) != 0 {
		t.Errorf("failing to drop caches gave %v after %q; want the error before anything is listed", err, out.String())
	}
}

func TestBenchReadError(t *testing.T) {
	root := writeTree(t, sampleTree(8))
	paths, err := listTree(t.Context(), root)
	if err != nil {
		t.Fatal(err)
	}
	paths = append(paths, "class-9/vanished")
	order := make([]uint32, len(paths))
	epochOrder(order, true, 1, 1)
	_, err = readPass(t.Context(), root, paths, nil, order, make([]time.Duration, len(order)), make([]fileReader, 2))
	want := filepath.Join(root, "class-9/vanished") + ": open: no such file or directory"
	if err == nil || err.Error() != want || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("error %v, want %q wrapping ErrNotExist", err, want)
	}
}

func TestBenchInterrupted(t *testing.T) {
	root := writeTree(t, sampleTree(8))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Run(ctx, Options{Dirs: []string{root}, Epochs: 1, Jobs: 2}, io.Discard); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled run returned %v", err)
	}
	// Cancelled between listing and reading: readPass itself stops.
	paths, err := listTree(t.Context(), root)
	if err != nil {
		t.Fatal(err)
	}
	order := make([]uint32, len(paths))
	epochOrder(order, false, 1, 1)
	if _, err := readPass(ctx, root, paths, nil, order, make([]time.Duration, len(order)), make([]fileReader, 2)); !errors.Is(err, context.Canceled) {
		t.Errorf("readPass with a cancelled context returned %v", err)
	}
}

// TestBenchPlan checks that --plan sends each pass's order, as paths, to every DIR (plan.Send,
// replaced here by a recorder; integration tests send to real mounts), and that a DIR that is
// not an aifs mount is read without a plan.
func TestBenchPlan(t *testing.T) {
	files := sampleTree(12)
	a, b := writeTree(t, files), writeTree(t, files)
	sent := map[string]string{}
	send := func(dir string, r io.Reader) error {
		if dir == b {
			return fmt.Errorf("send plan to %s: %w", dir, plan.ErrNoMount)
		}
		p, err := io.ReadAll(r)
		sent[dir] = string(p)
		return err
	}
	rep, err := Run(t.Context(), Options{Dirs: []string{a, b}, Epochs: 2, Jobs: 2, Seed: 5, Plan: true, SendPlan: send}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	paths, err := listTree(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	order := make([]uint32, len(paths))
	epochOrder(order, false, 5, 2)
	want := "aifs-plan 1 paths\n"
	for _, i := range order {
		want += paths[i] + "\n"
	}
	if len(sent) != 1 || sent[a] != want {
		t.Errorf("plans sent after epoch 2: %q, want %q for %s only", sent, want, a)
	}
	if len(rep.Mismatches) > 0 {
		t.Errorf("digests differ: %v", rep.Mismatches)
	}
	refuse := func(dir string, r io.Reader) error { return syscall.EINVAL }
	if _, err := Run(t.Context(), Options{Dirs: []string{a}, Epochs: 1, Jobs: 1, Plan: true, SendPlan: refuse}, io.Discard); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("a plan the mount refused: %v, want EINVAL", err)
	}
}

func TestKeptFiles(t *testing.T) {
	paths := make([]string, 5000)
	for i := range paths {
		paths[i] = fmt.Sprintf("n%08d/img-%06d.JPEG", i%50, i)
	}
	// The rank is FNV-1a 64 of the path, mixed.
	h := fnv.New64a()
	h.Write([]byte(paths[7]))
	if got, want := pathRank(paths[7]), subset.Mix(h.Sum64()); got != want {
		t.Errorf("pathRank(%q) = %#x, want subset.Mix(FNV-1a 64) = %#x", paths[7], got, want)
	}
	var smaller []bool
	for _, f := range []float64{0, 0.01, 0.1, 0.44, 0.5, 0.9, 1} {
		kept := keptFiles(paths, f)
		n := 0
		for i, k := range kept {
			if k {
				n++
			}
			if smaller != nil && smaller[i] && !k {
				t.Errorf("%s is kept at a smaller fraction but not at %v", paths[i], f)
			}
		}
		// A binomial count: its standard deviation is at most 35 files here.
		if d := float64(n) - f*float64(len(paths)); d < -150 || d > 150 {
			t.Errorf("--keep-fraction %v keeps %d of %d files", f, n, len(paths))
		}
		if (f == 0 && n != 0) || (f == 1 && n != len(paths)) {
			t.Errorf("--keep-fraction %v keeps %d of %d files, want exactly %v of them", f, n, len(paths), f)
		}
		if !slices.Equal(kept, keptFiles(paths, f)) {
			t.Errorf("--keep-fraction %v keeps other files on a second call", f)
		}
		// Keeping a file depends on its path only, not on where it is in the listing.
		rev := slices.Clone(paths)
		slices.Reverse(rev)
		back := keptFiles(rev, f)
		slices.Reverse(back)
		if !slices.Equal(kept, back) {
			t.Errorf("--keep-fraction %v keeps other files from a listing in another order", f)
		}
		smaller = kept
	}
}

// TestBenchKeepFraction checks that a pass with --keep-fraction reads the same bytes, leaves the
// kept files in the page cache and drops the others' pages (mincore of a mapping of each file).
func TestBenchKeepFraction(t *testing.T) {
	files := sampleTree(40)
	root := writeTree(t, files)
	if onTmpfs(t, root) { // tmpfs keeps its pages whatever fadvise says: the tree goes on disk
		disk, err := os.MkdirTemp("/var/tmp", "aifs-bench-test-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(disk) })
		if err := os.CopyFS(disk, os.DirFS(root)); err != nil {
			t.Fatal(err)
		}
		if root = disk; onTmpfs(t, root) {
			t.Fatalf("%s and the test's temporary folder are on tmpfs: no file system here drops pages on fadvise", root)
		}
	}
	paths, err := listTree(t.Context(), root)
	if err != nil {
		t.Fatal(err)
	}
	// Written back, so that DONTNEED can drop the pages (it skips dirty ones).
	for _, p := range paths {
		f, err := os.Open(filepath.Join(root, p))
		if err == nil {
			err = f.Sync()
			f.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	rep, err := Run(t.Context(), Options{Dirs: []string{root}, Epochs: 1, Jobs: 3, KeepFraction: 0.5}, &out)
	if err != nil {
		t.Fatal(err)
	}
	kept := keptFiles(paths, 0.5)
	want := 0
	for _, k := range kept {
		if k {
			want++
		}
	}
	if rep.KeptFiles != want || want == 0 || want == len(paths) {
		t.Errorf("report says %d files kept, keptFiles %d of %d", rep.KeptFiles, want, len(paths))
	}
	if !strings.Contains(out.String(), fmt.Sprintf("keep-fraction 0.5: %d of %d files stay cached", want, len(paths))) {
		t.Errorf("output does not say how many files are kept:\n%s", out.String())
	}
	if len(rep.Passes) != 1 || rep.Passes[0].Digest != wantDigest(files) {
		t.Fatalf("passes %+v, want one with digest %s", rep.Passes, wantDigest(files))
	}
	for i, p := range paths {
		resident, pages := residentPages(t, filepath.Join(root, p))
		if pages == 0 {
			continue // empty
		}
		if kept[i] && resident != pages {
			t.Errorf("%s is kept, but %d of its %d pages are in the page cache", p, resident, pages)
		}
		if !kept[i] && resident != 0 {
			t.Errorf("%s is not kept, but %d of its %d pages are in the page cache", p, resident, pages)
		}
	}
}

// onTmpfs reports whether dir lies on tmpfs.
func onTmpfs(t *testing.T, dir string) bool {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return st.Type == unix.TMPFS_MAGIC
}

// residentPages returns how many of the pages of the file at path are in the page cache, and
// how many pages it has.
func residentPages(t *testing.T, path string) (int, int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() == 0 {
		return 0, 0
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	ps := os.Getpagesize()
	vec := make([]byte, (len(m)+ps-1)/ps)
	// x/sys/unix has no Mincore.
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(fmt.Errorf("mincore %s: %w", path, errno))
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n, len(vec)
}
