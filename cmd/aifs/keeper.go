package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/aifs/aifs/fs"
)

// The keeper (docs/reliability.md, "Daemon restarts"). With -o restart=on (the default for root)
// the process that `aifs mount` starts, or `aifs mount -f` itself, is a keeper: it runs the
// serving daemon as a child, holds the mount's FUSE connection that the child hands it, and
// when the child dies (kill -9, a crash, the OOM killer) starts another within a second, which
// serves the same connection with no remount; the kernel sends the new daemon the requests the
// dead one had read but not answered (FUSE_NOTIFY_RESEND, Linux 6.9+), so readers see a pause,
// not an error. SIGUSR2 (aifs upgrade) starts a daemon from the binary now on disk, and once it
// serves, ends the old one the same way. On the kernel plane the EROFS mount serves reads with
// no daemon at all; a new daemon takes over its control mount and fanotify watch.
//
// Between the keeper and a daemon it starts:
//   - the environment: keeperEnv names the socket on which a daemon that mounted hands the
//     connection up (a message: the /dev/fuse file, the plane, the INIT bytes; then, for the
//     kernel plane over S3, messages "fill" with the Filler's fanotify group and its copies'
//     descriptors, at most fillBatch a message, which hold its readers' pending reads while no
//     daemon runs: docs/kernel.md); for a daemon taking over, handoverEnv names the
//     connection's file descriptor, with the INIT request (hex) and the plane, fillEnv the
//     Filler's descriptors, and restartsEnv how many daemons came before it;
//   - the report pipe of daemonEnv, as between `aifs mount` and a daemon: the keeper passes the
//     first daemon's report on, and waits for a later one's before it ends the daemon it replaces.
const (
	keeperEnv   = "AIFS_KEEPER_FD"
	handoverEnv = "AIFS_HANDOVER"      // FD,PLANE,INITHEX
	fillEnv     = "AIFS_HANDOVER_FILL" // FD,N: the Filler's group at FD, its N copies after it
	restartsEnv = "AIFS_RESTARTS"
)

// Restart limits: a daemon that fails before it serves, or dies within crashWindow of its start,
// maxCrashes times in a row, is not started again: the keeper ends the connection (readers get
// ENOTCONN) and exits, rather than hold readers blocked on a daemon that cannot run.
const (
	crashWindow = 10 * time.Second
	maxCrashes  = 5
)

// handover is a connection taken over from an earlier daemon: the child half of the keeper's
// protocol, read from the environment. nil: this daemon mounts.
type handover struct {
	conn     *fs.Conn
	plane    string    // dataFUSE or dataKernel, as the first daemon chose
	fill     *heldFill // the kernel plane over S3's Filler; nil where there is none
	restarts uint64
}

// heldFill is the kernel plane over S3's Filler as the keeper holds it across daemon restarts
// (kernel.Filler.FDs, kernel.AdoptFiller): its fanotify group, whose end would let reads of
// holes through as zeros, and its copies' descriptors, opened before their marks.
type heldFill struct {
	fan    *os.File
	copies []*os.File
}

// fillBatch is the most descriptors in one message (the kernel takes at most 253).
const fillBatch = 250

// handoverFromEnv returns the connection a keeper handed this process, if any.
func handoverFromEnv() (*handover, error) {
	v := os.Getenv(handoverEnv)
	if v == "" {
		return nil, nil
	}
	parts := strings.SplitN(v, ",", 3)
	if len(parts) != 3 {
		return nil, fmt.Errorf("malformed $%s", handoverEnv)
	}
	fd, err := strconv.Atoi(parts[0])
	if err != nil {
		return nil, fmt.Errorf("malformed $%s: %w", handoverEnv, err)
	}
	init, err := hex.DecodeString(parts[2])
	if err != nil {
		return nil, fmt.Errorf("malformed $%s: %w", handoverEnv, err)
	}
	restarts, _ := strconv.ParseUint(os.Getenv(restartsEnv), 10, 64)
	h := &handover{conn: &fs.Conn{File: os.NewFile(uintptr(fd), "/dev/fuse"), Init: init}, plane: parts[1], restarts: restarts}
	if v := os.Getenv(fillEnv); v != "" {
		var first, n int
		if _, err := fmt.Sscanf(v, "%d,%d", &first, &n); err != nil || first < 3 || n < 0 {
			return nil, fmt.Errorf("malformed $%s", fillEnv)
		}
		h.fill = &heldFill{fan: os.NewFile(uintptr(first), "fanotify")}
		for i := range n {
			h.fill.copies = append(h.fill.copies, os.NewFile(uintptr(first+1+i), "copy"))
		}
	}
	return h, nil
}

