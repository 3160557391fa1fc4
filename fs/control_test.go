package fs

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// names returns the names of a listing.
func names(ents []fuse.DirEntry) []string {
	var ns []string
	for _, de := range ents {
		ns = append(ns, de.Name)
	}
	return ns
}

// TestControlDir: /.aifs is found by name but listed nowhere; it holds one file, stats, that is
// looked up afresh every time and reads as JSON.
func TestControlDir(t *testing.T) {
	f, s := newTestFS(t, Options{})
	for _, plus := range []bool{false, true} {
		ents, _, _ := listAll(t, f, fuse.FUSE_ROOT_ID, plus, 1<<16)
		if slices.Contains(names(ents), ".aifs") {
			t.Errorf("the root listing (plus %v) shows .aifs: %q", plus, names(ents))
		}
	}
	dir, st := lookup(f, fuse.FUSE_ROOT_ID, ".aifs")
	if st != fuse.OK || dir.NodeId <= uint64(s.x.Len()) || dir.Mode != syscall.S_IFDIR|0o555 || dir.Ino != dir.NodeId ||
		dir.EntryTimeout() != time.Hour || dir.Nlink != 2 {
		t.Fatalf("Lookup .aifs: %v, node %d, attr %+v, entry timeout %v", st, dir.NodeId, dir.Attr, dir.EntryTimeout())
	}
	if a, st := getAttr(f, dir.NodeId); st != fuse.OK || a.Attr != dir.Attr {
		t.Errorf("GetAttr .aifs: %v, %+v; Lookup gave %+v", st, a.Attr, dir.Attr)
	}
	if out, st := lookup(f, s.inoOf(t, "nested"), ".aifs"); st != fuse.OK || out.NodeId != 0 {
		t.Errorf("Lookup nested/.aifs: %v, node %d; want a negative entry (only the root has .aifs)", st, out.NodeId)
	}
	var oo fuse.OpenOut
	if st := f.OpenDir(nil, &fuse.OpenIn{InHeader: fuse.InHeader{NodeId: dir.NodeId}}, &oo); st != fuse.OK || oo.OpenFlags&fuse.FOPEN_CACHE_DIR != 0 {
		t.Errorf("OpenDir .aifs: %v, flags %#x; want OK and no directory caching", st, oo.OpenFlags)
	}
	// .aifs lists ".", ".." and its files, stats among them, each of which LOOKUP finds.
	for _, plus := range []bool{false, true} {
		ents, eos, _ := listAll(t, f, dir.NodeId, plus, 1<<16)
		got := names(ents)
		if len(ents) < 3 || got[0] != "." || got[1] != ".." || !slices.Contains(got, "stats") ||
			ents[0].Ino != dir.NodeId || ents[1].Ino != fuse.FUSE_ROOT_ID {
			t.Errorf("listing .aifs (plus %v): %v", plus, ents)
			continue
		}
		for i, de := range ents {
			if plus && eos[i].NodeId != 0 {
				t.Errorf("READDIRPLUS of .aifs: %q has node %d, want 0 (no snapshot taken by listing)", de.Name, eos[i].NodeId)
			}
			if i < 2 {
				continue
			}
			if out, st := lookup(f, dir.NodeId, de.Name); st != fuse.OK || out.NodeId == 0 || out.Mode&syscall.S_IFMT != de.Mode {
				t.Errorf("Lookup .aifs/%s, listed with type %o: %v, node %d, mode %o", de.Name, de.Mode, st, out.NodeId, out.Mode)
			}
		}
	}
	stats, st := lookup(f, dir.NodeId, "stats")
	if st != fuse.OK || stats.NodeId == 0 || stats.NodeId == dir.NodeId || stats.Mode != syscall.S_IFREG|0o444 ||
		stats.Size == 0 || stats.Ino != stats.NodeId || stats.EntryTimeout() != 0 || stats.Nlink != 1 {
		t.Fatalf("Lookup .aifs/stats: %v, node %d, attr %+v, entry timeout %v", st, stats.NodeId, stats.Attr, stats.EntryTimeout())
	}
	if a, st := getAttr(f, stats.NodeId); st != fuse.OK || a.Size != stats.Size {
		t.Errorf("GetAttr stats: %v, %d bytes; Lookup gave %d", st, a.Size, stats.Size)
	}
	// Control files are always direct, even in no-open mode.
	if st := f.Open(nil, &fuse.OpenIn{InHeader: fuse.InHeader{NodeId: stats.NodeId}}, &oo); st != fuse.OK || oo.OpenFlags != fuse.FOPEN_DIRECT_IO {
		t.Errorf("Open stats: %v, flags %#x; want OK, FOPEN_DIRECT_IO", st, oo.OpenFlags)
	}
	data, st := readFile(t, f, stats.NodeId, 0, 1<<20)
	if st != fuse.OK || uint64(len(data)) != stats.Size || !json.Valid(data) {
		t.Fatalf("Read stats: %v, %d bytes of %d, valid JSON %v", st, len(data), stats.Size, json.Valid(data))
	}
	if part, st := readFile(t, f, stats.NodeId, 10, 20); st != fuse.OK || !bytes.Equal(part, data[10:30]) {
		t.Errorf("Read stats [10,+20): %v, %q, want %q", st, part, data[10:30])
	}
	if part, st := readFile(t, f, stats.NodeId, stats.Size, 20); st != fuse.OK || len(part) != 0 {
		t.Errorf("Read stats at its end: %v, %d bytes", st, len(part))
	}
	for _, c := range []struct {
		what string
		st   fuse.Status
		want fuse.Status
	}{
		{"Lookup .aifs/nope", func() fuse.Status { _, st := lookup(f, dir.NodeId, "nope"); return st }(), fuse.ENOENT},
		{"Lookup .aifs/stats/x", func() fuse.Status { _, st := lookup(f, stats.NodeId, "x"); return st }(), fuse.Status(syscall.ENOTDIR)},
		{"Read .aifs", func() fuse.Status { _, st := readFile(t, f, dir.NodeId, 0, 100); return st }(), fuse.Status(syscall.EISDIR)},
		{"ReadDir .aifs/stats", func() fuse.Status { _, _, st := listDir(t, f, stats.NodeId, 0, false, 4096); return st }(), fuse.Status(syscall.ENOTDIR)},
		{"GetAttr of a snapshot never taken", func() fuse.Status { _, st := getAttr(f, stats.NodeId+1); return st }(), fuse.Status(syscall.ESTALE)},
		{"Read of a snapshot never taken", func() fuse.Status { _, st := readFile(t, f, stats.NodeId+1, 0, 100); return st }(), fuse.Status(syscall.ESTALE)},
	} {
		if c.st != c.want {
			t.Errorf("%s: %v, want %v", c.what, c.st, c.want)
		}
	}
}

