// Package backend is the contract between aifs and the storage that holds shard bytes: a Backend
// opens the shards of one shard set (layout.Shard from the index) and a Shard reads byte ranges
// of one of them. Implementations live in subpackages (local: O_DIRECT reads from local files;
// s3: ranged GETs; memory: tests) and all pass the conformance suite in backendtest. Decorators
// wrap these interfaces: diskcache (a local disk tier over any backend) and faulty (fault
// injection, for tests); each backend counts its own figures. Capabilities that only one
// backend has are optional interfaces found by type assertion.
//
// The contract has no short reads: ReadAt fills all of p or returns an error. Errors wrap the
// sentinels below (and io/fs.ErrClosed, context errors) so callers test them with errors.Is.
//
// This package imports layout and the standard library only.
package backend

import (
	"context"
	"errors"

	"github.com/aifs/aifs/layout"
)

// Sentinels wrapped by the errors of every Backend and Shard.
var (
	// ErrNotExist: the shard named by the index is missing from the storage.
	ErrNotExist = errors.New("backend: shard does not exist")
	// ErrMismatch: the shard exists but is not what the index describes (size, kind of file).
	ErrMismatch = errors.New("backend: shard does not match the index")
	// ErrOutOfRange: a read reaches outside [0, Size).
	ErrOutOfRange = errors.New("backend: read out of range")
	// ErrUnavailable: remote storage did not answer (connection refused or reset, no answer
	// in time) after the backend's retries. The network's errno stays in the text only: a
	// reader of a file gets EIO, not ECONNREFUSED.
	ErrUnavailable = errors.New("backend: storage unavailable")
)

// Backend opens the shards of one shard set. Its methods are safe for concurrent use.
type Backend interface {
	// Open checks that shard s exists with the size the index records and returns a handle
	// for reading it. It fails with an error wrapping ErrNotExist when the shard is missing and
	// ErrMismatch when its size differs from s.Size; both errors name the shard. A name that
	// layout.ValidName rejects ("..", "a/b") never exists. Open on a
	// closed Backend fails with an error wrapping fs.ErrClosed. The caller owns the Shard and
	// closes it; ctx bounds the open only, not the Shard's lifetime.
	Open(ctx context.Context, s layout.Shard) (Shard, error)
	// Close releases the Backend. It is idempotent. It does not close Shards opened from it:
	// their owners close them, preferably first; a Shard used after its Backend is closed may
	// fail but never corrupts data.
	Close() error
}

// Shard reads one open shard. Its methods are safe for concurrent use; reads run in parallel
// (no lock is held across I/O).
type Shard interface {
	// ReadAt fills p with the bytes at [off, off+len(p)) or returns an error: there are no
	// short reads, and on error the contents of p are unspecified. A range that does not lie
	// within [0, Size()) fails with an error wrapping ErrOutOfRange, except that a zero-length
	// read at any offset in [0, Size()] succeeds. If ctx is done before the I/O starts, the error wraps ctx.Err();
	// I/O already issued may run to completion. After Close, ReadAt fails with an error
	// wrapping fs.ErrClosed. ReadAt keeps no reference to p after it returns.
	ReadAt(ctx context.Context, p []byte, off int64) error
	// Size is the shard's length in bytes, as checked against the index by Open.
	Size() int64
	// Close releases the shard. It is idempotent. ReadAt calls in flight when Close is called
	// may fail (wrapping fs.ErrClosed) but never return another file's bytes.
	Close() error
}

// Stager is an optional interface of a Shard over a local tier (diskcache with staging on):
// Stage asks for the bytes [off, off+n) to be fetched into the tier in the background, soon.
// It never blocks and does no I/O on the caller's goroutine; the tier may skip bytes its
// budget would not keep. The prefetch Loader calls it for every sample a plan names, so that
// a node stages only the shards its trainers will read (docs/multinode.md).
type Stager interface {
	Stage(off, n int64)
}

// Viewer is an optional interface of a Shard that lends its bytes instead of copying them: the
// FUSE layer hands the lent buffer to the kernel directly, which saves a copy of every sample
// (a quarter of the daemon's CPU under a cold shuffled epoch, measured with pprof).
type Viewer interface {
	// View reads [off, off+n) like ReadAt (same range rules, errors and concurrency) into a
	// buffer the Shard owns and returns a View of exactly those bytes.
	View(ctx context.Context, off int64, n int) (View, error)
}

// MaxView is the largest range a Viewer is built to lend from a pooled buffer (the local
// backend's largest O_DIRECT buffer); a longer one allocates. Callers that choose their read
// sizes (read-ahead's coalesced reads, a large sample's verification) stay within it.
const MaxView = 4 << 20

// View is n bytes lent by a Shard. Bytes returns them; they must not be modified. Release
// gives the buffer back: call it exactly once, after which Bytes must not be used.
type View interface {
	Bytes() []byte
	Release()
}

// Versioned is an optional interface of a Shard kept where an object can be replaced under the
// same name (an object store). Version returns an opaque string (the S3 ETag) that differs
// whenever the bytes do; a cache of shard bytes keys its entries by it, so it never serves the
// bytes of a replaced object. It is fixed for the Shard's lifetime: a Shard whose object changes
// after Open fails its reads with ErrMismatch.
type Versioned interface {
	Version() string
}
