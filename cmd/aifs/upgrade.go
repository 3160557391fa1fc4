package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/aifs/aifs/fs"
)

func runUpgrade(ctx context.Context, args []string) int {
	flags := newFlags("upgrade", "[flags] MOUNTPOINT", `
Replaces the daemon serving the aifs mount at MOUNTPOINT with one started from the aifs binary
now on disk (at the path the mount was started from), with no remount: readers see a pause, not
an error. The mount's keeper (-o restart=on, the default for root) starts the new daemon, and
once it serves the mount ends the old one; the kernel sends the new one what the old one was
serving (Linux 6.9+). If the new daemon fails to start, the old one goes on and this command
fails. The same as SIGUSR2 to the keeper (daemon.keeper_pid in the stats file); run it in the
mount's PID namespace (for a mount in a pod, inside the pod). Not on the kernel plane over S3
yet (refused: unmount and mount again).`)
	timeout := flags.Duration("timeout", time.Minute, "how long to wait for the new daemon to serve")
	pos, code, ok := parseArgs(flags, args, 1, 1)
	if !ok {
		return code
	}
	before, err := daemonOf(pos[0])
	if err != nil {
		return fail("upgrade", err)
	}
	if s, _, err := readSnapshot(pos[0]); err == nil && s.Storage["kernel_fill"] != nil {
		return fail("upgrade", fmt.Errorf("%s: aifs upgrade is not supported on the kernel plane over S3 yet: unmount and mount again", pos[0]))
	}
	if before.KeeperPID == 0 {
		return fail("upgrade", fmt.Errorf("%s has no keeper (mounted with -o restart=off, or not as root): unmount and mount it again", pos[0]))
	}
	if !isKeeper(before.KeeperPID) {
		return fail("upgrade", fmt.Errorf("pid %d, the keeper of %s, is not an aifs mount here: run aifs upgrade in the mount's PID namespace (inside its pod or container)", before.KeeperPID, pos[0]))
	}
	if err := syscall.Kill(before.KeeperPID, syscall.SIGUSR2); err != nil {
		return fail("upgrade", fmt.Errorf("signalling the keeper (pid %d): %w", before.KeeperPID, err))
	}
	deadline := time.Now().Add(*timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		now, err := daemonOf(pos[0])
		if err == nil && now.PID != before.PID {
			fmt.Printf("%s: daemon pid %d replaced by pid %d (%d daemons before it)\n", pos[0], before.PID, now.PID, now.Restarts)
			return exitOK
		}
	}
	return fail("upgrade", fmt.Errorf("daemon pid %d still serves %s after %v: the new daemon failed (the mount's log says why)", before.PID, pos[0], *timeout))
}

// daemonOf returns the daemon figures of the mount at mnt, from its stats file.
func daemonOf(mnt string) (fs.DaemonStats, error) {
	s, _, err := readSnapshot(mnt)
	if err == nil && s.Daemon.PID == 0 {
		err = errors.New(mnt + ": the daemon is older than aifs upgrade: unmount and mount it again")
	}
	return s.Daemon, err
}

// isKeeper reports whether process pid, as this process sees it, is an aifs mount: pid numbers
// from another PID namespace name other processes here.
func isKeeper(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	args := strings.Split(string(b), "\x00")
	return err == nil && len(args) > 1 && filepath.Base(args[0]) == "aifs" && args[1] == "mount"
}
