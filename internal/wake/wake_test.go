package wake

import (
	"errors"
	"syscall"
	"testing"
	"time"
)

// readable waits up to d for fd (non-blocking) to read end of file, the write end closed.
func readable(fd int, d time.Duration) bool {
	var b [1]byte
	for end := time.Now().Add(d); ; time.Sleep(time.Millisecond) {
		n, err := syscall.Read(fd, b[:])
		if n == 0 && err == nil {
			return true
		}
		if !errors.Is(err, syscall.EAGAIN) || time.Now().After(end) {
			return false
		}
	}
}

// TestPipe: the descriptor reads nothing until stop is closed, and end of file at once then.
func TestPipe(t *testing.T) {
	stop := make(chan struct{})
	fd, release, err := Pipe(stop)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if err := syscall.SetNonblock(fd, true); err != nil {
		t.Fatal(err)
	}
	if readable(fd, 50*time.Millisecond) {
		t.Fatal("the pipe's write end closed before stop")
	}
	close(stop)
	if !readable(fd, 5*time.Second) {
		t.Fatal("the pipe's write end still open 5 s after stop")
	}
}

// TestPipeRelease: release before stop ends the waiting goroutine (the write end is closed).
func TestPipeRelease(t *testing.T) {
	fd, release, err := Pipe(make(chan struct{}))
	if err != nil {
		t.Fatal(err)
	}
	dup, err := syscall.Dup(fd) // a second read end, to see the write end close
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(dup)
	if err := syscall.SetNonblock(dup, true); err != nil {
		t.Fatal(err)
	}
	release()
	if !readable(dup, 5*time.Second) {
		t.Fatal("the pipe's write end still open 5 s after release")
	}
}
