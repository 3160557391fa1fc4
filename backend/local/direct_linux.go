package local

// All O_DIRECT code of aifs lives in this file.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	maxOffAlign = 1 << 20 // largest offset alignment read directly (a divisor of maxChunk)
)

// directFile reads a file opened with O_DIRECT. Reads share the descriptor (pread is safe
// concurrently) and take buffers from the pools, so no lock is held on the read path.
type directFile struct {
	*os.File
	align int64 // file offset and length alignment (stx_dio_offset_align), a power of two
}

// openDirect opens path with O_DIRECT and, for a non-empty file, reads its first aligned block
// to learn whether the filesystem accepts direct reads. A refusal (EINVAL from open or from
// that read, or an alignment beyond what the pools provide) wraps errRefused.
func openDirect(path string, size int64) (reader, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECT, 0)
	if errors.Is(err, syscall.EINVAL) {
		return nil, fmt.Errorf("%w: %w", errRefused, err)
	}
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	mem, off := dioAlign(f)
	d := &directFile{File: f, align: off}
	if mem > bufAlign || off > maxOffAlign {
		err = fmt.Errorf("%w: %s needs memory alignment %d, offset alignment %d", errRefused, path, mem, off)
	} else if size > 0 {
		var probe [1]byte
		if err = d.readAt(context.Background(), probe[:], 0); errors.Is(err, syscall.EINVAL) {
			err = fmt.Errorf("%w: read %s: %w", errRefused, path, err)
		} else if err != nil {
			err = fmt.Errorf("local: read %s: %w", path, err)
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return d, nil
}

// readAt widens [off, off+len(p)) to the offset alignment and reads it in chunks of at most
// maxChunk bytes, each into a pooled aligned buffer whose overlap with the window is copied
// to p. At the end of the file the last aligned read comes back short; that is fine as long as
// it covers the window.
func (d *directFile) readAt(ctx context.Context, p []byte, off int64) error {
	end := off + int64(len(p))
	for pos := off &^ (d.align - 1); pos < end; {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min((end+d.align-1)&^(d.align-1)-pos, maxChunk)
		buf := getBuffer(int(n))
		got, err := d.pread(buf.b[:n], pos)
		if want := min(end-pos, n); int64(got) >= want { // an error past the window (EOF) is moot
			copy(p[max(pos-off, 0):], buf.b[max(off-pos, 0):want])
			err = nil
		} else if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF // the file shrank after Open
		}
		putBuffer(buf)
		if err != nil {
			return err
		}
		pos += n
	}
	return nil
}

// view reads [off, off+n), n > 0, widened to the alignment, into one pooled buffer and lends
// the window: no copy. A window whose widened range exceeds maxChunk is read by readAt into a
// buffer of its own.
func (d *directFile) view(off int64, n int) (*buffer, error) {
	pos := off &^ (d.align - 1)
	end := off + int64(n)
	span := (end+d.align-1)&^(d.align-1) - pos
	if span > maxChunk {
		b := &buffer{b: make([]byte, n), class: -1, hi: n}
		return b, d.readAt(context.Background(), b.b, off)
	}
	b := getBuffer(int(span))
	got, err := d.pread(b.b[:span], pos)
	if int64(got) >= end-pos { // an error past the window (EOF) is moot
		b.lo, b.hi = int(off-pos), int(end-pos)
		return b, nil
	}
	b.Release()
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF // the file shrank after Open
	}
	return nil, err
}

// pread reads p at off from the device; in the no-I/O build (NoIO) it returns len(p) at once.
func (d *directFile) pread(p []byte, off int64) (int, error) {
	if NoIO {
		return len(p), nil
	}
	return d.ReadAt(p, off)
}

// dioAlign returns the memory and file-offset alignment that O_DIRECT reads of f need, from
// statx STATX_DIOALIGN (Linux 6.1+). Each is 4096 where statx cannot tell (older kernels,
// filesystems that do not report it) or reports zero or a value that is not a power of two;
// should 4096 be too small, the probe read in openDirect fails and the file is read buffered.
func dioAlign(f *os.File) (mem, off int64) {
	var st unix.Statx_t
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { // the path "", with AT_EMPTY_PATH: statx of fd itself
			if unix.Statx(int(fd), "", unix.AT_EMPTY_PATH, unix.STATX_DIOALIGN, &st) != nil {
				st.Mask = 0
			}
		})
	}
	pow2 := func(v uint32) int64 {
		if st.Mask&unix.STATX_DIOALIGN == 0 || v == 0 || v&(v-1) != 0 {
			return 4096
		}
		return int64(v)
	}
	return pow2(st.Dio_mem_align), pow2(st.Dio_offset_align)
}

// openDirectFile opens path with O_DIRECT like openDirect but without its probe read, which
// would cost every open one more small read: OpenFile uses it for files of a directory that
// ProbeDirect accepted. A refusal at open wraps errRefused.
func openDirectFile(path string) (reader, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECT, 0)
	if errors.Is(err, syscall.EINVAL) {
		return nil, fmt.Errorf("%w: %w", errRefused, err)
	}
	if err != nil {
		return nil, err
	}
	mem, off := dioAlign(f)
	if mem > bufAlign || off > maxOffAlign {
		f.Close()
		return nil, fmt.Errorf("%w: %s needs memory alignment %d, offset alignment %d", errRefused, path, mem, off)
	}
	return &directFile{File: f, align: off}, nil
}

