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

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/aifs/aifs/backend"
)

// TestErrnoOf is the table of errno.go: cancellation is EINTR, an OS errno passes through, and
// everything else, however wrapped, is EIO (never ENOSYS or ENOTSUP, as go-fuse's ToErrno gives
// for a wrapped os.ErrNotExist).
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
		{wrap(syscall.ENOSPC), fuse.Status(syscall.ENOSPC)},
		{wrap(&os.PathError{Op: "pread", Path: "/shards/x", Err: syscall.EBADF}), fuse.Status(syscall.EBADF)},
		// A backend sentinel wins over the OS errno under it.
		{fmt.Errorf("%w: %w", backend.ErrNotExist, syscall.ENOENT), fuse.EIO},
		{wrap(fmt.Errorf("%w: dial tcp: %w", backend.ErrUnavailable, syscall.ECONNREFUSED)), fuse.EIO},
	} {
		if got := errnoOf(c.err); got != c.want {
			t.Errorf("errnoOf(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
