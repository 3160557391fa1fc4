package fs

import (
	"fmt"
	"path/filepath"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// MountOptions are the kernel-facing settings of a mount. The zero value is ready to use.
type MountOptions struct {
	// AllowOther lets users other than the one who mounted read the tree (FUSE's allow_other;
	// a non-root user needs user_allow_other in /etc/fuse.conf). Default: false.
	AllowOther bool
	// FsName is the source shown in /proc/mounts and df. Default: "aifs".
	FsName string
	// DirectMount calls mount(2) itself instead of running fusermount3, which needs root.
	// Default: false.
	DirectMount bool
	// Debug logs every request and reply through the standard logger (go-fuse's debug mode).
	Debug bool
	// Handover mounts with mount(2) on a /dev/fuse file of aifs's own (root only, as
	// DirectMount), so that Server.Conn can hand the connection to a keeper process, which
	// gives it to the next daemon if this one dies (conn_linux.go). Default: false.
	Handover bool
	// Conn, if not nil, is the connection of a live mount at mountpoint, handed over from a
	// daemon that served it before: Mount mounts nothing and serves it. Default: nil.
	Conn *Conn
}

// maxRead is the largest READ the kernel may send (the kernel caps it at its own maximum, 1 MiB
// on Linux 4.20+). The kernel's read-ahead is left at its 128 KiB: a READ of a sample's first
// 128 KiB pushes the rest of it into the page cache (prefetch's readHead), and a large file is
// read ahead as ext4 reads it (a 1 MiB read-ahead read 8 times the bytes for each random page
// fault of a memory-mapped file).
const maxRead = 1 << 20

// maxBackground bounds the asynchronous requests (read-ahead) the kernel keeps in flight; it is
// sized for 32+ parallel readers. go-fuse's default is 12.
const maxBackground = 64

// Server is a live mount of an FS.
type Server struct {
	srv  *fuse.Server
	conn *Conn  // with MountOptions.Handover or Conn; nil otherwise
	mnt  string // the absolute mountpoint
}

// Wait returns when the file system has been unmounted (by Unmount, umount or fusermount3 -u)
// and every request has been answered.
func (s *Server) Wait() { s.srv.Wait() }

// Unmount unmounts the file system and waits for the server to stop. It fails (EBUSY) while
// files in the mount are open or it is some process's working directory.
func (s *Server) Unmount() error {
	if s.conn == nil {
		return s.srv.Unmount()
	}
	// go-fuse does not know the mountpoint of a connection it was handed (conn_linux.go).
	if err := unix.Unmount(s.mnt, 0); err != nil {
		return fmt.Errorf("umount %s: %w", s.mnt, err)
	}
	s.srv.Wait()
	return nil
}

// Conn returns the mount's FUSE connection, to hand to a keeper, or nil if the mount was made
// without MountOptions.Handover.
func (s *Server) Conn() *Conn { return s.conn }

// Mount mounts f read-only at mountpoint and starts serving it in the background. It returns
// when the mount is live (the kernel has sent INIT) or has failed. The caller waits for the
// server to end with Server.Wait and closes f afterwards.
func Mount(f *FS, mountpoint string, opt MountOptions) (*Server, error) {
	name := opt.FsName
	if name == "" {
		name = "aifs"
	}
	mo := &fuse.MountOptions{
		AllowOther: opt.AllowOther,
		// default_permissions makes the kernel check modes itself, so no ACCESS requests come.
		// ro (MS_RDONLY) makes it refuse every open for writing, writable shared mapping and
		// truncate, for every user, root included, before any reaches aifs: with OPEN answered
		// ENOSYS (no-open mode) aifs never sees an open, so only the kernel can refuse one.
		// Plans come by ioctl (plan.go), which a read-only mount allows.
		Options:                  []string{"default_permissions", "ro"},
		MaxBackground:            maxBackground,
		MaxWrite:                 maxRead,
		MaxReadAhead:             maxRead,
		FsName:                   name,
		Name:                     "aifs",
		DirectMount:              opt.DirectMount,
		Debug:                    opt.Debug,
		ExplicitDataCacheControl: true, // the data never changes: no invalidation on mtime
		DisableSplice:            true, // READ data is already in the request buffer
	}
	abs, err := filepath.Abs(mountpoint)
	if err != nil {
		abs = mountpoint
	}
	s := &Server{conn: opt.Conn, mnt: abs}
	if s.conn == nil && opt.Handover {
		if s.conn, err = mountConn(abs, name, mo.Options, opt.AllowOther); err != nil {
			return nil, err
		}
	}
	if s.conn != nil {
		s.srv, err = serveConn(f, s.conn, mo, opt.Conn == nil)
		if err != nil && opt.Conn == nil {
			unix.Unmount(abs, 0)
			s.conn.File.Close()
		}
	} else {
		s.srv, err = fuse.NewServer(f, mountpoint, mo)
	}
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	f.mnt = abs
	f.srv.Store(s.srv) // publishes f.mnt too
	go s.srv.Serve()
	if err := s.srv.WaitMount(); err != nil {
		s.Unmount()
		return nil, fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	done := make(chan struct{})
	go func() { s.srv.Wait(); close(done) }()
	go f.guardReadOnly(f.mnt, done) // ends with the server
	return s, nil
}
