package fs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// A Conn is a FUSE connection that outlives the daemon serving it (docs/reliability.md,
// "Daemon restarts"): the open /dev/fuse file of a mount and the INIT request the kernel sent on
// it. A keeper process holds both; each daemon it starts serves the connection with go-fuse,
// and when one dies its successor takes the connection over with no remount, and the kernel
// sends it again the requests the dead one had read but not answered (Resend).
//
// go-fuse serves only a connection whose INIT it reads itself (fuse.NewServer reads the first
// request and fails unless it is INIT); it has no call to serve a connection already
// initialised. serve therefore gives go-fuse the saved INIT on a socket, through go-fuse's
// /dev/fd/N mountpoint, and once go-fuse has answered it puts the FUSE connection in the place
// of that socket (dup3), before go-fuse reads any other request. What go-fuse lacks to do this
// without the swap is a constructor taking a file descriptor and the InitIn already negotiated.
type Conn struct {
	File *os.File // the /dev/fuse file of the mount
	Init []byte   // the kernel's INIT request, as read from File
}

// Requests in the FUSE protocol (linux/fuse.h) that Conn reads or writes itself.
const (
	opInit       = 26 // FUSE_INIT
	notifyResend = 7  // FUSE_NOTIFY_RESEND, Linux 6.9+
	// hasResend is FUSE_HAS_RESEND (bit 39 of the INIT flags: bit 7 of flags2): the kernel
	// takes FUSE_NOTIFY_RESEND.
	hasResend = 1 << 7
	// inHeaderSize is sizeof(struct fuse_in_header); the INIT arguments follow it: major,
	// minor, max_readahead, flags, flags2.
	inHeaderSize = 40
)

// mountConn mounts a FUSE file system of type fuse.aifs at mountpoint with mount(2), which needs
// root, on a /dev/fuse file of its own, and reads the kernel's INIT request from it. options
// are the mount's string options; "ro" also sets MS_RDONLY.
func mountConn(mountpoint, fsName string, options []string, allowOther bool) (*Conn, error) {
	var st unix.Stat_t
	if err := unix.Stat(mountpoint, &st); err != nil {
		return nil, err
	}
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/fuse: %w", err)
	}
	file := os.NewFile(uintptr(fd), "/dev/fuse")
	opts := []string{fmt.Sprintf("fd=%d", fd), fmt.Sprintf("rootmode=%o", st.Mode&unix.S_IFMT),
		fmt.Sprintf("user_id=%d", os.Geteuid()), fmt.Sprintf("group_id=%d", os.Getegid()),
		fmt.Sprintf("max_read=%d", maxRead)}
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	for _, o := range options {
		if o == "ro" {
			flags |= unix.MS_RDONLY
		}
		opts = append(opts, o)
	}
	if allowOther {
		opts = append(opts, "allow_other")
	}
	if err := unix.Mount(fsName, mountpoint, "fuse.aifs", flags, strings.Join(opts, ",")); err != nil {
		file.Close()
		return nil, fmt.Errorf("mount(2) fuse.aifs at %s: %w", mountpoint, err)
	}
	init := make([]byte, 1<<16)
	n, err := readFUSE(file, init)
	if err == nil && (n < inHeaderSize+8 || binary.LittleEndian.Uint32(init[4:]) != opInit) {
		err = errors.New("the first request is not INIT")
	}
	if err != nil {
		file.Close()
		unix.Unmount(mountpoint, unix.MNT_DETACH)
		return nil, fmt.Errorf("mount %s: reading the kernel's INIT: %w", mountpoint, err)
	}
	return &Conn{File: file, Init: init[:n]}, nil
}

// readFUSE reads one request from the FUSE file f, retrying EINTR.
func readFUSE(f *os.File, b []byte) (int, error) {
	for {
		n, err := unix.Read(int(f.Fd()), b)
		if err != unix.EINTR {
			return n, err
		}
	}
}

// CanResend reports whether the kernel takes FUSE_NOTIFY_RESEND (Linux 6.9+), as its INIT said.
func (c *Conn) CanResend() bool {
	const flags2 = inHeaderSize + 16 // after major, minor, max_readahead, flags
	return len(c.Init) >= flags2+4 && binary.LittleEndian.Uint32(c.Init[flags2:])&hasResend != 0
}

// Resend asks the kernel to send again every request that was read from the connection and not
// answered: those a daemon that died was serving. It is a no-op error where the kernel lacks
// FUSE_NOTIFY_RESEND; those requests then wait until the connection is aborted.
func (c *Conn) Resend() error {
	if !c.CanResend() {
		return errors.New("the kernel has no FUSE_NOTIFY_RESEND (Linux 6.9+)")
	}
	var h [16]byte // struct fuse_out_header: len, error (the notify code), unique 0
	binary.LittleEndian.PutUint32(h[0:], uint32(len(h)))
	binary.LittleEndian.PutUint32(h[4:], notifyResend)
	_, err := unix.Write(int(c.File.Fd()), h[:])
	return err
}

// serveConn starts a go-fuse server for f on c. With answerInit (the connection's first daemon)
// go-fuse's answer to INIT goes to the kernel; a later daemon's is dropped, the kernel having
// had the first. The server is not yet serving: the caller starts srv.Serve.
func serveConn(f *FS, c *Conn, mo *fuse.MountOptions, answerInit bool) (*fuse.Server, error) {
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(sp[1])
	if _, err := unix.Write(sp[1], c.Init); err != nil {
		unix.Close(sp[0])
		return nil, fmt.Errorf("handing INIT to go-fuse: %w", err)
	}
	mo.DirectMount = false // the /dev/fd/N mountpoint: go-fuse mounts nothing
	srv, err := fuse.NewServer(f, fmt.Sprintf("/dev/fd/%d", sp[0]), mo)
	if err != nil { // sp[0] is go-fuse's: it closed it
		return nil, err
	}
	reply := make([]byte, 4096)
	n, err := unix.Read(sp[1], reply)
	if err == nil && answerInit {
		_, err = unix.Write(int(c.File.Fd()), reply[:n])
	}
	if err == nil {
		// go-fuse's file descriptor sp[0] becomes the FUSE connection: it reads and answers
		// the mount's requests from here on.
		err = unix.Dup3(int(c.File.Fd()), sp[0], unix.O_CLOEXEC)
	}
	if err != nil {
		return nil, fmt.Errorf("taking over the FUSE connection: %w", err)
	}
	return srv, nil
}
