package fs

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

	"github.com/hanwen/go-fuse/v2/fuse"
	"go.uber.org/zap"
)

// Plans reach the daemon by ioctl, not by write: the kernel mount is read-only (MS_RDONLY), so
// that no open for writing, writable shared mapping or truncate can ever change what readers
// see, for any user, root included. A trainer opens MOUNTPOINT/.aifs/plan read-only and sends the
// plan (format in prefetch/plan.go) in pieces of up to PlanChunk bytes, each one PlanIoctl whose
// argument is
//
//	struct { uint32 len; uint32 flags; uint8 data[PlanChunk]; }   // little-endian, 16,376 bytes
//
// len is the bytes of data used; flags PlanStart marks the first piece of a new plan, which
// replaces the sending thread's previous plan; later pieces append to it. The kernel copies the
// whole argument into the request (a FUSE ioctl on a regular file is "restricted": its size is
// the one the command encodes, at most 16,383 bytes). Answers: 0, EINVAL for a bad plan (the
// samples before the bad line stay planned), EPERM on a mount with -o plans=off, ENOTTY for any
// other command. python/aifs_plan.py and SendPlan are the two senders.
const (
	// PlanChunk is the most plan bytes one PlanIoctl carries.
	PlanChunk = 16368
	planArg   = 8 + PlanChunk
	// PlanIoctl is _IOW(0xA1, 1, planArg) in Linux's generic encoding (x86-64, arm64).
	PlanIoctl = 1<<30 | planArg<<16 | 0xA1<<8 | 1
	// PlanStart, in the flags of a piece, starts a new plan.
	PlanStart = 1
)

// ioctlPlan takes one piece of a plan from the writing thread writer.
func (c *control) ioctlPlan(writer uint32, arg []byte) fuse.Status {
	if c.f.opt.NoPlans {
		return fuse.EPERM
	}
	if len(arg) < planArg {
		return fuse.EINVAL
	}
	n, flags := binary.LittleEndian.Uint32(arg), binary.LittleEndian.Uint32(arg[4:])
	if n > PlanChunk || flags&^PlanStart != 0 {
		return fuse.EINVAL
	}
	if err := c.f.loader.WritePlan(writer, flags&PlanStart != 0, arg[8:8+n]); err != nil {
		c.f.log.Warn("plan refused", zap.Uint32("pid", writer), zap.Error(err))
		return fuse.EINVAL
	}
	return fuse.OK
}

// ErrNoPlanFile: the directory given to SendPlan is not the root of an aifs mount.
var ErrNoPlanFile = errors.New("not the root of an aifs mount (no .aifs/plan)")

// SendPlan sends the plan read from r (format in prefetch/plan.go) to the aifs mount whose root
// is mountRoot, replacing the plan this thread sent before. It fails with an error wrapping
// ErrNoPlanFile if mountRoot is not an aifs mount root, syscall.EINVAL if the mount refused the
// plan's content, and syscall.EPERM if the mount takes no plans (-o plans=off).
func SendPlan(mountRoot string, r io.Reader) error {
	name := filepath.Join(mountRoot, ctlName, planName)
	f, err := os.Open(name)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("send plan to %s: %w", mountRoot, ErrNoPlanFile)
	} else if err != nil {
		return fmt.Errorf("send plan: %w", err)
	}
	defer f.Close()
	// The mount keys plans by the sending thread: every piece must come from the same one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var arg [planArg]byte
	for flags := uint32(PlanStart); ; flags = 0 {
		n, rerr := io.ReadFull(r, arg[8:])
		if rerr != nil && rerr != io.EOF && rerr != io.ErrUnexpectedEOF {
			return fmt.Errorf("send plan to %s: %w", mountRoot, rerr)
		}
		if n == 0 && flags == 0 {
			return nil
		}
		binary.LittleEndian.PutUint32(arg[:], uint32(n))
		binary.LittleEndian.PutUint32(arg[4:], flags)
		_, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), PlanIoctl, uintptr(unsafe.Pointer(&arg)))
		switch e {
		case 0:
		case syscall.ENOTTY: // a file named .aifs/plan elsewhere
			return fmt.Errorf("send plan to %s: %w", mountRoot, ErrNoPlanFile)
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
