package kernel

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/aifs/aifs/internal/mountinfo"
	"github.com/aifs/aifs/internal/wake"
)

// goneRecheck is how often WaitGone looks at the mount itself, beside IN_UNMOUNT.
const goneRecheck = time.Second

// FSType is the file system type of a kernel plane mount.
const FSType = "erofs"

// Mount mounts the EROFS image at mountpoint, read-only, nosuid and nodev, backed by files:
// the image itself and devices, in order, as its devices 1..N (the shards). With directio the
// kernel reads the devices with O_DIRECT, so their bytes are cached once, as the mount's file
// pages. It uses the new mount API (fsopen, fsconfig, fsmount, move_mount): mount(8) puts a
// loop device under a regular file and then refuses device=, and mount(2)'s option string is
// one page, too short for many shards. A refusal is an error wrapping ErrUnsupported where the
// kernel lacks EROFS or file-backed mounts, with the kernel's own message where it gave one.
func Mount(image string, devices []string, mountpoint string, directio bool) error {
	fd, err := unix.Fsopen(FSType, unix.FSOPEN_CLOEXEC)
	if err != nil {
		if errors.Is(err, unix.ENODEV) {
			return fmt.Errorf("%w: the kernel has no EROFS (fsopen erofs: %v)", ErrUnsupported, err)
		}
		return fmt.Errorf("fsopen erofs: %w", err)
	}
	defer unix.Close(fd)
	fail := func(what string, err error) error {
		if msg := kernelLog(fd); msg != "" {
			return fmt.Errorf("%s: %w (kernel: %s)", what, err, msg)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := unix.FsconfigSetString(fd, "source", image); err != nil {
		return fail("erofs source="+image, err)
	}
	for _, d := range devices {
		if err := unix.FsconfigSetString(fd, "device", d); err != nil {
			return fail("erofs device="+d, err)
		}
	}
	if directio {
		if err := unix.FsconfigSetFlag(fd, "directio"); err != nil {
			return fail("erofs directio", err)
		}
	}
	if err := unix.FsconfigCreate(fd); err != nil {
		if errors.Is(err, unix.ENOTBLK) {
			return fmt.Errorf("%w: %v", ErrUnsupported, fail("erofs mount of file "+image+" (the kernel mounts EROFS from block devices only; file-backed mounts came in Linux 6.12)", err))
		}
		return fail("erofs mount", err)
	}
	mfd, err := unix.Fsmount(fd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return fail("fsmount", err)
	}
	defer unix.Close(mfd)
	if err := unix.MoveMount(mfd, "", unix.AT_FDCWD, mountpoint, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount to %s: %w", mountpoint, err)
	}
	return nil
}

// ReadAhead is the read-ahead window the kernel plane gives its mount (SetReadAhead): a sample
// of up to 1 MiB, a chunk read's size (prefetch.DefaultChunkBytes), is read in one request,
// by its reader's first read or by the plane's WillNeed. A file-backed EROFS mount has a
// backing device info of its own at 128 KiB, and the kernel caps a POSIX_FADV_WILLNEED at the
// window, so a WillNeed of a larger sample read its first 128 KiB only
// (docs/kernel.md, "Read-ahead window").
const ReadAhead = 1 << 20

// SetReadAhead sets the read-ahead window of the file-backed EROFS mount at mountpoint to
// bytes, rounded up to KiB: its backing device info, /sys/class/bdi/NAME/read_ahead_kb, where
// NAME is the mount's name in sysfs (FS_IOC_GETFSSYSFSPATH: "erofs/NAME"; a file-backed
// mount's backing device info takes the same name).
func SetReadAhead(mountpoint string, bytes int64) error {
	f, err := os.Open(mountpoint)
	if err != nil {
		return err
	}
	defer f.Close()
	var p struct {
		n    uint8
		name [128]byte
	}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), fsIocGetFSSysfsPath, uintptr(unsafe.Pointer(&p))); errno != 0 {
		return fmt.Errorf("read-ahead of %s: FS_IOC_GETFSSYSFSPATH: %w", mountpoint, errno)
	}
	sysfs := string(p.name[:min(int(p.n), len(p.name))])
	fstype, name, _ := strings.Cut(sysfs, "/")
	if fstype != FSType || name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
		return fmt.Errorf("read-ahead of %s: not a file-backed EROFS mount (sysfs name %q)", mountpoint, sysfs)
	}
	knob := "/sys/class/bdi/" + name + "/read_ahead_kb"
	if err := os.WriteFile(knob, []byte(strconv.FormatInt((bytes+1023)/1024, 10)), 0); err != nil {
		return fmt.Errorf("read-ahead of %s: %w", mountpoint, err)
	}
	return nil
}

// fsIocGetFSSysfsPath is FS_IOC_GETFSSYSFSPATH (Linux 6.8): _IOR(0x15, 1, struct
// fs_sysfs_path), a length byte and 128 bytes of name.
const fsIocGetFSSysfsPath = 0x80811501

// ErrUnsupported is wrapped by Mount's error when the running kernel cannot mount the plane.
var ErrUnsupported = errors.New("the kernel data plane is not available")

// kernelLog returns the messages the kernel left on fs context fd, one line.
func kernelLog(fd int) string {
	var msgs []string
	buf := make([]byte, 1024)
	for {
		n, err := unix.Read(fd, buf)
		if err != nil || n <= 0 {
			break
		}
		msgs = append(msgs, strings.TrimSpace(string(buf[:n])))
	}
	return strings.Join(msgs, "; ")
}

