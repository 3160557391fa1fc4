package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/aifs/aifs/backend/s3"
	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/layout/pack"
	"github.com/aifs/aifs/layout/tar"
	"github.com/aifs/aifs/layout/view"
)

// format is a kind of file that aifs index reads in place (--format).
type format string

const (
	formatTar      format = "tar"
	formatZip      format = "zip"
	formatHF       format = "hf"
	formatTFRecord format = "tfrecord"
)

// suffixes are the file name endings that a directory or prefix is searched for.
func (f format) suffixes() []string {
	switch f {
	case formatHF:
		return []string{".arrow", ".parquet"}
	case formatTFRecord:
		return []string{".tfrecord", ".tfrecords"}
	}
	return []string{"." + string(f)}
}

// zipMagic are the first bytes of a ZIP: a local header, an empty ZIP's end record, or a
// spanned ZIP's marker.
var zipMagic = [][]byte{[]byte("PK\x03\x04"), []byte("PK\x05\x06"), []byte("PK\x07\x08")}

// detectFormat says what the first bytes of a file (12 or all) are: a ZIP; a Hugging Face file
// (Parquet's "PAR1", an Arrow IPC file's "ARROW1", an Arrow IPC stream's 0xFFFFFFFF
// continuation); a TFRecord file (its first length's masked CRC32C holds); else a tar (the tar
// reader then finds a compressed or corrupt one).
func detectFormat(head []byte) format {
	for _, m := range zipMagic {
		if bytes.HasPrefix(head, m) {
			return formatZip
		}
	}
	switch {
	case bytes.HasPrefix(head, []byte("PAR1")), bytes.HasPrefix(head, []byte("ARROW1")), bytes.HasPrefix(head, []byte{0xff, 0xff, 0xff, 0xff}):
		return formatHF
	case len(head) >= 12 && maskedCRC32C(head[:8]) == binary.LittleEndian.Uint32(head[8:12]):
		return formatTFRecord
	}
	return formatTar
}

// maskedCRC32C is TFRecord's masked CRC32C of b.
func maskedCRC32C(b []byte) uint32 {
	c := crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
	return (c>>15 | c<<17) + 0xa282ead8
}

// sourceSet is the destination of aifs index and where its sources are found: local files, or
// objects of the destination's bucket.
type sourceSet struct {
	dst      string      // the absolute directory, or the s3:// URL
	absolute bool        // --absolute
	s3       *s3.Backend // the destination's bucket, for a destination in S3
	loc      s3.Location
	s3c      *s3Config
}

// listed is one source file found: a local file (path) or an object (key).
type listed struct {
	name    string // as the index names it (layout.ShardPath)
	label   string // its path or URL, for messages
	path    string // local: the absolute path
	key     string // S3: the object key
	size    int64
	mtime   int64
	version string // local: the mtime in decimal; S3: the ETag
	format  format
}

func newSourceSet(ctx context.Context, dst string, absolute bool, s3c *s3Config) (*sourceSet, error) {
	t := &sourceSet{absolute: absolute, s3c: s3c}
	if !s3.IsURL(dst) {
		abs, err := filepath.Abs(dst)
		t.dst = abs
		return t, err
	}
	loc, err := s3.ParseURL(dst)
	if err != nil {
		return nil, err
	}
	if t.s3, err = openS3(ctx, loc.String(), s3c, zap.NewNop()); err != nil {
		return nil, err
	}
	t.dst, t.loc = loc.String(), loc
	return t, nil
}

func (t *sourceSet) close() {
	if t.s3 != nil {
		t.s3.Close()
	}
}

