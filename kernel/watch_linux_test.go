package kernel

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/layout/erofsmeta"
	"github.com/aifs/aifs/layout/pack"
)

// TestWatch: Plane.Watch tells the Loader of every file of the set that another process reads,
// once a read, by its index id, with the reader's pid, in both of its ways: by directory handle
// and name (reads through a bind mount of the plane too) and by descriptor (the mount's reads).
func TestWatch(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root (it mounts EROFS): CI runs as root")
	}
	if err := Available(); err != nil {
		t.Fatal(err)
	}
	src, set := t.TempDir(), filepath.Join(t.TempDir(), "set")
	names := []string{"a/x.bin", "a/b/y.bin", "top.bin", "c/odd name\x01é.bin", "c/z.bin"}
	for i, n := range names {
		if err := os.MkdirAll(filepath.Join(src, filepath.Dir(n)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, n), make([]byte, 1000*(i+1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pack.Pack(context.Background(), src, set, pack.Options{}); err != nil {
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
	var shards []string
	for _, s := range x.Shards() {
		shards = append(shards, layout.ShardPath(set, s))
	}
	mnt := t.TempDir()
	if err := Mount(image, shards, mnt, true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Unmount(mnt) })
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
			p := NewPlane(mnt, x, shards)
			go func() {
				done <- p.Watch(ctx, func(reader uint32, id layout.ID) {
					mu.Lock()
					got[id] = append(got[id], reader)
					mu.Unlock()
				})
			}()
			time.Sleep(100 * time.Millisecond) // the marks are set
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
