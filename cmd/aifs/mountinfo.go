package main

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/aifs/aifs/internal/mountinfo"
	"github.com/aifs/aifs/kernel"
	"github.com/aifs/aifs/layout/erofsmeta"
)

// errNotMounted is lazyUnmount's error when nothing is mounted at the path (someone else has
// unmounted it); for a user other than root, nothing that user mounted (fusermount3 looks in
// /etc/mtab for the user's own mounts).
var errNotMounted = errors.New("not mounted")

// lazyUnmount detaches mountpoint from the tree (MNT_DETACH) as root, through fusermount3 -z
// otherwise. If nothing is mounted there the error wraps errNotMounted.
func lazyUnmount(mountpoint string) error {
	if os.Geteuid() == 0 {
		err := syscall.Unmount(mountpoint, syscall.MNT_DETACH)
		if err == syscall.EINVAL { // not a mount point (the flag is valid)
			return fmt.Errorf("umount2 %s: %w (%w)", mountpoint, errNotMounted, err)
		}
		return err
	}
	return fusermountLazy(exec.Command("fusermount3", "-u", "-z", mountpoint))
}

// fusermountLazy runs cmd, a fusermount3 -u -z, and returns its failure as lazyUnmount does.
func fusermountLazy(cmd *exec.Cmd) error {
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		for _, notMounted := range []string{"not found in /etc/mtab", "not mounted", ": Invalid argument"} {
			if strings.Contains(msg, notMounted) {
				return fmt.Errorf("fusermount3 -u -z: %s: %w", msg, errNotMounted)
			}
		}
		return fmt.Errorf("fusermount3 -u -z: %w: %s", err, msg)
	}
	return nil
}

// checkMountpoint returns the absolute, symlink-free path of mountpoint after checking that it
// is an empty directory and not already a mount point. A mount left by an aifs daemon that died
// (kill -9, OOM) is unmounted first (see recoverStale); notice says so, "" otherwise.
func checkMountpoint(mountpoint string) (abs, notice string, err error) {
	abs, err = filepath.Abs(mountpoint)
	if err == nil {
		notice, err = recoverStale(abs)
	}
	if err != nil {
		return "", "", err
	}
	abs, err = checkDir(abs, mountpoint)
	return abs, notice, err
}

// checkDir is checkMountpoint after recoverStale.
func checkDir(abs, mountpoint string) (string, error) {
	abs, err := filepath.EvalSymlinks(abs)
	if errors.Is(err, iofs.ErrNotExist) {
		return "", fmt.Errorf("mountpoint %s does not exist", mountpoint)
	}
	if err != nil {
		return "", fmt.Errorf("mountpoint: %w", err)
	}
	if m, ok := mountinfo.At(abs); ok {
		return "", fmt.Errorf("%s is already a mount point (%s from %s)", abs, m.FSType, m.Source)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("mountpoint: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("mountpoint %s is not a directory", abs)
	}
	d, err := os.Open(abs)
	if err != nil {
		return "", fmt.Errorf("mountpoint: %w", err)
	}
	names, err := d.Readdirnames(1)
	d.Close()
	if len(names) > 0 {
		return "", fmt.Errorf("mountpoint %s is not empty", abs)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("mountpoint: %w", err)
	}
	return abs, nil
}

// recoverStale looks at path before it is checked: a FUSE mount there whose daemon is gone
// answers with ENOTCONN (STATFS always reaches the daemon; a stat may be answered from the
// kernel's cache). If it is an aifs mount (fuse.aifs) it is unmounted lazily (nothing can be
// read from it any more, and nothing can be lost: it is read-only) and the notice says so;
// another file system's is refused with the command that clears it.
func recoverStale(path string) (notice string, err error) {
	m, ok := mountinfo.At(path)
	fstype, source := m.FSType, m.Source
	if ok && fstype == kernel.FSType && strings.HasPrefix(filepath.Base(source), erofsmeta.ImagePrefix) {
		return recoverKernelPlane(path, m)
	}
	if !ok || fstype != "fuse" && !strings.HasPrefix(fstype, "fuse.") {
		return "", nil
	}
	var st syscall.Statfs_t
	// ECONNABORTED: a request in flight when the daemon died.
	if err := syscall.Statfs(path, &st); err != syscall.ENOTCONN && err != syscall.ECONNABORTED {
		return "", nil
	}
	if fstype != "fuse.aifs" {
		return "", fmt.Errorf("%s is a %s mount of %s whose daemon is gone (transport endpoint is not connected); "+
			"unmount it with: fusermount3 -u -z %s", path, fstype, source, path)
	}
	if err := lazyUnmount(path); err != nil {
		return "", fmt.Errorf("%s was left mounted by an aifs daemon that died; unmounting it: %w", path, err)
	}
	return fmt.Sprintf("%s was left mounted (%s) by an aifs daemon that died; unmounted it", path, source), nil
}

// recoverKernelPlane looks at an aifs kernel plane mounted at path (m): if its daemon is gone
// (its control mount answers ENOTCONN, or is gone), the plane and its control mount are
// unmounted lazily (readers of the plane go on reading: the kernel serves them) and the notice
// says so; a plane whose daemon is alive is refused.
func recoverKernelPlane(path string, m mountinfo.Mount) (notice string, err error) {
	ctl := kernel.ControlDir(m.Dev)
	var st syscall.Statfs_t
	cm, mounted := mountinfo.At(ctl)
	if mounted {
		err := syscall.Statfs(ctl, &st)
		if err != syscall.ENOTCONN && err != syscall.ECONNABORTED {
			return "", fmt.Errorf("%s is already a mount point (the aifs kernel plane of %s, whose daemon is alive: control mount %s)", path, cm.Source, ctl)
		}
		if err := lazyUnmount(ctl); err != nil && !errors.Is(err, errNotMounted) {
			return "", fmt.Errorf("%s was left mounted by an aifs daemon that died; unmounting its control mount %s: %w", path, ctl, err)
		}
	}
	os.Remove(ctl)
	if err := syscall.Unmount(path, syscall.MNT_DETACH); err != nil {
		return "", fmt.Errorf("%s was left mounted by an aifs daemon that died; unmounting it: %w", path, err)
	}
	return fmt.Sprintf("%s was left mounted (the kernel plane, %s) by an aifs daemon that died; unmounted it", path, m.Source), nil
}
