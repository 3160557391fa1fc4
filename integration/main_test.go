//go:build integration

// Package integration runs the built aifs binary in subprocesses against real directory trees,
// mounts, S3 servers and programs (PyTorch, numpy, SQLite), and checks what a user sees: what
// pack leaves on disk (read back through the layout package), what a mount serves (compared
// with the source tree byte for byte), the stats, and the errors.
//
// The tests expect to run as root (the CI machine does): they mount, drop caches, and run aifs
// as uid 65534 (nobody) where a user's view is the point.
// They are built only with -tags integration, as scripts/test.sh builds them.
package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// aifsBin is the binary built by TestMain; workDir is a world-readable scratch directory that
// outlives every test (shared source trees live there).
var aifsBin, workDir string

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "aifs-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// The binary must be reachable by the unprivileged user TestPackRefusals runs it as.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	workDir = dir
	aifsBin = filepath.Join(dir, "aifs")
	build := exec.Command("go", "build", "-o", aifsBin, "github.com/aifs/aifs/cmd/aifs")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building aifs: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// result is what one aifs run did.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, clip(r.stdout), clip(r.stderr))
}

// clip shortens long output for failure messages.
func clip(s string) string {
	if len(s) > 4000 {
		return s[:2000] + "\n[...]\n" + s[len(s)-2000:]
	}
	return s
}

// runTimeout stops an aifs command that hangs. It is no timing test: on a 2-vCPU AMD EPYC VM
// (a paravirtualised guest, where each system call costs over a microsecond) under -race,
// `aifs verify` of the edge tree over S3 (100,000 tiny files) took 106 s, and the 2 minutes
// this was failed it once.
const runTimeout = 5 * time.Minute

// aifs runs the binary with args and waits for it.
func aifs(t testing.TB, args ...string) result {
	t.Helper()
	return aifsAs(t, nil, args...)
}

// aifsAs runs the binary with args as the user cred (nil: as the test's own user).
func aifsAs(t testing.TB, cred *syscall.Credential, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, aifsBin, args...)
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr) && exitErr.ExitCode() >= 0:
		r.code = exitErr.ExitCode()
	default:
		t.Fatalf("aifs %s: %v (%s)", strings.Join(args, " "), err, r)
	}
	return r
}

// mustAifs runs the binary and fails the test unless it exits 0.
func mustAifs(t testing.TB, args ...string) result {
	t.Helper()
	r := aifs(t, args...)
	if r.code != 0 {
		t.Fatalf("aifs %q: %s", args, r)
	}
	return r
}

// started is an aifs process running in the background.
type started struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan struct{}
	err            error
}

// start runs the binary in the background; wait collects it. The process is killed at cleanup
// if the test did not wait for it.
func start(t testing.TB, args ...string) *started {
	t.Helper()
	s := &started{cmd: exec.Command(aifsBin, args...), done: make(chan struct{})}
	s.cmd.Stdout, s.cmd.Stderr = &s.stdout, &s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			s.cmd.Process.Kill()
			<-s.done
		}
	})
	return s
}

// exited reports whether the process has ended.
func (s *started) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// wait waits for the process and returns how it ended; signalled is the signal that killed it.
func (s *started) wait(t testing.TB) (r result, signalled syscall.Signal) {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(runTimeout):
		t.Fatalf("aifs %q did not exit", s.cmd.Args)
	}
	r = result{code: s.cmd.ProcessState.ExitCode(), stdout: s.stdout.String(), stderr: s.stderr.String()}
	if ws, ok := s.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		signalled = ws.Signal()
	}
	return r, signalled
}

// worldDir returns a new empty directory that any user can read and enter, removed at cleanup.
// (t.TempDir's parent is private to root.)
func worldDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp(workDir, strings.ReplaceAll(t.Name(), "/", "_")+"-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) }) // as root, even directories chmod 000 are removed
	return dir
}
