package erofsmeta

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/aifs/aifs/internal/testenv"
	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/layout/tarindex"
	"github.com/aifs/aifs/layout/view"
)

// mountErofs mounts image at dir with the shards as devices, in order, file-backed, with the new
// mount API (mount(8) puts a loop device under a file and then refuses device=), and unmounts it
// when the test ends.
func mountErofs(t *testing.T, image string, shards []string, directIO bool, dir string) {
	t.Helper()
	fd, err := unix.Fsopen("erofs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		t.Fatalf("fsopen(erofs): %v", err)
	}
	defer unix.Close(fd)
	fail := func(what string, err error) {
		t.Helper()
		t.Fatalf("%s: %v", what, err)
	}
	if err := unix.FsconfigSetString(fd, "source", image); err != nil {
		fail("fsconfig source", err)
	}
	for _, s := range shards {
		if err := unix.FsconfigSetString(fd, "device", s); err != nil {
			fail("fsconfig device="+s, err)
		}
	}
	if directIO {
		if err := unix.FsconfigSetFlag(fd, "directio"); err != nil {
			fail("fsconfig directio", err)
		}
	}
	if err := unix.FsconfigCreate(fd); err != nil {
		fail("fsconfig create (dmesg says why)", err)
	}
	mfd, err := unix.Fsmount(fd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_RDONLY)
	if err != nil {
		fail("fsmount", err)
	}
	defer unix.Close(mfd)
	if err := unix.MoveMount(mfd, "", unix.AT_FDCWD, dir, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		fail("move_mount", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("umount %s: %v", dir, err)
		}
	})
}

// compareMount compares every entry of x with the kernel's mount at dir, as compareImage does
// with go-erofs's reader: listings in order, mode, size, mtime, owner, nlink and bytes.
func compareMount(t *testing.T, x *layout.Index, dir string, shards []string) {
	t.Helper()
	for id := range layout.ID(x.Len()) {
		p := filepath.Join(dir, x.Path(id))
		e := x.Entry(id)
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			t.Errorf("%q: %v", x.Path(id), err)
			continue
		}
		wantLinks, wantSize := uint64(1), int64(e.Size)
		if e.IsDir() {
			wantLinks, wantSize = 2, st.Size
		}
		mtime := st.Mtim.Sec*1e9 + st.Mtim.Nsec
		if st.Mode != e.Mode || st.Size != wantSize || mtime != e.MTime || st.Uid != 0 || st.Gid != 0 || st.Nlink != wantLinks {
			t.Errorf("%q: mode %#o size %d mtime %d owner %d:%d nlink %d; want %#o %d %d 0:0 %d",
				x.Path(id), st.Mode, st.Size, mtime, st.Uid, st.Gid, st.Nlink, e.Mode, wantSize, e.MTime, wantLinks)
		}
		if e.IsDir() {
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			names, err := f.Readdirnames(-1)
			f.Close()
			if err != nil || len(names) != int(e.NumChildren) {
				t.Errorf("%q lists %d names (%v), the index %d", x.Path(id), len(names), err, e.NumChildren)
				continue
			}
			seen := map[string]bool{}
			for _, n := range names {
				seen[n] = true
			}
			for c := e.FirstChild; c < e.FirstChild+layout.ID(e.NumChildren); c++ {
				if !seen[string(x.Name(c))] {
					t.Errorf("%q does not list %q", x.Path(id), x.Name(c))
				}
			}
			continue
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("%q: %v", x.Path(id), err)
			continue
		}
		f, err := os.Open(shards[e.Shard])
		if err != nil {
			t.Fatal(err)
		}
		want := make([]byte, e.Size)
		_, err = f.ReadAt(want, int64(e.Offset))
		f.Close()
		if err != nil && err != io.EOF {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%q: the kernel gives %d bytes that differ from the shard's", x.Path(id), len(got))
		}
	}
}

// TestKernelMount mounts the edge-case tree's image with the kernel's EROFS, with and without
// directio, at both block sizes, and compares every entry with the index.
func TestKernelMount(t *testing.T) {
	testenv.Need(t, "root and EROFS with file-backed mounts (Linux 6.12)")
	for _, align := range []int64{512, 4096} {
		dir, x := packed(t, align)
		var shards []string
		for _, s := range x.Shards() {
			shards = append(shards, layout.ShardPath(dir, s))
		}
		image, bs, err := Cached(x, dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, directIO := range []bool{false, true} {
			t.Run(fmt.Sprintf("block %d directio %v", bs, directIO), func(t *testing.T) {
				mnt := t.TempDir()
				mountErofs(t, image, shards, directIO, mnt)
				compareMount(t, x, mnt, shards)
			})
		}
	}
}

// TestKernelMountTars mounts the images of a set of tars indexed in place (a hard link, an
// empty file, a name with a newline; the tree and ImageFolder views) and compares every entry.
func TestKernelMountTars(t *testing.T) {
	testenv.Need(t, "root and EROFS with file-backed mounts (Linux 6.12)")
	tars := [][]byte{
		tarOf(t, [2]string{"a/", ""}, [2]string{"a/2.txt", "two"}, [2]string{"a/1.txt", string(bytes.Repeat([]byte("1"), 700))},
			[2]string{"a/link", "=link"}, [2]string{"a/empty", ""}, [2]string{"b/new\nline", "x"}),
		tarOf(t, [2]string{"k1.jpg", "jpeg one"}, [2]string{"k1.cls", "3"}, [2]string{"k2.jpg", "jpeg two"}, [2]string{"k2.cls", "7"}),
	}
	for _, view := range []view.Kind{view.Tree, view.ImageFolder} {
		t.Run(fmt.Sprint(view), func(t *testing.T) {
			dir := t.TempDir()
			var srcs []tarindex.Source
			for i, b := range tars {
				name := fmt.Sprintf("t%d.tar", i)
				if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
				srcs = append(srcs, tarindex.Source{Name: name, Label: name, Size: int64(len(b)), MTime: 1e18,
					Open: func(context.Context) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }})
			}
			idx, _, err := tarindex.IndexTars(context.Background(), srcs, tarindex.Options{View: view})
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, layout.IndexName), idx, 0o644); err != nil {
				t.Fatal(err)
			}
			x, err := layout.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(x.Close)
			image, bs, err := Cached(x, dir, 0)
			if err != nil || bs != MinBlockSize {
				t.Fatalf("Cached = %d, %v; want blocks of %d", bs, err, MinBlockSize)
			}
			var shards []string
			for _, s := range x.Shards() {
				shards = append(shards, layout.ShardPath(dir, s))
			}
			mnt := t.TempDir()
			mountErofs(t, image, shards, true, mnt)
			compareMount(t, x, mnt, shards)
		})
	}
}
