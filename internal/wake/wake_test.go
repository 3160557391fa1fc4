package wake

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestPipe: the descriptor is not readable until stop is closed, and is then, at once.
func TestPipe(t *testing.T) {
	stop := make(chan struct{})
	fd, release, err := Pipe(stop)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	if n, err := unix.Poll(fds, 50); err != nil || n != 0 {
		t.Fatalf("poll before stop = %d, %v; want nothing ready", n, err)
	}
	close(stop)
	start := time.Now()
	if n, err := unix.Poll(fds, 5000); err != nil || n != 1 {
		t.Fatalf("poll after stop = %d, %v; want the pipe ready", n, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the pipe became ready %v after stop", d)
	}
}

// TestPipeRelease: release before stop ends the waiting goroutine (the write end is closed).
func TestPipeRelease(t *testing.T) {
	stop := make(chan struct{})
	fd, release, err := Pipe(stop)
	if err != nil {
		t.Fatal(err)
	}
	// Keep a duplicate of the read end to see the write end close.
	dup, err := unix.Dup(fd)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dup)
	release()
	fds := []unix.PollFd{{Fd: int32(dup), Events: unix.POLLIN}}
	if n, err := unix.Poll(fds, 5000); err != nil || n != 1 {
		t.Fatalf("poll after release = %d, %v; want the write end closed", n, err)
	}
}