// Unmount unmounts the plane at mountpoint; if files are open in it, it detaches it instead
// (MNT_DETACH): their readers go on reading, the kernel serves them, and the mount goes with the
// last of them.
func Unmount(mountpoint string) error {
	err := unix.Unmount(mountpoint, 0)
	if errors.Is(err, unix.EBUSY) {
		err = unix.Unmount(mountpoint, unix.MNT_DETACH)
	}
	if err != nil {
		return fmt.Errorf("umount %s: %w", mountpoint, err)
	}
	return nil
}

// Available reports why this process cannot mount the kernel plane, or nil if it can as far as
// can be told without mounting: it needs CAP_SYS_ADMIN and EROFS in the running kernel (whether
// the kernel mounts EROFS from files shows only at Mount, as ErrUnsupported).
func Available() error {
	if os.Geteuid() != 0 {
		var hdr = unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil || data[0].Effective&(1<<unix.CAP_SYS_ADMIN) == 0 {
			return fmt.Errorf("%w: mounting EROFS needs root (CAP_SYS_ADMIN)", ErrUnsupported)
		}
	}
	b, err := os.ReadFile("/proc/filesystems")
	if err == nil && !hasFS(string(b), FSType) {
		// Not loaded yet, maybe: fsopen loads the module.
		fd, err := unix.Fsopen(FSType, unix.FSOPEN_CLOEXEC)
		if err != nil {
			return fmt.Errorf("%w: the kernel has no EROFS (fsopen erofs: %v)", ErrUnsupported, err)
		}
		unix.Close(fd)
	}
	return nil
}

// hasFS reports whether /proc/filesystems text lists fstype.
func hasFS(text, fstype string) bool {
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[len(f)-1] == fstype {
			return true
		}
	}
	return false
}

// Dev returns the device number of the file system at path as "major:minor", as
// /proc/self/mountinfo writes it.
func Dev(path string) (string, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev)), nil
}

// WaitGone returns when the file system mounted at mnt, device dev ("major:minor"), is
// unmounted (a user's umount), or once stop is closed. It waits for inotify's IN_UNMOUNT on the
// mount's root: the mount table's POLLPRI, which the read-only guard uses for remounts, was not
// raised for an umount in 5 of 6 tries on Linux 6.18. The watch holds the root's inode, not the
// mount: it never makes an umount busy. IN_UNMOUNT comes when the superblock ends, which is
// later than the umount where another mount of it lives on (a bind mount, a copy propagated
// into another mount namespace), so WaitGone also looks in the mount table every goneRecheck
// for mnt no longer being dev.
func WaitGone(stop <-chan struct{}, mnt, dev string) error {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return fmt.Errorf("inotify_init: %w", err)
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, mnt, unix.IN_UNMOUNT|unix.IN_ONLYDIR); err != nil {
		return fmt.Errorf("inotify_add_watch %s: %w", mnt, err)
	}
	end, release, err := wake.Pipe(stop)
	if err != nil {
		return err
	}
	defer release()
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(end), Events: unix.POLLIN}}
	buf := make([]byte, 4096)
	for {
		n, err := unix.Poll(fds, int(goneRecheck.Milliseconds()))
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return fmt.Errorf("poll inotify: %w", err)
		case fds[1].Revents != 0:
			return nil
		case n == 0: // the table, not a stat of mnt: that would make an umount busy meanwhile
			if m, ok := mountinfo.At(mnt); !ok || m.Dev != dev {
				return nil
			}
			continue
		}
		n, err = unix.Read(fd, buf)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read inotify: %w", err)
		}
		for b := buf[:n]; len(b) >= unix.SizeofInotifyEvent; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[0]))
			if ev.Mask&(unix.IN_UNMOUNT|unix.IN_IGNORED) != 0 {
				return nil
			}
			b = b[unix.SizeofInotifyEvent+int(ev.Len):]
		}
	}
}

// EndWatch sees the end of a kernel plane's superblock: inotify's IN_UNMOUNT on its root, which
// comes once no mount of it is left and the last file open in it is closed (a detached plane
// lives on while its readers read). Until then a Filler must answer its reads.
type EndWatch struct {
	fd    int
	ended bool
}

// WatchEnd starts watching the end of the plane mounted at mnt.
func WatchEnd(mnt string) (*EndWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify_init: %w", err)
	}
	if _, err := unix.InotifyAddWatch(fd, mnt, unix.IN_UNMOUNT|unix.IN_ONLYDIR); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("inotify_add_watch %s: %w", mnt, err)
	}
	return &EndWatch{fd: fd}, nil
}

// Ended reports whether the superblock has ended, without waiting.
func (w *EndWatch) Ended() bool { return w.poll(0) }

// Wait returns once the superblock has ended.
func (w *EndWatch) Wait() {
	for !w.poll(-1) {
	}
}

// poll waits up to timeout ms (-1: without end) for the end, and reports whether it came.
func (w *EndWatch) poll(timeout int) bool {
	if w.ended {
		return true
	}
	p := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}
	if n, err := unix.Poll(p, timeout); n <= 0 || err != nil {
		return false
	}
	buf := make([]byte, 4096)
	n, err := unix.Read(w.fd, buf)
	for b := buf[:max(n, 0)]; err == nil && len(b) >= unix.SizeofInotifyEvent; {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[0]))
		if ev.Mask&(unix.IN_UNMOUNT|unix.IN_IGNORED) != 0 {
			w.ended = true
		}
		b = b[unix.SizeofInotifyEvent+int(ev.Len):]
	}
	return w.ended
}

// Close ends the watch.
func (w *EndWatch) Close() { unix.Close(w.fd) }