// handUp sends a new mount's connection to the keeper named by $AIFS_KEEPER_FD, if any, or
// says it has none (conn nil: a mount without Handover). The keeper holds the connection from
// then on: a crash of this process no longer ends the mount.
//
// fill, if not empty, is the kernel plane over S3's Filler's descriptors (kernel.Filler.FDs:
// the group, then the copies): they follow, fillBatch a message, and the keeper holds them too.
func handUp(conn *fs.Conn, plane, fuseAt string, fill []int) error {
	fd, err := strconv.Atoi(os.Getenv(keeperEnv))
	if err != nil {
		return nil
	}
	sock := os.NewFile(uintptr(fd), "keeper")
	defer sock.Close()
	msg, rights := []byte("none\n"), []byte(nil)
	if conn != nil {
		msg, rights = append([]byte(plane+"\n"+fuseAt+"\n"), conn.Init...), unix.UnixRights(int(conn.File.Fd()))
	}
	if err := unix.Sendmsg(fd, msg, rights, nil, 0); err != nil {
		return fmt.Errorf("handing the FUSE connection to the keeper: %w", err)
	}
	if conn == nil {
		return nil
	}
	for fds := fill; len(fds) > 0; {
		n := min(len(fds), fillBatch)
		if err := unix.Sendmsg(fd, []byte("fill\n"), unix.UnixRights(fds[:n]...), nil, 0); err != nil {
			return fmt.Errorf("handing the kernel plane's filler to the keeper: %w", err)
		}
		fds = fds[n:]
	}
	return nil
}

// child is a daemon the keeper started.
type child struct {
	cmd     *exec.Cmd
	started time.Time
	exited  chan error    // cmd.Wait's result, once
	dead    chan struct{} // closed once the process has died or is dying (see watchDeath)
	report  chan []string // the lines of its report, once, at the pipe's end
	conn    chan handed   // the connection it mounted, at most once
}

// handed is a connection a daemon handed up.
type handed struct {
	conn   *fs.Conn
	plane  string
	fuseAt string    // the FUSE mount's path: the mountpoint, or the kernel plane's control mount
	fill   *heldFill // the kernel plane over S3's Filler, if any
}

// startChild starts this binary (exe, as on disk now) as a serving daemon with args; with h it
// takes over h's connection, else it mounts.
func startChild(exe string, args []string, dir string, h *handover, metrics *os.File) (*child, error) {
	repR, repW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer repW.Close()
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		repR.Close()
		return nil, err
	}
	mine, theirs := os.NewFile(uintptr(sp[0]), "keeper"), os.NewFile(uintptr(sp[1]), "daemon")
	defer theirs.Close()
	cmd := exec.Command(exe, append([]string{"mount"}, args...)...)
	cmd.Dir = dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{repW, theirs}
	cmd.Env = append(os.Environ(), daemonEnv+"=3", keeperEnv+"=4")
	if metrics != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, metrics)
		cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%d", metricsEnv, 2+len(cmd.ExtraFiles)))
	}
	if h != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, h.conn.File)
		cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%d,%s,%s", handoverEnv, 2+len(cmd.ExtraFiles), h.plane, hex.EncodeToString(h.conn.Init)),
			fmt.Sprintf("%s=%d", restartsEnv, h.restarts))
		if f := h.fill; f != nil {
			// Passing the group makes it blocking (File.Fd), for every holder: AdoptFiller makes it
			// non-blocking again.
			cmd.ExtraFiles = append(cmd.ExtraFiles, f.fan)
			cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%d,%d", fillEnv, 2+len(cmd.ExtraFiles), len(f.copies)))
			cmd.ExtraFiles = append(cmd.ExtraFiles, f.copies...)
		}
	}
	// Setpgid: the terminal's ^C reaches the keeper, which passes it on. Pdeathsig: a keeper
	// killed (systemd's kill of a unit's main process, kill -9) ends its daemon as SIGTERM
	// does: the mount is unmounted, or detached and served until its last file is closed. Not
	// SIGKILL: on the kernel plane over S3 the daemon is then the last holder of the Filler's
	// group, whose end would let reads of holes through as zeros (docs/kernel.md).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		repR.Close()
		mine.Close()
		return nil, fmt.Errorf("start daemon %s: %w", exe, err)
	}
	c := &child{cmd: cmd, started: time.Now(), exited: make(chan error, 1), dead: make(chan struct{}),
		report: make(chan []string, 1), conn: make(chan handed, 1)}
	go func() { c.exited <- cmd.Wait() }()
	go c.watchDeath()
	go func() {
		msg, _ := io.ReadAll(repR) // until the daemon reports and closes its end, or dies
		repR.Close()
		c.report <- strings.Split(strings.TrimSpace(string(msg)), "\n")
	}()
	go func() { c.conn <- receiveConn(mine) }()
	return c, nil
}

