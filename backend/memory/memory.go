// Package memory holds the shards of a shard set as byte slices in memory. It is for tests and
// in-process mounts: it passes the same conformance suite as the real backends, does no I/O, and
// lends its bytes (backend.Viewer) without copying. Reads and views allocate nothing.
package memory

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/aifs/aifs/backend"
	"github.com/aifs/aifs/layout"
)

// Backend serves shards from memory. It is safe for concurrent use.
type Backend struct {
	files  map[string][]byte // shard name → contents; immutable after New
	closed atomic.Bool
}

var _ backend.Backend = (*Backend)(nil)

// New returns a Backend over files (shard name → contents). It copies the map but not the
// slices: the caller must not modify them while the Backend or its Shards are in use.
func New(files map[string][]byte) *Backend {
	return &Backend{files: maps.Clone(files)}
}

// Open implements backend.Backend.
func (b *Backend) Open(ctx context.Context, s layout.Shard) (backend.Shard, error) {
	if b.closed.Load() {
		return nil, fmt.Errorf("memory: open %q: %w", s.Name, fs.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memory: open %q: %w", s.Name, err)
	}
	data, ok := b.files[s.Name]
	switch {
	case !ok || !layout.ValidName([]byte(s.Name)):
		return nil, fmt.Errorf("memory: open %q: %w", s.Name, backend.ErrNotExist)
	case uint64(len(data)) != s.Size:
		return nil, fmt.Errorf("memory: %s has %d bytes, the index says %d: %w", s.Name, len(data), s.Size, backend.ErrMismatch)
	}
	return &shard{name: s.Name, data: data}, nil
}

// Close implements backend.Backend: later Opens fail; open Shards are unaffected.
func (b *Backend) Close() error {
	b.closed.Store(true)
	return nil
}

// shard implements backend.Shard and backend.Viewer over one byte slice.
type shard struct {
	name   string
	data   []byte
	closed atomic.Bool
}

func (s *shard) Size() int64 { return int64(len(s.data)) }

func (s *shard) ReadAt(ctx context.Context, p []byte, off int64) error {
	if err := s.check(ctx, off, len(p)); err != nil {
		return fmt.Errorf("memory: read %s [%d,+%d): %w", s.name, off, len(p), err)
	}
	copy(p, s.data[off:])
	return nil
}

// View implements backend.Viewer: the View lends the shard's own bytes.
func (s *shard) View(ctx context.Context, off int64, n int) (backend.View, error) {
	if err := s.check(ctx, off, n); err != nil {
		return nil, fmt.Errorf("memory: read %s [%d,+%d): %w", s.name, off, n, err)
	}
	v := views.Get().(*view)
	v.b = s.data[off : off+int64(n) : off+int64(n)]
	return v, nil
}

// check applies the range, closed and context rules of ReadAt to a read of n bytes at off.
func (s *shard) check(ctx context.Context, off int64, n int) error {
	switch {
	case s.closed.Load():
		return fs.ErrClosed
	case off < 0 || n < 0 || off > s.Size() || int64(n) > s.Size()-off:
		return backend.ErrOutOfRange
	}
	return ctx.Err()
}

func (s *shard) Close() error {
	s.closed.Store(true)
	return nil
}

// view is a pooled backend.View, so that lending bytes allocates nothing.
type view struct{ b []byte }

var views = sync.Pool{New: func() any { return new(view) }}

func (v *view) Bytes() []byte { return v.b }

func (v *view) Release() {
	v.b = nil
	views.Put(v)
}
