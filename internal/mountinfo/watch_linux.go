package mountinfo

import (
	"io"
	"os"
	"syscall"
	"time"
	"unsafe"

	"github.com/aifs/aifs/internal/wake"
)

// Watch calls fn with the mount table (a copy of File) now and again after each change of it,
// until fn returns false or stop is closed; then it returns nil. It sleeps in between: the kernel
// flags the open table with POLLPRI when a mount comes or goes or changes, and the table is read
// again then, and at least every recheck: the kernel does not flag every change (an umount went
// unflagged 5 times in 6 on Linux 6.18, and under load a remount,rw once in a full test run). A
// failure to open or read the table is returned.
func Watch(stop <-chan struct{}, fn func(table []byte) bool) error {
	file, err := os.Open(File)
	if err != nil {
		return err
	}
	defer file.Close()
	end, release, err := wake.Pipe(stop)
	if err != nil {
		return err
	}
	defer release()
	for {
		if _, err := file.Seek(0, io.SeekStart); err != nil {
			return err
		}
		table, err := io.ReadAll(file)
		if err != nil {
			return err
		}
		if !fn(table) || !waitChange(file, end) {
			return nil
		}
	}
}

// recheck bounds the wait for a change the kernel may not flag: one read of the table a second.
const recheck = time.Second

// waitChange waits until the table open as file changes, or recheck passes, and returns true;
// or, once stop (wake.Pipe's) is readable, false.
func waitChange(file *os.File, stop int) bool {
	type pollFd struct {
		fd             int32
		events, revent int16
	}
	const pollIn, pollPri, pollErr = 0x1, 0x2, 0x8
	fds := [2]pollFd{{fd: int32(file.Fd()), events: pollPri}, {fd: int32(stop), events: pollIn}}
	ts := syscall.NsecToTimespec(int64(recheck))
	for {
		fds[0].revent, fds[1].revent = 0, 0
		n, _, errno := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), 2, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		switch {
		case errno == syscall.EINTR:
		case errno != 0 || fds[1].revent != 0:
			return false
		case n == 0 || fds[0].revent&(pollPri|pollErr) != 0: // a recheck, or a change
			return true
		}
	}
}