// watchDeath closes c.dead once c's process is dead or dying: gone, or its main thread a zombie.
// A killed daemon may not finish dying on its own: a thread of it inside the kernel may wait
// for a page that a READ holds locked, a READ the dead daemon had taken and will never answer
// (pushing a sample into the page cache, NOTIFY_STORE, waits so). The process then lingers,
// cmd.Wait does not return, and only the READ sent again (Resend) to a new daemon lets it end;
// so the keeper acts on this, not on cmd.Wait.
func (c *child) watchDeath() {
	defer close(c.dead)
	pid, ok := procPID(c.cmd.Process.Pid)
	if !ok { // no /proc to watch it in: its exit it is
		err := <-c.exited
		c.exited <- err
		return
	}
	stat := fmt.Sprintf("/proc/%d/stat", pid)
	for {
		b, err := os.ReadFile(stat)
		// stat: pid (comm) state ...; comm is "aifs", without spaces or parentheses
		if f := strings.Fields(string(b)); err != nil || len(f) < 3 || f[2] == "Z" || f[2] == "X" {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// procPID returns the number of this process's child pid in /proc, which may be mounted for
// another PID namespace than this process's (a keeper started under unshare --pid, or in a
// container that shares the host's /proc): there the child is found among this process's
// children by the last pid of its NSpid line, its pid in the innermost namespace, ours.
func procPID(pid int) (int, bool) {
	if self, err := os.Readlink("/proc/self"); err == nil && self == strconv.Itoa(os.Getpid()) {
		return pid, true
	}
	lists, _ := filepath.Glob("/proc/self/task/*/children")
	for _, list := range lists {
		b, _ := os.ReadFile(list)
		for _, p := range strings.Fields(string(b)) {
			status, _ := os.ReadFile("/proc/" + p + "/status")
			for _, line := range strings.Split(string(status), "\n") {
				if f := strings.Fields(line); len(f) > 1 && f[0] == "NSpid:" && f[len(f)-1] == strconv.Itoa(pid) {
					n, err := strconv.Atoi(p)
					return n, err == nil
				}
			}
		}
	}
	return 0, false
}

// receiveConn reads the messages of a daemon on sock, the keeper's end, until the daemon closes
// it, and closes sock: the connection it mounted and its Filler, or none (handed.conn nil) if it
// says it has none or ends first.
func receiveConn(sock *os.File) handed {
	defer sock.Close()
	buf, oob := make([]byte, 1<<16), make([]byte, unix.CmsgSpace(4*fillBatch))
	var h handed
	for {
		n, oobn, _, _, err := unix.Recvmsg(int(sock.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err != nil || n == 0 {
			if h.conn == nil && h.fill != nil { // a Filler with no mount: let it go
				h.fill.fan.Close()
				for _, f := range h.fill.copies {
					f.Close()
				}
				h.fill = nil
			}
			return h
		}
		var fds []int
		if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil && len(msgs) == 1 {
			fds, _ = unix.ParseUnixRights(&msgs[0])
		}
		if msg := string(buf[:n]); msg == "fill\n" {
			for _, fd := range fds {
				if h.fill == nil {
					h.fill = &heldFill{fan: os.NewFile(uintptr(fd), "fanotify")}
				} else {
					h.fill.copies = append(h.fill.copies, os.NewFile(uintptr(fd), "copy"))
				}
			}
		} else if h.conn == nil && len(fds) == 1 {
			plane, rest, _ := strings.Cut(msg, "\n")
			fuseAt, init, _ := strings.Cut(rest, "\n")
			h.conn, h.plane, h.fuseAt = &fs.Conn{File: os.NewFile(uintptr(fds[0]), "/dev/fuse"), Init: []byte(init)}, plane, fuseAt
		} else {
			for _, fd := range fds {
				unix.Close(fd)
			}
		}
	}
}

// keep runs the keeper until the mount ends (see the top of this file). ready, if not nil, is
// `aifs mount`'s report pipe: the first daemon's report goes there. It returns the exit code.
func (c *mountConfig) keep(ctx context.Context, args []string, ready *readyPipe) int {
	log, closeLog, err := c.logger(!c.foreground)
	if err != nil {
		ready.report(nil, err)
		return fail("mount", err)
	}
	defer closeLog()
	log = log.Named("keeper")
	exe, err := os.Executable()
	dir, _ := os.Getwd()
	var metrics *os.File // the daemons' metrics listener, opened once: they overlap in an upgrade
	if err == nil && c.metricsAddr != "" {
		var l net.Listener
		if l, err = net.Listen("tcp", listenAddr(c.metricsAddr)); err == nil {
			metrics, err = l.(*net.TCPListener).File()
			l.Close()
		}
		if err != nil {
			err = fmt.Errorf("--metrics-addr: %w", err)
		}
	}
	var cur *child
	if err == nil {
		cur, err = startChild(exe, args, dir, nil, metrics)
	}
	if err != nil {
		ready.report(nil, err)
		return fail("mount", err)
	}
	// The first daemon: it hands up the connection it mounted (or says it has none, or ends),
	// then reports; its report is the mount's.
	got := <-cur.conn
	lines := <-cur.report
	notices, last := lines[:len(lines)-1], lines[len(lines)-1]
	if last != "ok" {
		if last == "" {
			last = "the daemon exited before the mount was live"
		}
		ready.report(notices, errors.New(last))
		if got.conn != nil {
			got.conn.File.Close()
		}
		<-cur.exited
		return exitFailure
	}
	ready.report(notices, nil)
	if got.conn == nil { // a mount made without a connection to keep (not root)
		return exitCode(<-cur.exited)
	}
	h := &handover{conn: got.conn, plane: got.plane, fill: got.fill}
	defer h.conn.File.Close()
	if !c.foreground {
		os.Chdir("/")
	}
	log.Info("keeping the mount's FUSE connection", zap.String("mountpoint", c.mountpoint), zap.Int("daemon_pid", cur.cmd.Process.Pid),
		zap.Bool("resend", h.conn.CanResend()))

	upgrade := make(chan os.Signal, 1)
	signal.Notify(upgrade, syscall.SIGUSR2)
	defer signal.Stop(upgrade)
	crashes := 0
	for {
		select {
		case <-ctx.Done():
			cur.cmd.Process.Signal(syscall.SIGTERM)
			return exitCode(<-cur.exited)
		case <-upgrade:
			next, err := c.replace(log, exe, args, dir, h, cur, metrics)
			if err != nil {
				log.Error("upgrade failed; the running daemon goes on", zap.Error(err))
				continue
			}
			cur = next
		case <-cur.dead:
			if !connAlive(h.conn) || ctx.Err() != nil { // unmounted, or a signal: it ends
				err := <-cur.exited
				log.Info("the mount has ended", zap.Error(err))
				return exitCode(err)
			}
			err := errors.New("killed, or crashed")
			select {
			case err = <-cur.exited:
			case <-time.After(100 * time.Millisecond): // dying, held by the kernel: see watchDeath
			}
			go func(c *child) { <-c.exited }(cur) // reaped once it has died
			if time.Since(cur.started) < crashWindow {
				crashes++
			} else {
				crashes = 1
			}
			log.Error("the daemon died; starting another, which takes over the mount", zap.Error(err), zap.Int("pid", cur.cmd.Process.Pid))
			if crashes > maxCrashes {
				log.Error("the daemon keeps dying; ending the mount (readers get ENOTCONN)", zap.Int("crashes", crashes))
				abortMount(log, got.fuseAt)
				return exitFailure
			}
			if err := h.conn.Resend(); err != nil {
				log.Warn("the requests the dead daemon was serving are lost: their readers wait until the mount ends", zap.Error(err))
			}
			h.restarts++
			next, err := startChild(exe, args, dir, h, metrics)
			for err != nil && crashes <= maxCrashes {
				crashes++
				log.Error("cannot start a daemon", zap.Error(err))
				time.Sleep(time.Second)
				next, err = startChild(exe, args, dir, h, metrics)
			}
			if err != nil {
				abortMount(log, got.fuseAt)
				return exitFailure
			}
			cur = next
			go func(c *child) { // its report, to the log
				if lines := <-c.report; lines[len(lines)-1] == "ok" {
					log.Info("a new daemon serves the mount", zap.Int("pid", c.cmd.Process.Pid), zap.Uint64("restarts", h.restarts))
				}
			}(cur)
		}
	}
}

// replace starts a daemon from the binary now at exe and, once it serves the connection, ends
// old (SIGKILL: what it was serving is sent again to the new one). On error old goes on.
func (c *mountConfig) replace(log *zap.Logger, exe string, args []string, dir string, h *handover, old *child, metrics *os.File) (*child, error) {
	if !h.conn.CanResend() {
		return nil, errors.New("the kernel has no FUSE_NOTIFY_RESEND (Linux 6.9+): the old daemon's requests would be lost")
	}
	if h.fill != nil {
		// The new daemon would take the Filler's group over while the old one still reads its
		// events, and the reads the old one took and had not answered when it was killed would
		// wait for ever: the new one fails a dead daemon's reads only as it starts.
		return nil, errors.New("aifs upgrade is not supported on the kernel plane over S3 yet: unmount and mount again")
	}
	next, err := startChild(exe, args, dir, &handover{conn: h.conn, plane: h.plane, fill: h.fill, restarts: h.restarts + 1}, metrics)
	if err != nil {
		return nil, err
	}
	select {
	case lines := <-next.report:
		if last := lines[len(lines)-1]; last != "ok" {
			next.cmd.Process.Kill()
			<-next.exited
			return nil, fmt.Errorf("the new daemon failed: %s", last)
		}
	case err := <-next.exited:
		return nil, fmt.Errorf("the new daemon exited: %v", err)
	}
	old.cmd.Process.Kill()
	<-old.dead
	go func() { <-old.exited }() // reaped once it has died: see watchDeath
	if err := h.conn.Resend(); err != nil {
		log.Warn("resend after upgrade", zap.Error(err))
	}
	h.restarts++
	log.Info("upgraded: a new daemon serves the mount", zap.String("binary", exe), zap.Int("pid", next.cmd.Process.Pid),
		zap.Int("old_pid", old.cmd.Process.Pid))
	return next, nil
}

// abortMount ends the FUSE connection of the mount at fuseAt (umount -f: the kernel aborts it,
// and unmounts it unless it is busy), so that its readers get ENOTCONN and a dead daemon's
// threads waiting on its pages are let go (see watchDeath): closing the keeper's copy of the
// connection is not enough while such a thread holds another.
func abortMount(log *zap.Logger, fuseAt string) {
	if err := unix.Unmount(fuseAt, unix.MNT_FORCE); err != nil && err != unix.EBUSY {
		log.Warn("aborting the mount", zap.String("mount", fuseAt), zap.Error(err))
	}
}

// connAlive reports whether the kernel still has the FUSE connection: it ends (the file polls
// POLLERR) when the mount is unmounted or aborted.
func connAlive(c *fs.Conn) bool {
	p := []unix.PollFd{{Fd: int32(c.File.Fd()), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(p, 0)
		if err != unix.EINTR {
			return err == nil && p[0].Revents&unix.POLLERR == 0
		}
	}
}

// exitCode turns a daemon's exit into the keeper's exit code.
func exitCode(err error) int {
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() > 0 {
		return exit.ExitCode()
	}
	if err != nil {
		return exitFailure
	}
	return exitOK
}
