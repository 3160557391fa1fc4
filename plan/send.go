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
	name := filepath.Join(mountRoot, ControlDir, ControlFile)
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