// readStats looks up .aifs/stats and reads and decodes it.
func readStats(t *testing.T, f *FS) (Snapshot, uint64, []byte) {
	t.Helper()
	dir := lookupPath(t, f, ".aifs")
	out, st := lookup(f, dir.NodeId, "stats")
	if st != fuse.OK {
		t.Fatalf("Lookup stats: %v", st)
	}
	data, st := readFile(t, f, out.NodeId, 0, 1<<20)
	if st != fuse.OK {
		t.Fatalf("Read stats: %v", st)
	}
	var snap Snapshot
	if err := json.Unmarshal(data, &snap); err != nil {
		t.Fatalf("stats: %v\n%s", err, data)
	}
	return snap, out.NodeId, data
}

// TestStatsFile: the stats file's counters reflect the requests made between two snapshots,
// each snapshot keeps its bytes under its own inode, and an old one ages out.
func TestStatsFile(t *testing.T) {
	f, s := newTestFS(t, Options{Source: "/data/set", Mountpoint: "/mnt/x", KernelCache: CacheOff})
	before, ino1, data1 := readStats(t, f)
	if before.Source != "/data/set" || before.Mountpoint != "/mnt/x" || before.KernelCache != "off" ||
		before.Entries != s.x.Len() || before.Ops["lookup"].Count != 1 { // .aifs; stats counts after its snapshot
		t.Errorf("first snapshot: %+v", before)
	}
	// Between the snapshots: the lookup of the first stats file, the read of it, and these.
	var read uint64
	for _, name := range []string{"a.txt", "nested", "nope", "odd"} {
		lookup(f, fuse.FUSE_ROOT_ID, name)
	}
	lookup(f, s.inoOf(t, "a.txt"), "x") // ENOTDIR
	getAttr(f, s.inoOf(t, "nested"))
	getAttr(f, 12345678) // ESTALE
	for _, p := range []string{"a.txt", "big.bin", "empty"} {
		got, _ := readFile(t, f, s.inoOf(t, p), 0, 1<<20)
		read += uint64(len(got))
	}
	after, ino2, _ := readStats(t, f)
	if ino2 == ino1 {
		t.Errorf("two snapshots share inode %d", ino1)
	}
	diff := func(op string) (uint64, uint64) {
		return after.Ops[op].Count - before.Ops[op].Count, after.Ops[op].Errors - before.Ops[op].Errors
	}
	for op, want := range map[string][2]uint64{
		"lookup":  {1 + 5 + 1, 1}, // first stats, five above, .aifs again
		"getattr": {2, 1},
		"read":    {1 + 3, 0},
		"open":    {0, 0},
	} {
		if n, e := diff(op); n != want[0] || e != want[1] {
			t.Errorf("%s: %d requests and %d errors between snapshots, want %d and %d", op, n, e, want[0], want[1])
		}
	}
	if got, want := after.ReadBytes-before.ReadBytes, uint64(len(data1))+read; got != want {
		t.Errorf("%d bytes read between snapshots, want %d", got, want)
	}
	if after.Requests-before.Requests != 7+2+4 || after.Errors-before.Errors != 2 {
		t.Errorf("%d requests and %d errors between snapshots, want 13 and 2", after.Requests-before.Requests, after.Errors-before.Errors)
	}
	// The first snapshot still reads as it did, until 64 newer ones have been taken.
	if again, st := readFile(t, f, ino1, 0, 1<<20); st != fuse.OK || !bytes.Equal(again, data1) {
		t.Errorf("re-reading the first snapshot: %v, changed %v", st, !bytes.Equal(again, data1))
	}
	dir := lookupPath(t, f, ".aifs")
	for range 64 {
		lookup(f, dir.NodeId, "stats")
	}
	if _, st := getAttr(f, ino1); st != fuse.Status(syscall.ESTALE) {
		t.Errorf("GetAttr of a snapshot 65 lookups old: %v, want ESTALE", st)
	}
	if _, st := readFile(t, f, ino1, 0, 100); st != fuse.Status(syscall.ESTALE) {
		t.Errorf("Read of a snapshot 65 lookups old: %v, want ESTALE", st)
	}
}

