package kernel

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/layout/erofsmeta"
	"github.com/aifs/aifs/layout/pack"
)

// TestWatch: a Plane's Watcher tells the Loader of every file of the set that another process reads,
// once a read, by its index id, with the reader's pid, in both of its ways: by directory handle
// and name (reads through a bind mount of the plane too) and by descriptor (the mount's reads).
func TestWatch(t *testing.T) {
	names := []string{"a/x.bin", "a/b/y.bin", "top.bin", "c/odd name\x01é.bin", "c/z.bin"}
	x, _, mnt := mountSet(t, names, 1000)
	bind := t.TempDir()
	if err := unix.Mount(mnt, bind, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(bind, unix.MNT_DETACH) })

	for _, tc := range []struct {
		mode     string
		dirMarks int
		through  []string // the mounts whose reads it sees
	}{
		{"names", maxDirMarks, []string{mnt, bind}},
		{"descriptors", 0, []string{mnt}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			old := maxDirMarks
			maxDirMarks = tc.dirMarks
			t.Cleanup(func() { maxDirMarks = old })
			var mu sync.Mutex
			got := map[layout.ID][]uint32{}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			p := NewPlane(mnt, x, nil)
			w := watch(t, p) // reads from here on are told
			go func() {
				done <- w.Run(ctx, func(reader uint32, id layout.ID) {
					mu.Lock()
					got[id] = append(got[id], reader)
					mu.Unlock()
				})
			}()
			want := map[layout.ID][]uint32{}
			for _, root := range []string{mnt, bind} {
				cmd := exec.Command("cat")
				for _, n := range names {
					cmd.Args = append(cmd.Args, filepath.Join(root, n))
				}
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("cat: %v: %.200s", err, out)
				}
				if slices.Contains(tc.through, root) {
					for _, n := range names {
						id, err := x.LookupPath(n)
						if err != nil {
							t.Fatal(err)
						}
						want[id] = append(want[id], uint32(cmd.Process.Pid))
					}
				}
			}
			own, _ := x.LookupPath(names[0])
			p.WillNeed(own, true) // the daemon's own open and read: not a reader's
			for end := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				mu.Lock()
				equal := maps.EqualFunc(got, want, slices.Equal[[]uint32])
				snapshot := fmt.Sprint(got)
				mu.Unlock()
				if equal {
					break
				}
				if time.Now().After(end) {
					t.Fatalf("Watch told %s, want %v", snapshot, want)
				}
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Watch: %v", err)
			}
		})
	}
}

