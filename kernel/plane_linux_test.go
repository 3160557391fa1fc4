package kernel

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/aifs/aifs/internal/mountinfo"
)

// TestMakeControlDirDetachesStale: a mount left at a control directory (a dead plane's, whose
// device number a new plane now has) is detached, stacked ones too, not mounted over.
func TestMakeControlDirDetachesStale(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root (it mounts a tmpfs under /run/aifs): CI runs as root")
	}
	const dev = "0:999999" // no anonymous device has this number: it is the test's alone
	dir := ControlDir(dev)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for range 3 {
			unix.Unmount(dir, unix.MNT_DETACH)
		}
		os.Remove(dir)
	})
	for range 2 {
		if err := unix.Mount("stale", dir, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatalf("mount tmpfs at %s: %v", dir, err)
		}
	}
	got, err := MakeControlDir(dev)
	if err != nil || got != dir {
		t.Fatalf("MakeControlDir(%s) = %q, %v; want %s", dev, got, err, dir)
	}
	if m, ok := mountinfo.At(dir); ok {
		t.Errorf("%s is still a mount point after MakeControlDir: %+v", dir, m)
	}
}
