// Package wake gives a poll(2) loop a descriptor that becomes readable when a channel is
// closed, so that one poll waits for the loop's own descriptors and for its end together
// (kernel.WaitGone, mountinfo.Watch).
package wake

import (
	"fmt"
	"syscall"
)

// Pipe returns the read end of a pipe, to poll for POLLIN beside other descriptors: the write
// end is closed, and the read end becomes readable (end of file), once stop is closed. The
// caller calls release when its loop ends, stop closed or not; release closes the read end and
// ends the goroutine that waits for stop.
func Pipe(stop <-chan struct{}) (fd int, release func(), err error) {
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		return -1, nil, fmt.Errorf("pipe: %w", err)
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-stop:
		case <-done:
		}
		syscall.Close(p[1])
	}()
	return p[0], func() {
		close(done)
		syscall.Close(p[0])
	}, nil
}