// writeDirect creates the new file path (O_EXCL) with O_DIRECT and writes data to it from
// pooled aligned buffers, in pieces of up to maxChunk bytes, the last one zero-padded to the
// offset alignment; it then truncates the file to len(data) and, unless the filesystem's
// journal orders the writes before a later rename (journalOrdersDirect), makes it durable
// (fdatasync).
// A refusal of O_DIRECT (EINVAL from open or a write, or an alignment the pools cannot meet)
// wraps errRefused; the file may then exist and the caller removes it.
func writeDirect(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_DIRECT, 0o644)
	if errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("%w: %w", errRefused, err)
	}
	if err != nil {
		return err
	}
	err = writeAligned(f, data)
	if err == nil && !journalOrdersDirect(f) {
		err = datasync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeAligned is writeDirect's loop over an open O_DIRECT file. Where data's address meets the
// memory alignment, as Go's large allocations do (they start on a page: the disk cache's 1 MiB
// chunks), its whole blocks are written in place; copying them into aligned buffers took 6% of
// the daemon's CPU in a cold epoch over S3 (pprof). A piece with a partial last block, or data
// that is not aligned, goes through a pooled aligned buffer, zero-padded.
func writeAligned(f *os.File, data []byte) error {
	mem, align := dioAlign(f)
	if mem > bufAlign || align > maxOffAlign {
		return fmt.Errorf("%w: needs memory alignment %d, offset alignment %d", errRefused, mem, align)
	}
	inPlace := len(data) > 0 && uintptr(unsafe.Pointer(&data[0]))&uintptr(mem-1) == 0
	for pos := 0; pos < len(data); { // maxChunk is a multiple of align: only the last piece is padded
		n := min(len(data)-pos, maxChunk)
		padded := (int64(n) + align - 1) &^ (align - 1)
		var err error
		if inPlace && int64(n) == padded {
			_, err = f.WriteAt(data[pos:pos+n], int64(pos))
		} else {
			buf := getBuffer(int(padded))
			copy(buf.b, data[pos:pos+n])
			clear(buf.b[n:padded])
			_, err = f.WriteAt(buf.b[:padded], int64(pos))
			putBuffer(buf)
		}
		if errors.Is(err, syscall.EINVAL) {
			return fmt.Errorf("%w: write: %w", errRefused, err)
		}
		if err != nil {
			return err
		}
		pos += n
	}
	if int64(len(data))&(align-1) != 0 {
		return f.Truncate(int64(len(data)))
	}
	return nil
}

// Filesystem types (statfs f_type) whose journals order a finished direct write before a later
// rename: see journalOrdersDirect.
const (
	ext4Magic = 0xEF53
	xfsMagic  = 0x58465342
)

// journalOrdersDirect reports whether f, just written with O_DIRECT, needs no fdatasync for
// WriteFile's promise: after a crash, the file renamed into place holds all of its data or is
// shorter than it (which readers that check the size see), never other bytes. That holds on
// XFS, and on ext4 unless mounted data=writeback: a direct write returns once the device has
// the data; the blocks and the size it adds are recorded by a journal transaction started
// after that (unwritten extents converted at completion), so one committed no later than the
// rename's; and every commit flushes the device's write cache before its commit record. The
// page-cache fallback of ext4 for files it cannot write directly (encryption without inline
// crypto) keeps the order too, except under data=writeback. Each fdatasync forces a journal
// commit and a cache flush of its own, which the disk cache's writers cannot afford
// (docs/bench/edges-notes.md, "Writes without fdatasync"; docs/s3.md, "Writes").
func journalOrdersDirect(f *os.File) bool {
	var st syscall.Statfs_t
	if err := syscall.Fstatfs(int(f.Fd()), &st); err != nil {
		return false
	}
	switch st.Type {
	case xfsMagic:
		return true
	case ext4Magic:
		var fi syscall.Stat_t
		if err := syscall.Fstat(int(f.Fd()), &fi); err != nil {
			return false
		}
		wb, ok := writebackDevs.Load(fi.Dev)
		if !ok {
			wb = mountedWriteback(fi.Dev)
			writebackDevs.Store(fi.Dev, wb)
		}
		return !wb.(bool)
	}
	return false
}

// writebackDevs caches mountedWriteback by device.
var writebackDevs sync.Map // uint64 → bool

// mountedWriteback reports whether the filesystem on device dev is mounted with data=writeback
// (or its mount cannot be found in /proc/self/mountinfo: then it says true, the safe answer).
func mountedWriteback(dev uint64) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return true
	}
	want := fmt.Sprintf("%d:%d", unix.Major(dev), unix.Minor(dev))
	for _, line := range strings.Split(string(b), "\n") {
		// id parent major:minor root mountpoint options [tags] - fstype source superoptions
		fields := strings.Fields(line)
		if len(fields) < 3 || fields[2] != want {
			continue
		}
		return strings.Contains(line, "data=writeback")
	}
	return true
}

// datasync flushes f's data and the metadata needed to read it back (its size): fdatasync(2).
func datasync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	if cerr := rc.Control(func(fd uintptr) {
		for {
			if err = syscall.Fdatasync(int(fd)); err != syscall.EINTR {
				return
			}
		}
	}); cerr != nil {
		return cerr
	}
	if err != nil {
		return os.NewSyscallError("fdatasync", err)
	}
	return nil
}
