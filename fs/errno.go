package fs

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"go.uber.org/zap"

	"github.com/aifs/aifs/layout"
)

// errnoOf is the one translation of an aifs error into the errno a FUSE request returns.
// Cancellation (the kernel interrupted the request) is EINTR. Everything else — a shard that
// vanished or changed, a read outside a shard, storage that does not answer, a corrupt sample,
// a closed backend, any errno of the daemon's own files — is EIO: the reader of a read-only
// tree can do nothing about it but report it, and an errno such as ENOSPC or EBADF would send
// it looking for a fault of its own.
func errnoOf(err error) fuse.Status {
	switch {
	case err == nil:
		return fuse.OK
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fuse.EINTR
	default:
		return fuse.EIO
	}
}

// errno returns the errno of err, a failure of op on sample id, and logs it (with the op, the
// sample's path and id, and err, which names the shard and range) unless it is a cancellation
// or the sample's failure was logged less than failLogInterval ago: a sample that fails fails on
// every READ of it, and a storage outage fails every sample, so the log says each once. The
// request statistics count every failure.
func (f *FS) errno(op string, id layout.ID, err error) fuse.Status {
	st := errnoOf(err)
	if st == fuse.EINTR {
		return st
	}
	if skipped, ok := f.failures.admit(id, time.Now()); ok {
		f.log.Error("request failed", zap.String("op", op), zap.String("path", f.x.Path(id)),
			zap.Uint32("id", uint32(id)), zap.String("errno", syscall.Errno(st).Error()),
			zap.Uint64("failures_not_logged", skipped), zap.Error(err))
	}
	return st
}

// failLog decides which failures are logged: a sample's first, then at most one a
// failLogInterval, for at most failLogSamples samples in an interval (a whole outage).
type failLog struct {
	mu      sync.Mutex // guards last and skipped
	last    map[layout.ID]time.Time
	skipped uint64 // failures not logged since the last line
}

const (
	failLogInterval = 10 * time.Minute
	failLogSamples  = 4096
)

// admit reports whether a failure of sample id at now is logged and, if so, how many failures
// were not logged since the previous line.
func (l *failLog) admit(id layout.ID, now time.Time) (skipped uint64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last = make(map[layout.ID]time.Time)
	}
	if t, seen := l.last[id]; seen && now.Sub(t) < failLogInterval {
		l.skipped++
		return 0, false
	}
	if len(l.last) >= failLogSamples {
		for sid, t := range l.last {
			if now.Sub(t) >= failLogInterval {
				delete(l.last, sid)
			}
		}
		if len(l.last) >= failLogSamples {
			l.skipped++
			return 0, false
		}
	}
	l.last[id] = now
	skipped, l.skipped = l.skipped, 0
	return skipped, true
}