// TestControlDirShadowsDatasetEntry: a shard set whose root holds an entry named .aifs. LOOKUP
// answers with the control directory (fs.New warns that it hides the entry), so no listing of
// the root may show the dataset's .aifs either: READDIRPLUS would give the kernel a dentry for it
// with the dataset's node id, and /.aifs/stats would then be ENOENT for an hour.
func TestControlDirShadowsDatasetEntry(t *testing.T) {
	s := packTree(t, func(t *testing.T, dir string) {
		if err := os.MkdirAll(filepath.Join(dir, ".aifs"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{".aifs/data", "a"} {
			if err := os.WriteFile(filepath.Join(dir, p), []byte(p), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	})
	f := s.serve(t, nil, Options{})
	ctl, st := lookup(f, fuse.FUSE_ROOT_ID, ".aifs")
	if st != fuse.OK || ctl.NodeId == s.inoOf(t, ".aifs") || ctl.Mode != syscall.S_IFDIR|0o555 {
		t.Fatalf("Lookup .aifs: %v, node %d, mode %o; want the control directory", st, ctl.NodeId, ctl.Mode)
	}
	if _, st := lookup(f, ctl.NodeId, "stats"); st != fuse.OK {
		t.Errorf("Lookup .aifs/stats: %v", st)
	}
	for _, plus := range []bool{false, true} {
		ents, _, _ := listAll(t, f, fuse.FUSE_ROOT_ID, plus, 1<<16)
		if got := names(ents); !slices.Equal(got, []string{".", "..", "a"}) {
			t.Errorf("root listing (plus %v): %q, want [. .. a]: the shadowed .aifs is listed, with node %d where LOOKUP gives %d",
				plus, got, s.inoOf(t, ".aifs"), ctl.NodeId)
		}
	}
}
