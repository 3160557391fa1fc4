package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/aifs/aifs/backend"
)

// Single files outside a shard set, for other tiers that keep their own files on local disk
// (the disk cache of package diskcache), so that their O_DIRECT goes through this package too.

// ProbeDirect reports whether the filesystem holding directory dir takes the O_DIRECT writes
// and reads of WriteFile and OpenFile: it writes a small file there (a few blocks, ending
// mid-block), reads part of it back and removes it. It returns nil if so, else an error that
// says why not. The probe is done once per directory, so that OpenFile need not probe every
// file as Backend.Open does.
func ProbeDirect(dir string) error {
	path := filepath.Join(dir, fmt.Sprintf(".direct-probe-%d-%016x", os.Getpid(), rand.Uint64()))
	defer os.Remove(path)
	data := make([]byte, 3*4096+100)
	for i := range data {
		data[i] = byte(i*7 + i>>8)
	}
	if err := writeDirect(path, data); err != nil {
		return fmt.Errorf("local: O_DIRECT write in %s: %w", dir, err)
	}
	r, err := openDirectFile(path)
	if err != nil {
		return fmt.Errorf("local: O_DIRECT open in %s: %w", dir, err)
	}
	defer r.Close()
	got := make([]byte, len(data)-4097)
	if err := r.readAt(context.Background(), got, 4097); err != nil {
		return fmt.Errorf("local: O_DIRECT read in %s: %w", dir, err)
	}
	if !bytes.Equal(got, data[4097:]) {
		return fmt.Errorf("local: O_DIRECT in %s read back other bytes than it wrote", dir)
	}
	return nil
}

// OpenFile opens the regular file at path, which must hold exactly size bytes, and reads it
// like a shard of a Backend: the Shard it returns has the same range, context and Close rules
// and is a backend.Viewer. With direct (for a directory that ProbeDirect accepted), reads use
// O_DIRECT and pooled aligned buffers, and read only the aligned window around each range;
// without, or where the open is refused all the same, they go through the page cache. A
// missing file fails with an error wrapping backend.ErrNotExist; a file of another size, or
// not a regular file, with one wrapping backend.ErrMismatch. The caller closes the Shard.
func OpenFile(path string, size int64, direct bool) (backend.Shard, error) {
	var r reader
	var err error
	if direct {
		if r, err = openDirectFile(path); errors.Is(err, errRefused) {
			direct = false
		}
	}
	if !direct {
		var f *os.File
		if f, err = os.Open(path); err == nil {
			r = buffered{f}
		}
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("local: open %s: %w", path, backend.ErrNotExist)
	case err != nil:
		return nil, fmt.Errorf("local: %w", err)
	}
	fi, err := r.(interface{ Stat() (fs.FileInfo, error) }).Stat()
	switch {
	case err != nil:
		err = fmt.Errorf("local: %w", err)
	case !fi.Mode().IsRegular():
		err = fmt.Errorf("local: %s is not a regular file: %w", path, backend.ErrMismatch)
	case fi.Size() != size:
		err = fmt.Errorf("local: %s has %d bytes, want %d: %w", path, fi.Size(), size, backend.ErrMismatch)
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	return &shard{path: path, size: size, r: r}, nil
}

// WriteFile writes data to path so that path never holds anything but all of data: it creates
// the new file tmp (which must not exist, and must be in path's filesystem), writes data to it
// (with O_DIRECT from aligned buffers if direct, falling back to the page cache where the
// filesystem refuses), makes it durable with fdatasync (not needed after a direct write on
// ext4 or XFS, whose journals order it before the rename: journalOrdersDirect) and renames it
// to path, replacing any file there. On error tmp is removed and path is untouched. The rename
// itself is not synced (no fsync of the directory): after a crash path may be missing, or on
// ext4 and XFS shorter than data (a reader checks the size), never hold other bytes.
func WriteFile(path, tmp string, data []byte, direct bool) error {
	err := writeTemp(tmp, data, direct)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("local: write %s: %w", path, err)
	}
	return nil
}

// writeTemp creates tmp and writes data to it durably.
func writeTemp(tmp string, data []byte, direct bool) error {
	if direct {
		err := writeDirect(tmp, data)
		if !errors.Is(err, errRefused) {
			return err
		}
		os.Remove(tmp) // a refused write may leave the created file
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = datasync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
