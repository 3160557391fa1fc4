package integration

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	aifsfs "github.com/aifs/aifs/fs"
)

// mountSet mounts the shard set in dir with `aifs mount` (a daemon) at a new empty directory and
// returns the mountpoint. The mount is undone at cleanup even if the test fails, and cleanup
// checks that the daemon has ended.
func mountSet(t testing.TB, set string, args ...string) string {
	t.Helper()
	mnt := filepath.Join(t.TempDir(), "mnt")
	mkdir(t, mnt)
	mustAifs(t, append([]string{"mount", set, mnt}, args...)...)
	pid := daemonPID(t, mnt)
	t.Cleanup(func() { unmount(t, mnt, pid) })
	return mnt
}

// unmount unmounts mnt if it is still mounted and waits for daemon pid (0: unknown) to exit.
func unmount(t testing.TB, mnt string, pid int) {
	t.Helper()
	if isMounted(mnt) {
		if out, err := exec.Command("fusermount3", "-u", mnt).CombinedOutput(); err != nil {
			t.Errorf("fusermount3 -u %s: %v: %s; detaching it", mnt, err, out)
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	}
	if pid != 0 && !waitExit(pid, 10*time.Second) {
		t.Errorf("the daemon (pid %d) of %s is still running after the unmount", pid, mnt)
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// isMounted reports whether mnt is a mount point, from /proc/self/mountinfo.
func isMounted(mnt string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == mnt {
			return true
		}
	}
	return false
}

// daemonPID finds the aifs process serving mnt.
func daemonPID(t testing.TB, mnt string) int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) > 1 && args[0] == aifsBin && slices.Contains(args, mnt) {
			var pid int
			if _, err := fmtSscan(filepath.Base(filepath.Dir(p)), &pid); err == nil {
				return pid
			}
		}
	}
	t.Fatalf("no aifs daemon serves %s", mnt)
	return 0
}

// waitExit waits up to d for process pid to exit (or become a zombie).
func waitExit(pid int, d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile(filepath.Join("/proc", itoa(pid), "stat"))
		if err != nil {
			return true
		}
		if f := strings.Fields(string(b)); len(f) > 2 && f[2] == "Z" {
			return true
		}
	}
	return false
}

// readStats reads the stats file of the mount at mnt.
func readStats(t testing.TB, mnt string) aifsfs.Snapshot {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(mnt, ".aifs", "stats"))
	if err != nil {
		t.Fatalf("reading the stats file: %v", err)
	}
	var s aifsfs.Snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("stats file: %v\n%s", err, b)
	}
	return s
}

// TestMountTree mounts the edge-case tree and compares everything a reader can see with the
// source: paths, types, sizes, modes, mtimes, contents and directory listings.
func TestMountTree(t *testing.T) {
	src := edgeTree(t)
	set := filepath.Join(t.TempDir(), "set")
	mustAifs(t, "pack", src, set)
	mnt := mountSet(t, set)

	want := sourceEntries(t, src, true)
	got := sourceEntries(t, mnt, true)
	compareEntries(t, "mount", want, got)
	if digest(want) != digest(got) {
		t.Errorf("content digest of the mount differs from the source")
	}
	// Listings: each directory's names, in order, are the packed children (the source also
	// holds what pack skips: FIFOs, dangling links, loops).
	children := map[string][]string{}
	for _, e := range want {
		if e.path != "" {
			dir, name := path.Split(e.path)
			children[strings.TrimSuffix(dir, "/")] = append(children[strings.TrimSuffix(dir, "/")], name)
		}
	}
	for _, e := range want {
		if e.dir {
			w, g := children[e.path], names(t, filepath.Join(mnt, e.path))
			slices.Sort(w)
			if !slices.Equal(w, g) {
				t.Errorf("listing of %q: got %d names, want %d", e.path, len(g), len(w))
			}
		}
	}

	// The control directory is in no listing, but its stats file opens by name.
	for _, n := range names(t, mnt) {
		if n == ".aifs" {
			t.Errorf("the root listing shows .aifs")
		}
	}
	if _, err := os.Lstat(filepath.Join(mnt, ".aifs")); err != nil {
		t.Errorf("stat .aifs: %v", err)
	}
	s := readStats(t, mnt)
	if s.Files != uint64(countFiles(want)) || s.Requests == 0 || s.Ops["read"].Count == 0 || s.Errors != 0 {
		t.Errorf("stats: files %d (want %d), requests %d, reads %d, errors %d", s.Files, countFiles(want), s.Requests, s.Ops["read"].Count, s.Errors)
	}
	if _, err := os.Stat(filepath.Join(mnt, ".aifs", "nonexistent")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat .aifs/nonexistent: %v, want ENOENT", err)
	}
	r := mustAifs(t, "stats", mnt)
	for _, want := range []string{"requests", "read", "p99"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("aifs stats output lacks %q:\n%s", want, r.stdout)
		}
	}
}
