package fs

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/aifs/aifs/backend"
	"github.com/aifs/aifs/layout"
)

// TestErrnoOf is the table of errno.go: cancellation is EINTR and everything else, however
// wrapped, is EIO, an OS errno of the daemon's own files included (never ENOSPC or EBADF, nor
// ENOSYS or ENOTSUP, as go-fuse's ToErrno gives for a wrapped os.ErrNotExist).
func TestErrnoOf(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("s3: read shard [0,+1): %w", fmt.Errorf("retry 3: %w", err)) }
	for _, c := range []struct {
		err  error
		want fuse.Status
	}{
		{nil, fuse.OK},
		{context.Canceled, fuse.EINTR},
		{context.DeadlineExceeded, fuse.EINTR},
		{wrap(context.Canceled), fuse.EINTR},
		{wrap(context.DeadlineExceeded), fuse.EINTR},
		{errors.Join(backend.ErrOutOfRange, context.Canceled), fuse.EINTR},
		{backend.ErrNotExist, fuse.EIO},
		{wrap(backend.ErrNotExist), fuse.EIO},
		{wrap(backend.ErrMismatch), fuse.EIO},
		{wrap(backend.ErrOutOfRange), fuse.EIO},
		{wrap(iofs.ErrClosed), fuse.EIO},
		{wrap(os.ErrNotExist), fuse.EIO},
		{wrap(os.ErrPermission), fuse.EIO},
		{wrap(io.ErrUnexpectedEOF), fuse.EIO},
		{errors.New("anything"), fuse.EIO},
		{wrap(syscall.Errno(0)), fuse.EIO},
		{syscall.EIO, fuse.EIO},
		{wrap(syscall.ENOSPC), fuse.EIO},
		{wrap(&os.PathError{Op: "pread", Path: "/shards/x", Err: syscall.EBADF}), fuse.EIO},
		{wrap(syscall.EINTR), fuse.EIO}, // an interrupted syscall of the daemon's is not the reader's interrupt
		// A backend sentinel wins over the OS errno under it.
		{fmt.Errorf("%w: %w", backend.ErrNotExist, syscall.ENOENT), fuse.EIO},
		{wrap(fmt.Errorf("%w: dial tcp: %w", backend.ErrUnavailable, syscall.ECONNREFUSED)), fuse.EIO},
	} {
		if got := errnoOf(c.err); got != c.want {
			t.Errorf("errnoOf(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestFailLog: a sample's failure is logged the first time and then at most once a
// failLogInterval; at most failLogSamples samples are logged in an interval; each line says how
// many failures went unlogged since the previous one.
func TestFailLog(t *testing.T) {
	var l failLog
	t0 := time.Unix(1e9, 0)
	if _, ok := l.admit(1, t0); !ok {
		t.Fatal("the first failure of sample 1 is not logged")
	}
	for i := range 3 {
		if _, ok := l.admit(1, t0.Add(time.Duration(i)*time.Minute)); ok {
			t.Errorf("failure %d of sample 1 within the interval is logged", i+2)
		}
	}
	if skipped, ok := l.admit(2, t0); !ok || skipped != 3 {
		t.Errorf("sample 2's first failure: logged %v, %d not logged before it; want true, 3", ok, skipped)
	}
	if skipped, ok := l.admit(1, t0.Add(failLogInterval)); !ok || skipped != 0 {
		t.Errorf("sample 1 after the interval: logged %v, skipped %d; want true, 0", ok, skipped)
	}
	logged := 0
	for id := range layout.ID(2 * failLogSamples) {
		if _, ok := l.admit(100+id, t0.Add(failLogInterval)); ok {
			logged++
		}
	}
	if logged != failLogSamples-1 { // sample 1 holds a place; sample 2's entry is a whole interval old
		t.Errorf("an outage of %d samples logged %d lines, want %d", 2*failLogSamples, logged, failLogSamples-1)
	}
	if _, ok := l.admit(5, t0.Add(3*failLogInterval)); !ok {
		t.Error("a failure after the outage's interval is not logged")
	}
}
