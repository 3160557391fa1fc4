package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// daemonEnv names the environment variable that tells a re-executed aifs it is the daemon, and
// which file descriptor reports readiness to the parent.
const daemonEnv = "AIFS_DAEMON_READY_FD"

// stderrGrace bounds how long startDaemon waits, after the daemon's report, for the daemon's
// stderr to reach end of file. The daemon closes it before it reports, so the wait ends at once
// unless something the daemon started still holds a copy.
const stderrGrace = 2 * time.Second

// startDaemon runs this binary again, detached, with the same arguments, and waits until it
// reports on a pipe that the mount is live ("ok") or why it failed, its last line; the lines
// before it are notices for the user, printed on stderr. Until the report, the daemon's stderr
// is a pipe to this process too: what the daemon and its helpers print there (fusermount3's
// reason for refusing a mount, a crash) is passed on to this process's stderr.
func startDaemon(args []string) int {
	self, err := os.Executable()
	if err != nil {
		return fail("mount", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fail("mount", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		return fail("mount", err)
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return fail("mount", err)
	}
	cmd := exec.Command(self, append([]string{"mount"}, args...)...)
	cmd.Env = append(os.Environ(), daemonEnv+"=3")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, null, errW
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fail("mount", fmt.Errorf("start daemon: %w", err))
	}
	w.Close()
	errW.Close()
	null.Close()
	stderr := readAllBackground(errR)
	msg, _ := io.ReadAll(r) // until the daemon reports and closes its end, or dies
	r.Close()
	lines := strings.Split(strings.TrimSpace(string(msg)), "\n")
	for _, notice := range lines[:len(lines)-1] {
		fmt.Fprintf(os.Stderr, "aifs mount: %s\n", notice)
	}
	os.Stderr.Write(stderr(stderrGrace))
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
		return fail("mount", fmt.Errorf("the daemon exited before the mount was live (%w)", err))
	}
}

// readAllBackground reads f to its end in a new goroutine, then closes f. The function returned
// waits up to grace for the end and returns what was read by then; it may be called once.
func readAllBackground(f *os.File) func(grace time.Duration) []byte {
	var mu sync.Mutex // guards buf
	var buf bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer f.Close()
		b := make([]byte, 4096)
		for {
			n, err := f.Read(b)
			mu.Lock()
			buf.Write(b[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return func(grace time.Duration) []byte {
		select {
		case <-done:
		case <-time.After(grace):
			f.SetReadDeadline(time.Now()) // ends the goroutine's Read
		}
		mu.Lock()
		defer mu.Unlock()
		return bytes.Clone(buf.Bytes())
	}
}

// readyPipe is the daemon's end of the pipe on which it reports to `aifs mount`. A nil
// *readyPipe (a mount in the foreground) reports nothing.
type readyPipe struct{ f *os.File }

// daemonReady returns the pipe named by $AIFS_DAEMON_READY_FD, or nil if this process is not a
// daemon started by startDaemon.
func daemonReady() *readyPipe {
	fd, err := strconv.Atoi(os.Getenv(daemonEnv))
	if err != nil || fd < 3 {
		return nil
	}
	return &readyPipe{os.NewFile(uintptr(fd), "ready")}
}

// report sends the notices and then "ok" if err is nil, else err on one line, and closes the
// pipe; later calls do nothing. Before it writes, it points stderr at /dev/null, so that
// `aifs mount`, which passes on the daemon's stderr until the report, sees its end: from then
// on the daemon's output goes to its log file only.
func (p *readyPipe) report(notices []string, err error) {
	if p == nil || p.f == nil {
		return
	}
	if null, nerr := os.OpenFile(os.DevNull, os.O_RDWR, 0); nerr == nil {
		unix.Dup2(int(null.Fd()), 2) // on failure startDaemon stops waiting after stderrGrace
		null.Close()
	}
	for _, notice := range notices {
		fmt.Fprintln(p.f, notice)
	}
	if err == nil {
		fmt.Fprintln(p.f, "ok")
	} else {
		// One line: the last line is the outcome. go-fuse's errors end in a newline.
		fmt.Fprintln(p.f, strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; "))
	}
	p.f.Close()
	p.f = nil
}