// mountSet packs files of the given names, the i-th of (i+1)×size bytes, mounts the set's
// kernel plane at a new directory and returns the index, the shards and the mountpoint.
func mountSet(t *testing.T, names []string, size int) (*layout.Index, []string, string) {
	t.Helper()
	src, set := t.TempDir(), filepath.Join(t.TempDir(), "set")
	for i, n := range names {
		if err := os.MkdirAll(filepath.Join(src, filepath.Dir(n)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, n), bytes.Repeat([]byte{byte(i + 1)}, size*(i+1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	x, image := packSet(t, src, set, pack.Options{})
	var shards []string
	for _, s := range x.Shards() {
		shards = append(shards, layout.ShardPath(set, s))
	}
	mnt := t.TempDir()
	if err := Mount(image, shards, mnt, true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Unmount(mnt) })
	return x, shards, mnt
}

// TestMisses: Plane.Misses counts the bytes that the plane's readers read from storage (a
// sample missing from the page cache), over the mean sample, from the reader's first event on;
// the daemon's own reads ahead (WillNeed) do not count.
func TestMisses(t *testing.T) {
	var names []string
	for i := range 16 {
		names = append(names, fmt.Sprintf("d%d/s%02d.bin", i%2, i))
	}
	x, _, mnt := mountSet(t, names, 16<<10)
	p := NewPlane(mnt, x, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var seen atomic.Int64
	w := watch(t, p)
	go w.Run(ctx, func(uint32, layout.ID) { seen.Add(1) })
	// A reader that lives on and reads the files itself: Misses reads its /proc/PID/io.
	reader := exec.Command("/usr/bin/python3", "-c", "import sys\nfor l in sys.stdin:\n    open(l.strip(), 'rb').read()\n    print('ok', flush=True)")
	reader.Dir = mnt
	stdin, _ := reader.StdinPipe()
	stdout, _ := reader.StdoutPipe()
	if err := reader.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); reader.Wait() }()
	lines := bufio.NewScanner(stdout)
	read := func(ns []string) {
		t.Helper()
		for _, n := range ns {
			fmt.Fprintln(stdin, n)
			if !lines.Scan() {
				t.Fatalf("the reader ended: %v", lines.Err())
			}
		}
		time.Sleep(50 * time.Millisecond) // Watch gathers, then tells
	}
	ids := make([]layout.ID, len(names))
	var want0 uint64
	for i, n := range names {
		ids[i], _ = x.LookupPath(n)
		if i >= 8 {
			want0 += x.Entry(ids[i]).Size
		}
	}
	read(names[:1]) // the reader's first event: Misses counts its reads from here
	if seen.Load() != 1 {
		t.Fatalf("Watch told %d reads of one file", seen.Load())
	}
	for _, id := range ids {
		p.Drop(id)
	}
	base := p.Misses()
	for _, id := range ids[1:8] {
		p.WillNeed(id, true) // the daemon's reads
	}
	read(names[1:8]) // from the page cache
	if m := p.Misses(); m > base {
		t.Errorf("Misses went from %d to %d with reads ahead by the daemon and hits", base, m)
	}
	read(names[8:]) // from storage
	want := want0 / (x.FileBytes() / uint64(x.Files()))
	if m := p.Misses() - base; m < want {
		t.Errorf("Misses counted %d after %d bytes read from storage, want %d at least", m, want0, want)
	}
}

// TestQuiet: a quiet Plane (Quiet(true)) tells of no read, both ways, and tells again once
// woken; StorageReads counts what a cold read takes from the shards' disk.
func TestQuiet(t *testing.T) {
	names := []string{"a/x.bin", "b/y.bin", "top.bin"}
	x, shards, mnt := mountSet(t, names, 64<<10)
	for _, dirMarks := range []int{maxDirMarks, 0} {
		old := maxDirMarks
		maxDirMarks = dirMarks
		p := NewPlane(mnt, x, shards)
		var seen atomic.Int64
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		w := watch(t, p)
		go func() { done <- w.Run(ctx, func(uint32, layout.ID) { seen.Add(1) }) }()
		read := func() {
			t.Helper()
			cmd := exec.Command("cat")
			for _, n := range names {
				cmd.Args = append(cmd.Args, filepath.Join(mnt, n))
			}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("cat: %v: %.200s", err, out)
			}
			time.Sleep(50 * time.Millisecond) // Watch gathers, then tells
		}
		p.Quiet(true)
		read()
		if n := seen.Load(); n != 0 {
			t.Errorf("dir marks %d: a quiet plane told of %d reads", dirMarks, n)
		}
		p.Quiet(false)
		read()
		if n := seen.Load(); n != int64(len(names)) {
			t.Errorf("dir marks %d: a plane woken told of %d reads of %d files", dirMarks, n, len(names))
		}
		if dirMarks == 0 { // the storage's reads: the plane's pages dropped, read again cold
			for _, n := range names {
				id, _ := x.LookupPath(n)
				p.Drop(id)
			}
			before := p.StorageReads()
			read()
			if got := p.StorageReads() - before; got < x.FileBytes() {
				t.Errorf("StorageReads grew by %d over a cold read of %d bytes", got, x.FileBytes())
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch: %v", err)
		}
		maxDirMarks = old
	}
}

// watch returns p's Watcher, its marks on.
func watch(t *testing.T, p *Plane) *Watcher {
	t.Helper()
	w, err := p.Watch()
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	return w
}

// packSet packs the tree at src into set with opt and returns its index and its EROFS image. It
// fails the test where the kernel plane cannot be mounted (not root, no EROFS): CI has both.
func packSet(t *testing.T, src, set string, opt pack.Options) (*layout.Index, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("needs root (it mounts EROFS): CI runs as root")
	}
	if err := Available(); err != nil {
		t.Fatal(err)
	}
	if _, err := pack.Pack(context.Background(), src, set, opt); err != nil {
		t.Fatal(err)
	}
	x, err := layout.Load(set)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(x.Close)
	image, _, err := erofsmeta.Cached(x, set, 0)
	if err != nil {
		t.Fatal(err)
	}
	return x, image
}

// TestSetReadAhead: a WillNeed of a sample larger than 128 KiB (a file-backed EROFS mount's
// own read-ahead window) reads it whole once SetReadAhead gives the mount ReadAhead, and only
// its first part before.
func TestSetReadAhead(t *testing.T) {
	const size = 600 << 10
	x, _, mnt := mountSet(t, []string{"a.bin", "b.bin"}, size/2) // a.bin 300 KiB, b.bin 600 KiB
	p := NewPlane(mnt, x, nil)
	resident := func(name string) int {
		t.Helper()
		f, err := os.Open(filepath.Join(mnt, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		st, _ := f.Stat()
		m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(m)
		vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
		if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
			t.Fatal(errno)
		}
		n := 0
		for _, v := range vec {
			n += int(v & 1)
		}
		return n * os.Getpagesize()
	}
	// A WillNeed starts reads and returns: wait until what is resident has not changed for
	// 100 ms.
	settled := func(name string) int {
		t.Helper()
		last, same := -1, 0
		for deadline := time.Now().Add(5 * time.Second); same < 10 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if n := resident(name); n == last && n > 0 {
				same++
			} else {
				last, same = n, 0
			}
		}
		return last
	}
	id := func(name string) layout.ID {
		id, err := x.LookupPath(name)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	if !p.WillNeed(id("a.bin"), false) {
		t.Fatal("WillNeed of a.bin failed")
	}
	got := settled("a.bin")
	t.Logf("a WillNeed of a 300 KiB sample at the mount's own window: %d bytes resident", got)
	if got >= 300<<10 {
		t.Fatalf("before SetReadAhead a WillNeed made %d bytes of a 300 KiB sample resident: the mount's window is not 128 KiB, so this test shows nothing", got)
	}
	if err := SetReadAhead(mnt, ReadAhead); err != nil {
		t.Fatal(err)
	}
	if !p.WillNeed(id("b.bin"), false) {
		t.Fatal("WillNeed of b.bin failed")
	}
	if got := settled("b.bin"); got != size {
		t.Errorf("after SetReadAhead a WillNeed made %d bytes of a %d-byte sample resident", got, size)
	}
	if err := SetReadAhead(t.TempDir(), ReadAhead); err == nil {
		t.Error("SetReadAhead of a directory that is no EROFS mount succeeded")
	}
}
