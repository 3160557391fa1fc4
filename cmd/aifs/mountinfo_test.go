package main

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/aifs/aifs/internal/testenv"
)

// TestLazyUnmountNotMounted: with nothing mounted at the path, lazyUnmount's error is
// errNotMounted, whether umount2 (as root) or fusermount3 (as root, and as another user, whose
// fusermount3 looks the path up in /etc/mtab) says so.
func TestLazyUnmountNotMounted(t *testing.T) {
	if _, err := exec.LookPath("fusermount3"); err != nil && os.Geteuid() != 0 {
		testenv.Need(t, "fusermount3 (package fuse3)") // what lazyUnmount runs when not root
	}
	dir := t.TempDir()
	if err := lazyUnmount(dir); !errors.Is(err, errNotMounted) {
		t.Errorf("lazyUnmount of a directory: %v, want errNotMounted", err)
	}
	if os.Geteuid() != 0 {
		testenv.Need(t, "root, to run fusermount3 as root and as another user")
		t.Fatal("not root: fusermount3 cannot be run as another user")
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, cred := range []*syscall.Credential{nil, {Uid: 65534, Gid: 65534}} {
		cmd := exec.Command("fusermount3", "-u", "-z", dir)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		if err := fusermountLazy(cmd); !errors.Is(err, errNotMounted) {
			t.Errorf("fusermount3 -u -z of a directory as %+v: %v, want errNotMounted", cred, err)
		}
	}
}
