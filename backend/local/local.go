// Package local reads the shards of a shard set from a local directory. Reads use O_DIRECT, so
// shard bytes bypass the page cache (aifs caches samples itself; docs/design.md): each read is widened
// to the file's direct-I/O alignment and served through pooled aligned buffers
// (direct_linux.go). Where the filesystem refuses O_DIRECT (ramfs, some FUSE and network
// filesystems, non-Linux builds), the Backend says so once through Options.Logger and reads
// through the page cache instead.
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aifs/aifs/backend"
	"github.com/aifs/aifs/layout"
)

// Options configure a Backend. The zero value is ready to use.
type Options struct {
	// Logger receives one notice per Backend, the first time the filesystem refuses O_DIRECT
	// and reads fall back to buffered reads through the page cache. Default: discard.
	Logger func(msg string)
}

// Backend reads the shards of the shard set in one directory. It is safe for concurrent use
// and holds no file descriptors of its own: each Shard owns one.
type Backend struct {
	dir      string
	logger   func(string)
	buffered atomic.Bool // O_DIRECT was refused: later Opens go straight to buffered reads
	notice   sync.Once   // the one Logger notice
	closed   atomic.Bool
}

var _ backend.Backend = (*Backend)(nil)

// New returns a Backend for the shard-set directory dir, which must exist.
func New(dir string, opt Options) (*Backend, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("local: %s is not a directory", dir)
	}
	b := &Backend{dir: dir, logger: opt.Logger}
	if b.logger == nil {
		b.logger = func(string) {}
	}
	return b, nil
}

// errRefused marks an openDirect error meaning that the filesystem will not do O_DIRECT for
// the file; Open then falls back to buffered reads.
var errRefused = errors.New("O_DIRECT refused")

// Open implements backend.Backend. It checks the shard with stat before opening it, so a
// missing or mismatched shard never counts as a refusal of O_DIRECT.
func (b *Backend) Open(ctx context.Context, s layout.Shard) (backend.Shard, error) {
	if b.closed.Load() {
		return nil, fmt.Errorf("local: open %s: %w", s.Name, fs.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("local: open %s: %w", s.Name, err)
	}
	if s.Kind != layout.ShardTar && !layout.ValidName([]byte(s.Name)) {
		return nil, fmt.Errorf("local: open %q: not a shard name: %w", s.Name, backend.ErrNotExist)
	}
	path := layout.ShardPath(b.dir, s)
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("local: open %s: %w", path, backend.ErrNotExist)
	case err != nil:
		return nil, fmt.Errorf("local: %w", err)
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("local: %s is not a regular file: %w", path, backend.ErrMismatch)
	case uint64(fi.Size()) != s.Size:
		return nil, fmt.Errorf("local: %s has %d bytes, the index says %d: %w", path, fi.Size(), s.Size, backend.ErrMismatch)
	case s.Version != "" && s.Version != strconv.FormatInt(fi.ModTime().UnixNano(), 10):
		return nil, fmt.Errorf("local: %s was modified after it was indexed (mtime %s; index it again): %w",
			path, fi.ModTime().Format(time.RFC3339Nano), backend.ErrMismatch)
	}
	sh := &shard{path: path, size: fi.Size()}
	if !b.buffered.Load() {
		sh.r, err = openDirect(path, sh.size)
		if err == nil {
			return sh, nil
		}
		if !errors.Is(err, errRefused) {
			return nil, err
		}
		b.buffered.Store(true)
		b.notice.Do(func() { b.logger(fmt.Sprintf("local: %v; reading %s through the page cache", err, b.dir)) })
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	sh.r = buffered{f}
	return sh, nil
}

// Close implements backend.Backend: later Opens fail; open Shards are unaffected.
func (b *Backend) Close() error {
	b.closed.Store(true)
	return nil
}

// reader reads a whole window of an open shard file: buffered (below) or, with O_DIRECT,
// directFile (direct_linux.go). Close closes the file.
type reader interface {
	readAt(ctx context.Context, p []byte, off int64) error
	Close() error
}

// shard implements backend.Shard over a reader; the range checks happen here, once.
type shard struct {
	path   string
	size   int64
	r      reader
	closed atomic.Bool
}

func (s *shard) Size() int64 { return s.size }

func (s *shard) ReadAt(ctx context.Context, p []byte, off int64) error {
	err := s.check(ctx, off, len(p))
	if err == nil && len(p) > 0 {
		err = s.r.readAt(ctx, p, off)
	}
	if err != nil {
		return fmt.Errorf("local: read %s [%d,+%d): %w", s.path, off, len(p), err)
	}
	return nil
}

// check applies the range, closed and context rules of ReadAt to a read of n bytes at off.
func (s *shard) check(ctx context.Context, off int64, n int) error {
	switch {
	case s.closed.Load():
		return fs.ErrClosed
	case off < 0 || off > s.size || int64(n) > s.size-off:
		return backend.ErrOutOfRange
	}
	return ctx.Err()
}

// View implements backend.Viewer. Direct reads of up to maxChunk aligned bytes land in a pooled
// aligned buffer that is lent as is; other reads are copied into a pooled (or, beyond maxChunk,
// new) buffer.
func (s *shard) View(ctx context.Context, off int64, n int) (backend.View, error) {
	err := s.check(ctx, off, n)
	var v *buffer
	if err == nil {
		if d, ok := s.r.(interface {
			view(off int64, n int) (*buffer, error)
		}); ok && n > 0 {
			v, err = d.view(off, n)
		} else {
			v = getBuffer(n)
			v.lo, v.hi = 0, n
			if err = s.r.readAt(ctx, v.b[:n], off); err != nil {
				v.Release()
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("local: read %s [%d,+%d): %w", s.path, off, n, err)
	}
	return v, nil
}

func (s *shard) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	if err := s.r.Close(); err != nil {
		return fmt.Errorf("local: close %s: %w", s.path, err)
	}
	return nil
}

// buffered reads through the page cache: the fallback when O_DIRECT is refused.
type buffered struct{ *os.File }

func (b buffered) readAt(_ context.Context, p []byte, off int64) error {
	_, err := b.ReadAt(p, off)
	if errors.Is(err, io.EOF) { // the file shrank after Open
		err = io.ErrUnexpectedEOF
	}
	return err
}
