package local

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"

	"github.com/aifs/aifs/backend"
)

// TestFileExt4 writes and reads single files with WriteFile and OpenFile on ext4, which
// enforces O_DIRECT alignment: the probe accepts it, files of every size round-trip through
// the direct paths, and neither the writes nor the reads leave pages in the page cache. Each
// size is written once from a slice that starts on a page (whole blocks go to the disk in
// place) and once from one a byte past it (everything is copied into aligned buffers).
func TestFileExt4(t *testing.T) {
	dir := mount(t, "ext4")
	if err := ProbeDirect(dir); err != nil {
		t.Fatalf("ProbeDirect(ext4): %v", err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	type tc struct{ size, shift int }
	var cases []tc
	for _, size := range []int{0, 1, 4095, 4096, 4097, 1 << 20, maxChunk + 3, 2*maxChunk + 4096} {
		cases = append(cases, tc{size, 0}, tc{size, 1})
	}
	for _, c := range cases {
		size := c.size
		arr := make([]byte, size+1+4096)
		start := int(-uintptr(unsafe.Pointer(&arr[0]))&4095) + c.shift // the first page boundary, plus shift
		data := arr[start : start+size]
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		path, tmp := filepath.Join(dir, "f"), filepath.Join(dir, "f.tmp")
		if err := WriteFile(path, tmp, data, true); err != nil {
			t.Fatalf("WriteFile(%d bytes, %d past a page boundary): %v", size, c.shift, err)
		}
		if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%d bytes: temporary file left behind: %v", size, err)
		}
		sh, err := OpenFile(path, int64(size), true)
		if err != nil {
			t.Fatalf("OpenFile(%d bytes): %v", size, err)
		}
		if _, ok := sh.(*shard).r.(*directFile); !ok {
			t.Errorf("%d bytes: read through %T, want *directFile", size, sh.(*shard).r)
		}
		for range 20 {
			off := rng.IntN(size + 1)
			n := rng.IntN(size - off + 1)
			checkRead(t, sh, data, int64(off), n)
		}
		checkRead(t, sh, data, 0, size)
		sh.Close()
		// Full blocks went to disk and came back directly; only the tail block that
		// ext4 zeroes past EOF when truncating may be cached.
		if got := resident(t, path); got > 1 {
			t.Errorf("%d bytes: %d pages in the page cache after direct write and reads", size, got)
		}
	}
}

// TestFileRamfs checks the fallbacks: ramfs refuses O_DIRECT, so ProbeDirect says so and
// WriteFile and OpenFile asked for direct I/O use the page cache instead.
func TestFileRamfs(t *testing.T) {
	dir := mount(t, "ramfs")
	if err := ProbeDirect(dir); err == nil {
		t.Error("ProbeDirect(ramfs) = nil, want a refusal")
	}
	data := bytes.Repeat([]byte("ramfs"), 3000)
	path := filepath.Join(dir, "f")
	if err := WriteFile(path, path+".tmp", data, true); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	sh, err := OpenFile(path, int64(len(data)), true)
	if err != nil {
		t.Fatalf("OpenFile: %v", err)
	}
	defer sh.Close()
	if _, ok := sh.(*shard).r.(buffered); !ok {
		t.Errorf("read through %T, want buffered", sh.(*shard).r)
	}
	checkRead(t, sh, data, 1, len(data)-2)
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d files in %s, want 1 (no temporary or probe files)", len(entries), dir)
	}
}

// TestFileErrors checks OpenFile's sentinels and that WriteFile leaves path alone on failure.
func TestFileErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if _, err := OpenFile(path, 1, false); !errors.Is(err, backend.ErrNotExist) {
		t.Errorf("OpenFile of a missing file: got %v, want ErrNotExist", err)
	}
	if err := WriteFile(path, path+".tmp", []byte("hello"), true); err != nil {
		t.Fatal(err)
	}
	for _, direct := range []bool{false, true} {
		if sh, err := OpenFile(path, 4, direct); !errors.Is(err, backend.ErrMismatch) {
			t.Errorf("OpenFile of a short file (direct %v): got %v, want ErrMismatch", direct, err)
			if sh != nil {
				sh.Close()
			}
		}
		if sh, err := OpenFile(dir, 4096, direct); !errors.Is(err, backend.ErrMismatch) {
			t.Errorf("OpenFile of a directory (direct %v): got %v, want ErrMismatch", direct, err)
			if sh != nil {
				sh.Close()
			}
		}
	}
	if err := os.WriteFile(path+".tmp", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, path+".tmp", []byte("other"), true); err == nil {
		t.Error("WriteFile over an existing temporary file succeeded")
	}
	if got, _ := os.ReadFile(path); string(got) != "hello" {
		t.Errorf("after a failed WriteFile, %s holds %q", path, got)
	}
}

func checkRead(t *testing.T, sh backend.Shard, data []byte, off int64, n int) {
	t.Helper()
	p := make([]byte, n)
	if err := sh.ReadAt(t.Context(), p, off); err != nil || !bytes.Equal(p, data[off:off+int64(n)]) {
		t.Errorf("ReadAt [%d,+%d) of %d bytes: err %v, equal %v", off, n, len(data), err, bytes.Equal(p, data[off:off+int64(n)]))
	}
	v, err := sh.(backend.Viewer).View(t.Context(), off, n)
	if err != nil {
		t.Errorf("View [%d,+%d): %v", off, n, err)
		return
	}
	if !bytes.Equal(v.Bytes(), data[off:off+int64(n)]) {
		t.Errorf("View [%d,+%d): wrong bytes", off, n)
	}
	v.Release()
}

// resident returns how many pages of the file at path are in the page cache (mincore(2)).
func resident(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return 0
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatalf("mmap %s: %v", path, err)
	}
	defer syscall.Munmap(m)
	pages := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, e := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&pages[0]))); e != 0 {
		t.Fatalf("mincore %s: %v", path, e)
	}
	n := 0
	for _, p := range pages {
		n += int(p & 1)
	}
	return n
}
