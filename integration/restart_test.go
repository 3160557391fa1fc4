//go:build integration

package integration

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	aifsfs "github.com/aifs/aifs/fs"
	"github.com/aifs/aifs/plan"
)

// restartSet packs n files of random bytes and returns the source directory and the set.
func restartSet(t *testing.T, n int) (src, set string) {
	t.Helper()
	src = t.TempDir()
	for i := range n {
		writeFile(t, filepath.Join(src, fmt.Sprintf("c%d", i%8), fmt.Sprintf("s-%04d.bin", i)), randomBytes(uint64(i)+7, 3000+(i*7919)%60000))
	}
	set = filepath.Join(t.TempDir(), "set")
	mustAifs(t, "pack", "--quiet", "--shard-size", "4M", src, set)
	return src, set
}

// epochUnder reads every file of src through mnt once, in a shuffled order, on 8 readers, and
// calls during(k) after k = 1, 2, ... tenths of the reads have been issued (from the readers'
// goroutine: the readers go on meanwhile). Each read is compared with the source. It returns the
// errors and the reads that took longer than 100 ms, with the longest.
func epochUnder(t *testing.T, src, mnt string, during func(k int)) (errs []error, stalls int, longest time.Duration) {
	t.Helper()
	var paths []string
	filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(src, p)
			paths = append(paths, rel)
		}
		return nil
	})
	rand.Shuffle(len(paths), func(i, j int) { paths[i], paths[j] = paths[j], paths[i] })
	var next atomic.Int64
	var mu sync.Mutex // guards errs, stalls, longest
	var wg sync.WaitGroup
	tenth := int64(len(paths) / 10)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(len(paths)) {
					return
				}
				if during != nil && i > 0 && i%tenth == 0 {
					during(int(i / tenth))
				}
				begin := time.Now()
				got, err := os.ReadFile(filepath.Join(mnt, paths[i]))
				took := time.Since(begin)
				want, _ := os.ReadFile(filepath.Join(src, paths[i]))
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else if !bytes.Equal(got, want) {
					errs = append(errs, fmt.Errorf("%s: wrong bytes (%d, want %d)", paths[i], len(got), len(want)))
				}
				if took > 100*time.Millisecond {
					stalls++
				}
				longest = max(longest, took)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errs, stalls, longest
}

// daemonStats reads the daemon figures of the mount at mnt (either plane) from its stats file.
func daemonStats(t *testing.T, mnt string) aifsfs.DaemonStats {
	t.Helper()
	return readStats(t, filepath.Dir(plan.Control(mnt))).Daemon
}

// servingPID is the pid of the daemon serving mnt now, from its stats file.
func servingPID(t *testing.T, mnt string) int {
	t.Helper()
	pid := daemonStats(t, mnt).PID
	if pid == 0 {
		t.Fatalf("the stats file of %s names no daemon", mnt)
	}
	return pid
}

// TestRestartKilledDaemon: with the keeper (-o restart=on, the default for root), kill -9 of the
// serving daemon, twice, at random moments of a shuffled epoch of 8 readers: every reader
// completes with the source's bytes and no error, on the FUSE plane and on the kernel plane,
// and the stats say two daemons came before the one serving.
func TestRestartKilledDaemon(t *testing.T) {
	src, set := restartSet(t, 3000)
	for _, plane := range []string{"fuse", "kernel"} {
		t.Run(plane, func(t *testing.T) {
			if plane == "kernel" {
				needKernelPlane(t)
			}
			mnt := mountSet(t, set, "-o", "data="+plane)
			keeper := daemonPID(t, mnt)
			at := []int{1 + rand.IntN(4), 5 + rand.IntN(4)} // the tenths of the epoch at which to kill
			var killed []int
			var killMu sync.Mutex
			errs, stalls, longest := epochUnder(t, src, mnt, func(k int) {
				if !slices.Contains(at, k) {
					return
				}
				killMu.Lock()
				defer killMu.Unlock()
				pid := servingPID(t, mnt)
				if pid == keeper || slices.Contains(killed, pid) {
					return
				}
				syscall.Kill(pid, syscall.SIGKILL)
				killed = append(killed, pid)
				time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
			})
			for _, err := range errs[:min(len(errs), 5)] {
				t.Errorf("a reader: %v", err)
			}
			if len(killed) != 2 {
				t.Fatalf("killed %d daemons, want 2 (at tenths %v)", len(killed), at)
			}
			for end := time.Now().Add(10 * time.Second); daemonStats(t, mnt).Restarts < 2; time.Sleep(50 * time.Millisecond) {
				if time.Now().After(end) {
					t.Fatalf("restarts %d after two kills, want 2", daemonStats(t, mnt).Restarts)
				}
			}
			if d := daemonStats(t, mnt); d.KeeperPID != keeper || slices.Contains(killed, d.PID) {
				t.Errorf("daemon %+v: want a live daemon under keeper %d", d, keeper)
			}
			t.Logf("%s plane: 2 daemons killed at tenths %v of the epoch; %d reads took over 100 ms, the longest %v", plane, at, stalls, longest)
		})
	}
}

