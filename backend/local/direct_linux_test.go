package local

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/aifs/aifs/backend"
	"github.com/aifs/aifs/backend/backendtest"
	"github.com/aifs/aifs/internal/testenv"
	"github.com/aifs/aifs/layout"
)

// These tests mount real filesystems and so need root, which CI has (scripts/test.sh also
// installs xfsprogs for mkfs.xfs). They fail rather than skip without it.

func TestDirectExt4(t *testing.T) { testDirect(t, "ext4") }
func TestDirectXFS(t *testing.T)  { testDirect(t, "xfs") }

// testDirect runs the suite on a new filesystem of type fstype, which enforces O_DIRECT
// alignment, and checks that O_DIRECT was used throughout: no fallback notice, direct shards.
func testDirect(t *testing.T, fstype string) {
	mnt := mount(t, fstype)
	open := func(t *testing.T, files map[string][]byte) backend.Backend {
		dir, err := os.MkdirTemp(mnt, "set")
		if err != nil {
			t.Fatal(err)
		}
		return newBackend(t, writeFiles(t, dir, files), func(msg string) { t.Errorf("%s: fell back: %s", fstype, msg) })
	}
	backendtest.Run(t, open)

	data := bytes.Repeat([]byte("0123456789"), 1000)
	b := open(t, map[string][]byte{layout.ShardName(0): data})
	sh, err := b.Open(t.Context(), layout.Shard{Name: layout.ShardName(0), Size: uint64(len(data))})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	d, ok := sh.(*shard).r.(*directFile)
	if !ok {
		t.Fatalf("%s: shard is read through %T, want *directFile", fstype, sh.(*shard).r)
	}
	mem, off := dioAlign(d.File)
	t.Logf("%s: direct-I/O alignment: memory %d, offset %d", fstype, mem, off)
	// The suite only proves the widening if the filesystem rejects unaligned direct reads.
	buf := getBuffer(8192)
	defer putBuffer(buf)
	if _, err := syscall.Pread(int(d.Fd()), buf.b[:off-1], 1); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("%s: unaligned O_DIRECT pread: got %v, want EINVAL", fstype, err)
	}
}

// TestJournalOrdersDirect: the fdatasync after a direct write is left out on ext4 and XFS,
// kept on ext4 mounted data=writeback and on ramfs (where writes go through the page cache).
func TestJournalOrdersDirect(t *testing.T) {
	for _, c := range []struct {
		fstype, opts string
		want         bool
	}{{"ext4", "", true}, {"xfs", "", true}, {"ext4", "data=writeback", false}, {"ramfs", "", false}} {
		var opts []string
		if c.opts != "" {
			opts = append(opts, c.opts)
		}
		mnt := mount(t, c.fstype, opts...)
		path := filepath.Join(mnt, "f")
		if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := journalOrdersDirect(f); got != c.want {
			t.Errorf("%s %s: journalOrdersDirect %v, want %v", c.fstype, c.opts, got, c.want)
		}
		f.Close()
	}
}

// TestFallbackRamfs checks the buffered fallback on ramfs, which refuses O_DIRECT opens: one
// notice per Backend however many shards it opens, and correct reads (the suite).
func TestFallbackRamfs(t *testing.T) {
	mnt := mount(t, "ramfs")
	files := map[string][]byte{}
	for i := range 3 {
		files[layout.ShardName(i)] = bytes.Repeat([]byte{byte(i)}, 10000+i)
	}
	var mu sync.Mutex
	var notices []string
	b := newBackend(t, writeFiles(t, mnt, files), func(msg string) { mu.Lock(); notices = append(notices, msg); mu.Unlock() })
	for name, data := range files {
		sh, err := b.Open(t.Context(), layout.Shard{Name: name, Size: uint64(len(data))})
		if err != nil {
			t.Fatal(err)
		}
		p := make([]byte, len(data)-1)
		if err := sh.ReadAt(context.Background(), p, 1); err != nil || !bytes.Equal(p, data[1:]) {
			t.Errorf("%s: ReadAt: %v, equal %v", name, err, bytes.Equal(p, data[1:]))
		}
		if _, ok := sh.(*shard).r.(buffered); !ok {
			t.Errorf("%s: read through %T, want buffered", name, sh.(*shard).r)
		}
		sh.Close()
	}
	if len(notices) != 1 || !strings.Contains(notices[0], "O_DIRECT") || !strings.Contains(notices[0], mnt) {
		t.Errorf("notices = %q, want one about O_DIRECT naming %s", notices, mnt)
	}
	backendtest.Run(t, func(t *testing.T, files map[string][]byte) backend.Backend {
		dir, err := os.MkdirTemp(mnt, "set")
		if err != nil {
			t.Fatal(err)
		}
		var fellBack bool
		b := newBackend(t, writeFiles(t, dir, files), func(string) { fellBack = true })
		t.Cleanup(func() {
			if !fellBack { // every suite Backend opens a non-empty shard, which must refuse
				t.Error("ramfs: no fallback notice")
			}
		})
		return b
	})
}

// mount mounts a new filesystem of type fstype (ramfs, ext4, xfs) under t.TempDir() and
// unmounts it when the test ends, passed or failed; ext4 and XFS live in a sparse 512 MiB image
// (XFS needs 300 MB) on a loop device, mounted with the options opts (comma-separated, may be
// none). It needs root.
func mount(t *testing.T, fstype string, opts ...string) string {
	t.Helper()
	testenv.Need(t, "root, to mount "+fstype)
	if os.Geteuid() != 0 {
		t.Fatalf("mounting %s needs root; CI runs these tests as root", fstype)
	}
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"mount", "-t", fstype, fstype, mnt}
	if fstype != "ramfs" {
		img := filepath.Join(dir, fstype+".img")
		if err := os.WriteFile(img, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(img, 512<<20); err != nil {
			t.Fatal(err)
		}
		mkfs := map[string][]string{"ext4": {"mkfs.ext4", "-q", "-F", img}, "xfs": {"mkfs.xfs", "-q", "-f", img}}[fstype]
		command(t, mkfs...)
		args = []string{"mount", "-t", fstype, "-o", strings.Join(append([]string{"loop"}, opts...), ","), img, mnt}
	}
	command(t, args...)
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v: %s; detaching lazily", mnt, err, out)
			if out, err := exec.Command("umount", "-l", mnt).CombinedOutput(); err != nil {
				t.Errorf("umount -l %s: %v: %s", mnt, err, out)
			}
		}
	})
	return mnt
}

func command(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}
