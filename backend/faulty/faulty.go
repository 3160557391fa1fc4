// Package faulty is a backend.Backend decorator that injects the faults storage shows in
// production: errors, latency and short reads, on chosen operations and shards, for a chosen
// number of calls. Tests of the layers above a backend (prefetch, fs, diskcache) use it to check
// that reads fail or recover as specified, that nothing deadlocks and that no goroutine leaks.
//
// A fault is a Rule; Set replaces the rules at any time, also while reads are in flight. Each
// call of Open, ReadAt or View applies the first rule that matches it: its Delay first (ended
// early, with the context's error, when the context is done), then its Err, or a short read.
// A call no rule matches goes straight to the inner Backend.
//
// A short read is what a backend reports when the storage delivered fewer bytes than asked
// for: ReadAt fills the first half of the buffer and fails with io.ErrUnexpectedEOF. View goes
// further and breaks the backend contract, as a buggy backend would: it returns a View of half
// the bytes asked for and no error; the layers above must notice and fail the read rather than
// serve the wrong bytes.
//
// This package imports backend, layout and the standard library.
package faulty

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aifs/aifs/backend"
	"github.com/aifs/aifs/layout"
)

// Op names the calls a Rule applies to.
type Op int

const (
	Open Op = 1 << iota // Backend.Open
	Read                // Shard.ReadAt and Viewer.View
)

// Rule is one fault.
type Rule struct {
	Op    Op            // the calls it applies to (Open, Read or both)
	Shard string        // the shard's name; "" for every shard
	Delay time.Duration // waited before the call (or before failing)
	Err   error         // returned instead of calling the inner Backend; nil for none
	Short bool          // a Read returns half the bytes and no error (see the package doc)
	Times int           // the number of calls it applies to, then it is spent; 0: no limit
}

// Backend injects the faults of its rules into an inner Backend. It is safe for concurrent use.
type Backend struct {
	inner backend.Backend

	mu    sync.Mutex // guards rules and left
	rules []Rule
	left  []int // calls left per rule with Times > 0

	calls, faults atomic.Int64
}

var _ backend.Backend = (*Backend)(nil)

// New returns a Backend over inner with no rules. Close closes inner.
func New(inner backend.Backend) *Backend { return &Backend{inner: inner} }

// Set replaces the rules.
func (b *Backend) Set(rules ...Rule) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rules = append([]Rule(nil), rules...)
	b.left = make([]int, len(rules))
	for i, r := range rules {
		b.left[i] = r.Times
	}
}

// Calls returns the calls of Open, ReadAt and View so far, and how many of them a rule applied to.
func (b *Backend) Calls() (calls, faults int64) { return b.calls.Load(), b.faults.Load() }

// match returns the rule for a call of op on shard, counting it, if one applies.
func (b *Backend) match(op Op, shard string) (Rule, bool) {
	b.calls.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, r := range b.rules {
		if r.Op&op == 0 || r.Shard != "" && r.Shard != shard || r.Times > 0 && b.left[i] == 0 {
			continue
		}
		if r.Times > 0 {
			b.left[i]--
		}
		b.faults.Add(1)
		return r, true
	}
	return Rule{}, false
}

// wait sleeps d, or until ctx is done: then it returns ctx's error.
func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Open implements backend.Backend.
func (b *Backend) Open(ctx context.Context, s layout.Shard) (backend.Shard, error) {
	if r, ok := b.match(Open, s.Name); ok {
		if err := wait(ctx, r.Delay); err != nil {
			return nil, err
		}
		if r.Err != nil {
			return nil, r.Err
		}
	}
	sh, err := b.inner.Open(ctx, s)
	if err != nil {
		return nil, err
	}
	return &shard{Shard: sh, b: b, name: s.Name}, nil
}

// Close implements backend.Backend: it closes the inner Backend.
func (b *Backend) Close() error { return b.inner.Close() }

// shard injects the Read faults into one inner shard. It is a Viewer whether or not the inner
// shard is one (View then reads into a new buffer).
type shard struct {
	backend.Shard
	b    *Backend
	name string
}

// ReadAt implements backend.Shard.
func (s *shard) ReadAt(ctx context.Context, p []byte, off int64) error {
	r, ok := s.b.match(Read, s.name)
	if !ok {
		return s.Shard.ReadAt(ctx, p, off)
	}
	if err := wait(ctx, r.Delay); err != nil {
		return err
	}
	switch {
	case r.Err != nil:
		return r.Err
	case r.Short:
		if err := s.Shard.ReadAt(ctx, p[:len(p)/2], off); err != nil {
			return err
		}
		return fmt.Errorf("faulty: %d of %d bytes: %w", len(p)/2, len(p), io.ErrUnexpectedEOF)
	}
	return s.Shard.ReadAt(ctx, p, off)
}

// View implements backend.Viewer.
func (s *shard) View(ctx context.Context, off int64, n int) (backend.View, error) {
	r, ok := s.b.match(Read, s.name)
	if ok {
		if err := wait(ctx, r.Delay); err != nil {
			return nil, err
		}
		if r.Err != nil {
			return nil, r.Err
		}
	}
	short := ok && r.Short
	if v, isViewer := s.Shard.(backend.Viewer); isViewer {
		if short {
			n /= 2
		}
		return v.View(ctx, off, n)
	}
	buf := make([]byte, n)
	if short {
		buf = buf[:n/2]
	}
	if err := s.Shard.ReadAt(ctx, buf, off); err != nil {
		return nil, err
	}
	return bytesView(buf), nil
}

// bytesView lends a buffer of its own.
type bytesView []byte

func (v bytesView) Bytes() []byte { return v }
func (v bytesView) Release()      {}
