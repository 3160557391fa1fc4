package view

import (
	"context"
	"io"
)

// Input is one file that an indexer reads in place (layout/tarindex, zipindex, tfrecordindex,
// hfindex); the file becomes a shard of the index. F is what Open returns: an io.ReadCloser for
// the formats read from their first byte (tar, TFRecord), a File for those read at any offset
// (ZIP, Arrow, Parquet).
type Input[F io.Closer] struct {
	// Name is what the index records as the shard's name: the file's path relative to the
	// index's directory (or object prefix), or absolute (layout.Shard.Name).
	Name string
	// Label names the file in messages: its path or URL.
	Label string
	// Size is the file's size in bytes, as listed; a file that reads otherwise fails the index.
	Size int64
	// MTime (nanoseconds) is given to the directories its records imply without one of their own.
	MTime int64
	// Version is recorded in the index and checked when the set is opened: a local file's mtime
	// in nanoseconds in decimal, an object's ETag (layout.Shard.Version).
	Version string
	// Open opens the file; the indexer closes it.
	Open func(ctx context.Context) (F, error)
}

// File is an opened Input read at any offset.
type File interface {
	io.ReaderAt
	io.Closer
}

// Progress is a snapshot of a running index: the files read of all, and their bytes, each file
// counted whole when it is done.
type Progress struct {
	Files, TotalFiles int
	Bytes, TotalBytes int64
}

// Free keeps values for reuse from one source to the next: a reader's buffers, a source's rows
// once added. It is safe for concurrent use; it holds at most the capacity it was made with.
type Free[T any] chan T

// NewFree returns a Free that keeps up to n values.
func NewFree[T any](n int) Free[T] { return make(Free[T], n) }

// Get returns a value kept, or ok false if none is.
func (f Free[T]) Get() (v T, ok bool) {
	select {
	case v = <-f:
		return v, true
	default:
		return v, false
	}
}

// Put keeps v for a later Get, or drops it if f is full.
func (f Free[T]) Put(v T) {
	select {
	case f <- v:
	default:
	}
}
