// Package fs will serve a shard set as a read-only FUSE file system (the mount issue). It is
// the only aifs package that imports go-fuse: a thin adapter that answers namespace requests
// from a layout.Index (inode = entry id + 1, no per-file Go object) and reads through prefetch.
// It may import layout, backend and prefetch.
package fs
