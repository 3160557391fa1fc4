package diskcache

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/aifs/aifs/internal/testenv"
)

// TestDiskFull: a cache directory on a 1 MiB tmpfs, with a budget far larger than the disk: the
// writes that fail (ENOSPC) are counted, every read returns the right bytes from the inner
// backend, and the cache keeps serving after. It needs root (CI runs it as root).
func TestDiskFull(t *testing.T) {
	testenv.Need(t, "root, to mount a tmpfs")
	if os.Geteuid() != 0 {
		t.Fatal("mounting a tmpfs needs root; CI runs these tests as root")
	}
	dir := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	ds := makeDataset(31, 3<<20, 2<<20)
	src := newSource(ds.files, "v")
	c := newCache(t, src, Options{Dir: dir, Size: 1 << 30})
	shs := ds.open(t, c)
	ds.pass(t, shs, 1)
	flush(t, c)
	ds.pass(t, shs, 2)
	flush(t, c)
	st := c.Stats()
	if st.WriteErrors == 0 || st.UsedBytes > 1<<20 {
		t.Errorf("on a 1 MiB disk: %+v; want write errors counted, at most 1 MiB used", st)
	}
	t.Logf("%+v", st)
}
