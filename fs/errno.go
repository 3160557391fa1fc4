package fs

import (
	"context"
	"errors"
	iofs "io/fs"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/aifs/aifs/backend"
)

// errnoOf is the one translation of an aifs error into the errno a FUSE request returns.
// Cancellation is EINTR; an errno from the OS is passed through; everything else — a shard
// that vanished or changed, a read outside a shard, storage that does not answer, a closed
// backend — is EIO, because the reader can do nothing about it but report it.
func errnoOf(err error) fuse.Status {
	var errno syscall.Errno
	switch {
	case err == nil:
		return fuse.OK
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fuse.EINTR
	case errors.Is(err, backend.ErrNotExist), errors.Is(err, backend.ErrMismatch),
		errors.Is(err, backend.ErrOutOfRange), errors.Is(err, backend.ErrUnavailable), errors.Is(err, iofs.ErrClosed):
		return fuse.EIO
	case errors.As(err, &errno) && errno != 0:
		return fuse.Status(errno)
	default:
		return fuse.EIO
	}
}