// sources lists the files that args name, in order, each once, and their format: want, or
// (want "") each one's by its first bytes (read jobs files at a time), which must then agree.
// A directory or prefix is searched for files named *.tar and *.zip (only want's suffix when
// it is given).
func (t *sourceSet) sources(ctx context.Context, args []string, want format, jobs int) ([]listed, error) {
	var suffixes []string
	for _, f := range []format{formatTar, formatZip, formatHF, formatTFRecord} {
		if want == "" || want == f {
			suffixes = append(suffixes, f.suffixes()...)
		}
	}
	var srcs []listed
	seen := map[string]bool{}
	for _, arg := range args {
		paths, err := expandBraces(arg)
		if err != nil {
			return nil, err
		}
		for _, p := range paths {
			var found []listed
			if s3.IsURL(p) != (t.s3 != nil) {
				return nil, fmt.Errorf("%s and the destination %s: files in S3 take an index in S3 (in their bucket), local files a local index", p, t.dst)
			}
			if t.s3 != nil {
				found, err = t.objects(ctx, p, suffixes)
			} else {
				found, err = t.files(p, suffixes)
			}
			if err != nil {
				return nil, err
			}
			for _, s := range found {
				if seen[s.label] {
					return nil, fmt.Errorf("%s is given twice", s.label)
				}
				seen[s.label] = true
				srcs = append(srcs, s)
			}
		}
	}
	if want != "" {
		for i := range srcs {
			srcs[i].format = want
		}
		return srcs, nil
	}
	// The first bytes of each file are read jobs at a time: one at a time, each a read of a
	// cold file, they kept the disk idle between them before the index's reads began
	// (docs/bench/formats-notes.md#cold-reads-run-7).
	errs := make([]error, len(srcs))
	err := view.Each(ctx, len(srcs), jobs, func(ctx context.Context, i int) error {
		srcs[i].format, errs[i] = t.detect(ctx, srcs[i])
		return nil
	}, func(int) {})
	if err != nil { // ctx's
		return nil, err
	}
	for i, s := range srcs {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if s.format != srcs[0].format {
			return nil, fmt.Errorf("%s is a %s and %s a %s: index them apart (or give --format)", srcs[0].label, srcs[0].format, s.label, s.format)
		}
	}
	return srcs, nil
}

// detect reads the first bytes of s and says its format.
func (t *sourceSet) detect(ctx context.Context, s listed) (format, error) {
	head := make([]byte, min(s.size, 12))
	if t.s3 != nil {
		f, err := t.openObject(ctx, s)
		if err != nil {
			return "", fmt.Errorf("open %s: %w", s.label, err)
		}
		defer f.Close()
		_, err = f.ReadAt(head, 0)
		if err != nil {
			return "", fmt.Errorf("read %s: %w", s.label, err)
		}
		return detectFormat(head), nil
	}
	f, err := os.Open(s.path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := io.ReadFull(f, head); err != nil {
		return "", fmt.Errorf("read %s: %w", s.label, err)
	}
	return detectFormat(head), nil
}

// files lists the local file p, or every file under directory p with one of suffixes, in path
// order.
func (t *sourceSet) files(p string, suffixes []string) ([]listed, error) {
	tars := slices.Contains(suffixes, ".tar")
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		if tars && compressedName(p) {
			return nil, fmt.Errorf("%s: %w", p, tar.ErrCompressed)
		}
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("%s is not a regular file", p)
		}
		s, err := t.file(p, fi)
		return []listed{s}, err
	}
	var srcs []listed
	err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir():
			return nil
		case tars && compressedName(path):
			return fmt.Errorf("%s: %w", path, tar.ErrCompressed)
		case !hasSuffix(path, suffixes) || !d.Type().IsRegular():
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		s, err := t.file(path, fi)
		srcs = append(srcs, s)
		return err
	})
	if err == nil && len(srcs) == 0 {
		err = fmt.Errorf("%s holds no %s files", p, strings.Join(suffixes, " or "))
	}
	return srcs, err
}

func hasSuffix(name string, suffixes []string) bool {
	return slices.ContainsFunc(suffixes, func(s string) bool { return strings.HasSuffix(name, s) })
}

// file describes the local file at path.
func (t *sourceSet) file(path string, fi os.FileInfo) (listed, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return listed{}, err
	}
	name := abs
	if !t.absolute {
		if name, err = filepath.Rel(t.dst, abs); err != nil {
			return listed{}, err
		}
	}
	return listed{name: name, label: abs, path: abs, size: fi.Size(), mtime: fi.ModTime().UnixNano(),
		version: strconv.FormatInt(fi.ModTime().UnixNano(), 10)}, nil
}

// objects lists the object p, or every object under p with one of suffixes when p ends in "/"
// or names no object.
func (t *sourceSet) objects(ctx context.Context, p string, suffixes []string) ([]listed, error) {
	tars := slices.Contains(suffixes, ".tar")
	loc, err := s3.ParseURL(p)
	if err != nil {
		return nil, err
	}
	if loc.Bucket != t.loc.Bucket {
		return nil, fmt.Errorf("%s is in bucket %s, the index in %s: an index names files in its own bucket", p, loc.Bucket, t.loc.Bucket)
	}
	if tars && compressedName(loc.Prefix) {
		return nil, fmt.Errorf("%s: %w", p, tar.ErrCompressed)
	}
	if !strings.HasSuffix(p, "/") && loc.Prefix != "" {
		obj, err := t.s3.Stat(ctx, loc.Prefix)
		if err == nil {
			return []listed{t.object(obj)}, nil
		}
	}
	be, err := openS3(ctx, loc.String(), t.s3c, zap.NewNop())
	if err != nil {
		return nil, err
	}
	defer be.Close()
	objs, err := be.List(ctx)
	if err != nil {
		return nil, err
	}
	var srcs []listed
	for _, o := range objs {
		switch {
		case tars && compressedName(o.Key):
			return nil, fmt.Errorf("s3://%s/%s: %w", loc.Bucket, o.Key, tar.ErrCompressed)
		case hasSuffix(o.Key, suffixes):
			srcs = append(srcs, t.object(o))
		}
	}
	if len(srcs) == 0 {
		return nil, fmt.Errorf("%s names no object and holds no %s objects", p, strings.Join(suffixes, " or "))
	}
	return srcs, nil
}

