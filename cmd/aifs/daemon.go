package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// daemonEnv names the environment variable that tells a re-executed aifs it is the daemon, and
// which file descriptor reports readiness to the parent.
const daemonEnv = "AIFS_DAEMON_READY_FD"

// startDaemon runs this binary again, detached, with the same arguments, and waits until it
// reports on a pipe that the mount is live ("ok") or why it failed, its last line; the lines
// before it are notices for the user, printed on stderr.
func startDaemon(args []string) int {
	self, err := os.Executable()
	if err != nil {
		return fail("mount", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fail("mount", err)
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return fail("mount", err)
	}
	cmd := exec.Command(self, append([]string{"mount"}, args...)...)
	cmd.Env = append(os.Environ(), daemonEnv+"=3")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, null, null
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fail("mount", fmt.Errorf("start daemon: %w", err))
	}
	w.Close()
	null.Close()
	msg, _ := io.ReadAll(r) // until the daemon reports and closes its end, or dies
	r.Close()
	lines := strings.Split(strings.TrimSpace(string(msg)), "\n")
	for _, notice := range lines[:len(lines)-1] {
		fmt.Fprintf(os.Stderr, "aifs mount: %s\n", notice)
	}
	switch s := lines[len(lines)-1]; {
	case s == "ok":
		cmd.Process.Release()
		return exitOK
	case s != "":
		cmd.Wait()
		fmt.Fprintf(os.Stderr, "aifs mount: %s\n", s)
		return exitFailure
	default:
		err := cmd.Wait()
		return fail("mount", fmt.Errorf("the daemon exited before the mount was live (%v)", err))
	}
}