// TestRestartUpgrade: aifs upgrade replaces the daemon with a rebuilt binary mid-epoch with no
// reader error; the new daemon runs the new binary, and the mount ends cleanly after.
func TestRestartUpgrade(t *testing.T) {
	src, set := restartSet(t, 2000)
	bin := filepath.Join(t.TempDir(), "aifs")
	if out, err := exec.Command("cp", aifsBin, bin).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	rebuilt := bin + ".new" // the same source, linked again with other flags: other bytes
	build := exec.Command("go", "build", "-ldflags=-s -w", "-o", rebuilt, "github.com/aifs/aifs/cmd/aifs")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, out)
	}
	mnt := filepath.Join(t.TempDir(), "mnt")
	mkdir(t, mnt)
	if out, err := exec.Command(bin, "mount", set, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v: %s", err, out)
	}
	t.Cleanup(func() { unmount(t, mnt, 0) })
	old := servingPID(t, mnt)
	var upgraded atomic.Bool
	errs, stalls, longest := epochUnder(t, src, mnt, func(k int) {
		if k != 3 || upgraded.Swap(true) {
			return
		}
		if err := os.Rename(rebuilt, bin); err != nil {
			t.Error(err)
			return
		}
		if out, err := exec.Command(bin, "upgrade", mnt).CombinedOutput(); err != nil {
			t.Errorf("aifs upgrade: %v: %s", err, out)
		}
	})
	for _, err := range errs[:min(len(errs), 5)] {
		t.Errorf("a reader: %v", err)
	}
	now := servingPID(t, mnt)
	var exe, want syscall.Stat_t
	if err := syscall.Stat(fmt.Sprintf("/proc/%d/exe", now), &exe); err != nil {
		t.Fatal(err)
	}
	syscall.Stat(bin, &want)
	if now == old || exe.Ino != want.Ino {
		t.Errorf("after aifs upgrade: daemon pid %d (was %d), running inode %d, want the rebuilt binary's %d", now, old, exe.Ino, want.Ino)
	}
	d := daemonStats(t, mnt)
	if d.Restarts != 1 {
		t.Errorf("restarts %d after one upgrade, want 1", d.Restarts)
	}
	t.Logf("upgrade mid-epoch: %d reads took over 100 ms, the longest %v", stalls, longest)
	unmount(t, mnt, d.KeeperPID)
}

// TestRestartGivesUp: a daemon that cannot start again (its shard set is gone) is retried a few
// times; then the keeper ends the mount (readers get an error, not a hang) and exits.
func TestRestartGivesUp(t *testing.T) {
	_, set := restartSet(t, 50)
	mnt := mountSet(t, set)
	keeper := daemonPID(t, mnt)
	if err := os.Rename(set, set+".gone"); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(servingPID(t, mnt), syscall.SIGKILL)
	if !waitExit(keeper, 30*time.Second) {
		t.Fatal("the keeper is still running after its daemons failed to start")
	}
	if _, err := os.ReadFile(filepath.Join(mnt, "c1", "s-0001.bin")); err == nil {
		t.Error("a read succeeded on a mount whose keeper gave up")
	}
}