// object describes the object o of the destination's bucket.
func (t *sourceSet) object(o s3.Object) listed {
	name := "/" + o.Key
	if !t.absolute {
		name, _ = filepath.Rel("/"+t.loc.Prefix, name) // both absolute: no error
	}
	return listed{name: name, label: "s3://" + t.loc.Bucket + "/" + o.Key, key: o.Key, size: o.Size, mtime: o.MTime.UnixNano(), version: o.ETag}
}

// openObject opens object s for reads at any offset, checked against its size and ETag.
func (t *sourceSet) openObject(ctx context.Context, s listed) (shardFile, error) {
	sh, err := t.s3.Open(ctx, layout.Shard{Name: "/" + s.key, Kind: layout.ShardTar, Size: uint64(s.size), Version: s.version})
	if err != nil {
		return shardFile{}, err
	}
	return shardFile{ctx: ctx, Shard: sh}, nil
}

// openStream returns the opener of s for a format read from its first byte (tar, TFRecord).
func (t *sourceSet) openStream(s listed) func(context.Context) (io.ReadCloser, error) {
	if t.s3 != nil {
		return func(ctx context.Context) (io.ReadCloser, error) { return t.s3.OpenObject(ctx, s.key, s.version) }
	}
	return func(context.Context) (io.ReadCloser, error) { return os.Open(s.path) }
}

// openFile returns the opener of s for a format read at any offset (ZIP, Arrow, Parquet).
func (t *sourceSet) openFile(s listed) func(context.Context) (view.File, error) {
	if t.s3 != nil {
		return func(ctx context.Context) (view.File, error) {
			f, err := t.openObject(ctx, s)
			if err != nil {
				return nil, err
			}
			return &blockFile{f: f, size: s.size}, nil
		}
	}
	return func(context.Context) (view.File, error) { return os.Open(s.path) }
}

// objectBlock is the least an object in S3 is read by at a time while it is indexed: the
// formats' readers read in windows of 1 MiB (what a core's L2 cache holds while they parse,
// docs/bench/formats-notes.md), and each read of an object is a GET with its round trip.
const objectBlock = 8 << 20

// blockFile reads an object a block of objectBlock bytes at a time, kept until a read outside
// it: reads of less than a block, in order, cost a GET a block.
type blockFile struct {
	f    view.File
	size int64
	mu   sync.Mutex // guards buf and off
	buf  []byte
	off  int64 // of buf in the object
}

func (b *blockFile) ReadAt(p []byte, off int64) (int, error) {
	end := off + int64(len(p))
	if len(p) >= objectBlock || off < 0 || end > b.size {
		return b.f.ReadAt(p, off)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if off < b.off || end > b.off+int64(len(b.buf)) {
		n := min(objectBlock, b.size-off)
		if cap(b.buf) < objectBlock {
			b.buf = make([]byte, objectBlock)
		}
		if _, err := b.f.ReadAt(b.buf[:n], off); err != nil {
			b.buf = b.buf[:0]
			return 0, err
		}
		b.buf, b.off = b.buf[:n], off
	}
	return copy(p, b.buf[off-b.off:]), nil
}

func (b *blockFile) Close() error { return b.f.Close() }

// write stores the index at the destination, atomically: a previous index stays valid until
// the new one replaces it.
func (t *sourceSet) write(ctx context.Context, index []byte, force bool) error {
	if t.s3 != nil {
		return t.s3.PutIndex(ctx, index, force)
	}
	if err := os.MkdirAll(t.dst, 0o755); err != nil {
		return fmt.Errorf("create destination: %w", err)
	}
	// Checked by name, not by loading the old index (73 MB for 1.28 M members: a tenth of an
	// index run).
	_, err := os.Stat(filepath.Join(t.dst, layout.IndexName))
	switch {
	case err == nil && !force:
		return fmt.Errorf("%s already holds a shard set; use --force to replace its index", t.dst)
	case err == nil:
		if _, err := os.Stat(filepath.Join(t.dst, layout.ShardName(0))); err == nil {
			return fmt.Errorf("%s holds a packed shard set; write the index somewhere else", t.dst)
		}
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	return pack.WriteIndexFile(t.dst, index)
}
