package plan

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"unsafe"
)

// ErrNoMount: the directory given to Send is not the root of an aifs mount.
var ErrNoMount = errors.New("not the root of an aifs mount (no " + ControlDir + "/" + ControlFile + ")")

// Send sends the plan read from r to the aifs mount whose root is mountRoot, replacing the plan
// this thread sent before. It fails with an error wrapping ErrNoMount if mountRoot is not an
// aifs mount root, syscall.EINVAL if the mount refused the plan's content, and syscall.EPERM if
// the mount takes no plans (-o plans=off).
func Send(mountRoot string, r io.Reader) error {
	name := filepath.Join(Control(mountRoot), ControlFile)
	f, err := os.Open(name)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("send plan to %s: %w", mountRoot, ErrNoMount)
	} else if err != nil {
		return fmt.Errorf("send plan: %w", err)
	}
	defer f.Close()
	// The mount keys plans by the sending thread: every piece must come from the same one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var arg [ArgBytes]byte
	for flags := uint32(FlagStart); ; flags = 0 {
		n, rerr := io.ReadFull(r, arg[8:])
		if rerr != nil && rerr != io.EOF && rerr != io.ErrUnexpectedEOF {
			return fmt.Errorf("send plan to %s: %w", mountRoot, rerr)
		}
		if n == 0 && flags == 0 {
			return nil
		}
		binary.LittleEndian.PutUint32(arg[:], uint32(n))
		binary.LittleEndian.PutUint32(arg[4:], flags)
		_, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), Ioctl, uintptr(unsafe.Pointer(&arg)))
		switch e {
		case 0:
		case syscall.ENOTTY: // a file named .aifs/plan elsewhere
			return fmt.Errorf("send plan to %s: %w", mountRoot, ErrNoMount)
		case syscall.EINVAL:
			return fmt.Errorf("send plan to %s: refused, a bad line (the mount's log names it): %w", mountRoot, e)
		case syscall.EPERM:
			return fmt.Errorf("send plan to %s: the mount takes no plans (-o plans=off): %w", mountRoot, e)
		default:
			return fmt.Errorf("send plan to %s: %w", mountRoot, e)
		}
		if rerr != nil {
			return nil
		}
	}
}

// Control returns the control directory of the aifs mount whose root is mountRoot: its
// ControlDir on the FUSE plane; on the kernel data plane, whose tree has none, ControlDir in
// the control mount at KernelControlRoot/MAJOR:MINOR, by the device number of mountRoot. Where
// neither exists it returns the first (an open of a file in it then fails: ErrNotExist).
func Control(mountRoot string) string {
	own := filepath.Join(mountRoot, ControlDir)
	if _, err := os.Lstat(own); err == nil {
		return own
	}
	var st syscall.Stat_t
	if syscall.Stat(mountRoot, &st) == nil {
		dev := uint64(st.Dev)
		major, minor := (dev>>8)&0xfff|(dev>>32)&^0xfff, dev&0xff|(dev>>12)&^0xff // Linux's encoding
		k := filepath.Join(KernelControlRoot, fmt.Sprintf("%d:%d", major, minor), ControlDir)
		if _, err := os.Lstat(k); err == nil {
			return k
		}
	}
	return own
}
