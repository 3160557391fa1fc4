// Package fs serves a shard set as a read-only FUSE file system. It is the only aifs package that
// imports go-fuse: a thin adapter over go-fuse's raw fuse.RawFileSystem that answers namespace
// requests (LOOKUP, GETATTR, READDIR[PLUS], STATFS) from the in-memory layout.Index and READs
// from the backend, with no Go object per file: the inode number of entry id is id+1 (the root
// is 1, FUSE_ROOT_ID), FORGET is a no-op, and every attribute is decoded from the index on
// demand. The data is immutable, so entry and attribute timeouts are long.
//
// The request count per sample is kept as low as the kernel allows (DESIGN.md): st_blksize is
// 1 MiB so Python's buffered reader asks for a whole sample in one READ, OPEN and FLUSH are
// answered with ENOSYS so the kernel stops sending them (and RELEASE), and ioctls get ENOTTY at
// once. With that, one PIL.Image.open(f).convert() costs IOCTL(TCGETS) + READ.
//
// A hidden control directory, /.aifs, is reachable by name but never listed (ImageFolder would
// take it for a class); it holds the stats file (control.go). Counters and latencies of every
// request live in Stats (stats.go); errors become errnos in one place (errno.go).
//
// This package may import layout, backend and prefetch.
package fs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"go.uber.org/zap"

	"github.com/aifs/aifs/backend"
	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/prefetch"
)

// CacheMode is the kernel page-cache policy for sample files.
type CacheMode int

const (
	// CacheOn lets the kernel keep sample pages in its page cache across opens ("no-open"
	// mode): warm epochs are served by the kernel without reaching the daemon, and a sample
	// costs two requests. It is the default: it was faster than CacheOff in every case
	// measured, cold, warm and with the page cache limited to 1/8 of the dataset (docs/bench).
	CacheOn CacheMode = iota
	// CacheOff answers OPEN with FOPEN_DIRECT_IO: every read reaches the daemon and no page
	// cache is used, so aifs's own cache is the only one. It costs OPEN, RELEASE and a READ that finds the end on top of the two requests per sample.
	CacheOff
)

func (m CacheMode) String() string {
	if m == CacheOff {
		return "off"
	}
	return "on"
}

// Options configure an FS. The zero value is ready to use.
type Options struct {
	// Logger receives errors (once, at the FUSE edge, with op, path and sample id) and, at
	// Debug level, every request. Default: discard.
	Logger *zap.Logger
	// KernelCache is the page-cache policy for sample files. Default: CacheOn.
	KernelCache CacheMode
	// Source and Mountpoint are reported in the stats file. Default: empty.
	Source, Mountpoint string
	// Prefetch configures the loader between READ and the shards (memory budget, read-ahead).
	// Its KeepRead is set from KernelCache: with CacheOff aifs's memory cache is the only one
	// and keeps a stable subset of the samples read; with CacheOn the kernel keeps them.
	Prefetch prefetch.Options
	// Storage adds the statistics of the storage below the loader to the stats file, under
	// "storage" by name (s3 requests, disk cache hits). Each func is called once per snapshot
	// and returns a value that encodes as a JSON object of numbers. Default: none.
	Storage map[string]func() any
}

// Timeouts for the kernel's entry and attribute caches: the shard set never changes while it
// is mounted, so an hour is as good as forever and still lets a pathological kernel cache age.
const cacheTimeout = time.Hour

// blksize is the st_blksize of every file: Python's io.open sizes its buffer from it, and a
// buffer of 1 MiB reads a whole sample in one read(2) and so one READ (DESIGN.md).
const blksize = 1 << 20

// FS answers FUSE requests for one shard set. Create it with New, serve it with Mount, and
// Close it after the server has stopped.
type FS struct {
	fuse.RawFileSystem // ENOSYS for every op not defined below

	x      *layout.Index
	shards []backend.Shard   // by shard number; immutable after New
	shardN map[string]uint32 // shard name → number, for Arrived; immutable after New
	loader *prefetch.Loader
	srv    atomic.Pointer[fuse.Server] // set by Mount, for NOTIFY_STORE
	opt    Options
	log    *zap.Logger
	stats  *Stats
	ctl    control
	uid    uint32
	gid    uint32
	files  uint64 // sample files in the index
	bytes  uint64 // sum of sample sizes, for STATFS

	// With Prefetch.Verify: the samples too large for the loader whose checksum matched,
	// one bit each (Read checks one on its first READ), and the corrupt samples logged.
	verified      []atomic.Uint64
	loggedCorrupt sync.Map // layout.ID → struct{}

	closeOnce sync.Once
}

// New opens every shard of x through b (a missing or mismatched shard is an error naming it,
// so a bad shard set never gets mounted) and returns an FS serving x. The caller keeps b and
// closes it after the FS.
func New(ctx context.Context, x *layout.Index, b backend.Backend, opt Options) (*FS, error) {
	f := &FS{
		RawFileSystem: fuse.NewDefaultRawFileSystem(),
		x:             x,
		opt:           opt,
		log:           opt.Logger,
		uid:           uint32(os.Getuid()),
		gid:           uint32(os.Getgid()),
	}
	if f.log == nil {
		f.log = zap.NewNop()
	}
	f.shardN = make(map[string]uint32, len(x.Shards()))
	for i, s := range x.Shards() {
		f.shardN[s.Name] = uint32(i)
		sh, err := b.Open(ctx, s)
		if err != nil {
			f.Close()
			return nil, err
		}
		f.shards = append(f.shards, sh)
	}
	po := opt.Prefetch
	if po.Verify {
		f.verified = make([]atomic.Uint64, (x.Len()+63)/64)
	}
	po.KeepRead = opt.KernelCache == CacheOff
	if opt.KernelCache == CacheOn {
		po.Store = f.store
	}
	var err error
	if f.loader, err = prefetch.NewLoader(x, f.shards, po); err != nil {
		f.Close()
		return nil, err
	}
	for id := range x.Len() {
		if e := x.Entry(layout.ID(id)); !e.IsDir() {
			f.files++
			f.bytes += e.Size
		}
	}
	f.stats = newStats(f)
	f.ctl.init(f)
	if _, ok := x.Lookup(layout.Root, ctlName); ok {
		f.log.Warn("the shard set has a top-level entry named " + ctlName + "; the control directory hides it")
	}
	return f, nil
}

// store pushes sample id, read ahead, into the kernel's page cache (NOTIFY_STORE) and reports
// whether the kernel took it. The kernel refuses (ENOENT) when it holds no inode for the file;
// the sample is then read by READ as usual.
func (f *FS) store(id layout.ID, data []byte) bool {
	srv := f.srv.Load()
	if srv == nil {
		return false
	}
	st := srv.InodeNotifyStoreCache(uint64(id)+1, 0, data)
	if st != fuse.OK && st != fuse.ENOENT {
		f.log.Debug("NOTIFY_STORE refused", zap.Uint32("id", uint32(id)), zap.Stringer("status", st))
	}
	return st == fuse.OK
}

// Arrived is told that bytes data of the shard named shard, from offset off, have just come
// from a slow source (a disk cache's fetch from S3; diskcache.Options.Arrived): with
// CacheOn, the samples inside them that this epoch has not read yet go into the kernel's page
// cache (prefetch.Loader.Arrived). Call it after the readers waiting for the bytes were woken.
func (f *FS) Arrived(shard string, off int64, data []byte) {
	if i, ok := f.shardN[shard]; ok {
		f.loader.Arrived(i, off, data)
	}
}

// Stats returns the FS's request statistics.
func (f *FS) Stats() *Stats { return f.stats }

// Close closes the shards. It is idempotent; call it after the server has stopped.
func (f *FS) Close() error {
	f.closeOnce.Do(func() {
		if f.loader != nil {
			f.loader.Close()
		}
		for _, s := range f.shards {
			s.Close()
		}
	})
	return nil
}

func (f *FS) String() string { return "aifs" }

// entry returns the index entry for inode ino, or false if ino is not an index inode.
func (f *FS) entry(ino uint64) (layout.ID, layout.Entry, bool) {
	if ino == 0 || ino > uint64(f.x.Len()) {
		return 0, layout.Entry{}, false
	}
	id := layout.ID(ino - 1)
	return id, f.x.Entry(id), true
}

// fillAttr sets a from entry e with inode ino.
func (f *FS) fillAttr(a *fuse.Attr, ino uint64, e layout.Entry) {
	*a = fuse.Attr{Ino: ino, Mode: e.Mode, Blksize: blksize, Owner: fuse.Owner{Uid: f.uid, Gid: f.gid}}
	a.Mtime, a.Mtimensec = uint64(e.MTime/1e9), uint32(e.MTime%1e9)
	if e.MTime%1e9 < 0 { // before 1970: floor division, so the nanoseconds stay in [0, 1e9)
		a.Mtime, a.Mtimensec = uint64(e.MTime/1e9-1), uint32(e.MTime%1e9+1e9)
	}
	a.Atime, a.Atimensec, a.Ctime, a.Ctimensec = a.Mtime, a.Mtimensec, a.Mtime, a.Mtimensec
	if e.IsDir() {
		a.Nlink = 2
		a.Size = 4096
	} else {
		a.Nlink = 1
		a.Size = e.Size
		a.Blocks = (e.Size + 511) / 512
	}
}

func (f *FS) fillEntry(out *fuse.EntryOut, id layout.ID, e layout.Entry) {
	out.NodeId = uint64(id) + 1
	out.Generation = 1
	out.SetEntryTimeout(cacheTimeout)
	out.SetAttrTimeout(cacheTimeout)
	f.fillAttr(&out.Attr, out.NodeId, e)
}

// Lookup answers from the index. A missing name is a negative entry cached as long as a
// positive one, so repeated probes of absent names (Python's import machinery, globbing) cost
// one request each.
func (f *FS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	t := f.stats.start()
	st := f.lookup(h.NodeId, name, out)
	f.stats.done(opLookup, t, st)
	return st
}

func (f *FS) lookup(parent uint64, name string, out *fuse.EntryOut) fuse.Status {
	if f.ctl.owns(parent) || (parent == fuse.FUSE_ROOT_ID && name == ctlName) {
		return f.ctl.lookup(parent, name, out)
	}
	dir, d, ok := f.entry(parent)
	if !ok {
		return fuse.Status(syscall.ESTALE)
	}
	if !d.IsDir() {
		return fuse.Status(syscall.ENOTDIR)
	}
	id, ok := f.x.Lookup(dir, name)
	if !ok {
		*out = fuse.EntryOut{}
		out.SetEntryTimeout(cacheTimeout)
		return fuse.OK // NodeId 0: a cacheable negative entry
	}
	f.fillEntry(out, id, f.x.Entry(id))
	return fuse.OK
}

// Forget only counts: nothing is kept per inode.
func (f *FS) Forget(nodeid, nlookup uint64) { f.stats.done(opForget, f.stats.start(), fuse.OK) }

func (f *FS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	t := f.stats.start()
	st := fuse.OK
	if f.ctl.owns(in.NodeId) {
		st = f.ctl.getAttr(in.NodeId, out)
	} else if _, e, ok := f.entry(in.NodeId); ok {
		out.SetTimeout(cacheTimeout)
		f.fillAttr(&out.Attr, in.NodeId, e)
	} else {
		st = fuse.Status(syscall.ESTALE)
	}
	f.stats.done(opGetAttr, t, st)
	return st
}

// Open is answered with ENOSYS in CacheOn mode: the kernel then stops sending OPEN, FLUSH and
// RELEASE for all files and keeps their pages cached. In CacheOff mode every open is answered
// with FOPEN_DIRECT_IO. Control files are always direct.
func (f *FS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	t := f.stats.start()
	st := fuse.OK
	switch {
	case in.NodeId == ctlPlanIno:
		out.OpenFlags = fuse.FOPEN_DIRECT_IO
	case in.Flags&syscall.O_ACCMODE != syscall.O_RDONLY || in.Flags&syscall.O_TRUNC != 0:
		st = fuse.EROFS
	case f.opt.KernelCache == CacheOn && !f.ctl.owns(in.NodeId):
		st = fuse.ENOSYS
	default:
		out.OpenFlags = fuse.FOPEN_DIRECT_IO
	}
	f.stats.done(opOpen, t, st)
	return st
}

// Flush is never needed (nothing is written); ENOSYS stops the kernel sending it.
func (f *FS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	f.stats.done(opFlush, f.stats.start(), fuse.ENOSYS)
	return fuse.ENOSYS
}

func (f *FS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	f.stats.done(opRelease, f.stats.start(), fuse.OK)
}

// Ioctl answers ENOTTY at once: aifs files are not terminals (Python asks, with TCGETS, on
// every open) and support no other ioctl.
func (f *FS) Ioctl(cancel <-chan struct{}, in *fuse.IoctlIn, inbuf []byte, out *fuse.IoctlOut, outbuf []byte) fuse.Status {
	st := fuse.Status(syscall.ENOTTY)
	f.stats.done(opIoctl, f.stats.start(), st)
	return st
}

// Read returns [Offset, Offset+Size) of a sample, clipped to its end, from the prefetch
// loader: the whole sample, held by reference and sent to the kernel without a copy. Samples
// too large to be fetched whole are read READ by READ from the shard (lent by a
// backend.Viewer, or into the request's buffer).
func (f *FS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	t := f.stats.start()
	r := readResults.Get().(*readResult)
	var st fuse.Status
	if f.ctl.owns(in.NodeId) {
		var n int
		n, st = f.ctl.read(in.NodeId, in.Offset, buf[:min(int(in.Size), len(buf))])
		r.data = buf[:n]
	} else {
		st = f.read(cancel, in, buf, r)
	}
	f.stats.doneRead(t, st, len(r.data))
	if st != fuse.OK {
		r.Done()
		return nil, st
	}
	return r, fuse.OK
}

func (f *FS) read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte, r *readResult) fuse.Status {
	id, e, ok := f.entry(in.NodeId)
	switch {
	case !ok:
		return fuse.Status(syscall.ESTALE)
	case e.IsDir():
		return fuse.Status(syscall.EISDIR)
	case in.Offset >= e.Size:
		return fuse.OK
	}
	n := min(e.Size-in.Offset, uint64(in.Size), uint64(len(buf)))
	s, err := f.loader.Read(cancel, id, e, int64(in.Offset), int64(in.Offset+n))
	if err == nil {
		r.view, r.data = s, s.Bytes()[in.Offset:in.Offset+n]
		return fuse.OK
	}
	if !prefetch.IsTooLarge(err) {
		if errors.Is(err, context.Canceled) {
			return fuse.EINTR
		}
		return f.errno("read", id, err)
	}
	off := int64(e.Offset + in.Offset)
	// The read is not cancelled when the kernel interrupts the request: an O_DIRECT pread
	// cannot be stopped, and building a context per READ would cost an allocation.
	ctx := context.Background()
	sh := f.shards[e.Shard]
	if f.verified != nil && f.verified[id/64].Load()&(1<<(id%64)) == 0 {
		if err := f.verifyLarge(ctx, sh, id, e); err != nil {
			return f.errno("read", id, err)
		}
		f.verified[id/64].Or(1 << (id % 64))
	}
	if v, ok := sh.(backend.Viewer); ok {
		if r.view, err = v.View(ctx, off, int(n)); err == nil {
			r.data = r.view.Bytes()
			if len(r.data) != int(n) { // a backend bug: a short READ would look like the end of the file
				err = fmt.Errorf("shard %d [%d,+%d): the backend lent %d bytes: %w", e.Shard, off, n, len(r.data), io.ErrUnexpectedEOF)
			}
		}
	} else if err = sh.ReadAt(ctx, buf[:n], off); err == nil {
		r.data = buf[:n]
	}
	if err != nil {
		return f.errno("read", id, err)
	}
	return fuse.OK
}

// verifyLarge checks the checksum of sample id, too large for the loader, by reading it
// whole once in pieces (Prefetch.Verify): a large sample costs one more read of itself.
func (f *FS) verifyLarge(ctx context.Context, sh backend.Shard, id layout.ID, e layout.Entry) error {
	buf := make([]byte, min(e.Size, 4<<20))
	var crc uint32
	for done := uint64(0); done < e.Size; {
		n := min(e.Size-done, uint64(len(buf)))
		if err := sh.ReadAt(ctx, buf[:n], int64(e.Offset+done)); err != nil {
			return err
		}
		crc = layout.UpdateChecksum(crc, buf[:n])
		done += n
	}
	err := prefetch.CheckSample(f.x, id, e, crc)
	if err != nil {
		f.loader.CountCorrupt()
	}
	return err
}

// readResult hands READ data to go-fuse: bytes in the request's buffer, or a View (a
// prefetch.Sample or a backend's lent buffer), released when go-fuse calls Done after sending. Instances are pooled, so a READ
// allocates nothing.
type readResult struct {
	data []byte
	view backend.View // nil unless data is lent
	vec  [1][]byte    // for Slices
}

var readResults = sync.Pool{New: func() any { return new(readResult) }}

func (r *readResult) Bytes([]byte) ([]byte, fuse.Status) { return r.data, fuse.OK }

// Slices makes go-fuse write the data with writev and call Done only after that write. With
// splice disabled, go-fuse calls Bytes and then Done at once for a result without Slices,
// before the bytes are written: a lent buffer would go back to the pool while the kernel
// still had to copy it, and another READ's data could be sent in its place.
func (r *readResult) Slices() ([][]byte, fuse.Status) {
	r.vec[0] = r.data
	return r.vec[:], fuse.OK
}
func (r *readResult) Size() int { return len(r.data) }
func (r *readResult) Done() {
	if r.view != nil {
		r.view.Release()
	}
	*r = readResult{}
	readResults.Put(r)
}

// OpenDir lets the kernel cache directory contents (FOPEN_CACHE_DIR): a second scan of the
// tree is served without requests.
func (f *FS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	t := f.stats.start()
	st := fuse.OK
	if f.ctl.owns(in.NodeId) {
		out.OpenFlags = fuse.FOPEN_DIRECT_IO // never cached: its listing is not the tree's
	} else if _, e, ok := f.entry(in.NodeId); !ok {
		st = fuse.Status(syscall.ESTALE)
	} else if !e.IsDir() {
		st = fuse.Status(syscall.ENOTDIR)
	} else {
		out.OpenFlags = fuse.FOPEN_KEEP_CACHE | fuse.FOPEN_CACHE_DIR
	}
	f.stats.done(opOpenDir, t, st)
	return st
}

func (f *FS) ReleaseDir(in *fuse.ReleaseIn) {}

func (f *FS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	t := f.stats.start()
	st := f.readDir(in, out, false)
	f.stats.done(opReadDir, t, st)
	return st
}

func (f *FS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	t := f.stats.start()
	st := f.readDir(in, out, true)
	f.stats.done(opReadDirPlus, t, st)
	return st
}

// readDir lists directory in.NodeId from position in.Offset: 0 is ".", 1 is "..", 2+k the
// k-th child. Each entry carries its type; with plus, also its attributes.
func (f *FS) readDir(in *fuse.ReadIn, out *fuse.DirEntryList, plus bool) fuse.Status {
	if f.ctl.owns(in.NodeId) {
		return f.ctl.readDir(in, out, plus)
	}
	dir, d, ok := f.entry(in.NodeId)
	if !ok {
		return fuse.Status(syscall.ESTALE)
	}
	if !d.IsDir() {
		return fuse.Status(syscall.ENOTDIR)
	}
	for pos := in.Offset; pos < 2+uint64(d.NumChildren); pos++ {
		var id layout.ID
		var name string
		switch pos {
		case 0:
			id, name = dir, "."
		case 1:
			id, name = d.Parent, ".."
		default:
			id = d.FirstChild + layout.ID(pos-2)
			b := f.x.Name(id)
			name = unsafe.String(unsafe.SliceData(b), len(b)) // the index is immutable
			if dir == layout.Root && name == ctlName {
				continue // hidden by the control directory, which is never listed
			}
		}
		e := f.x.Entry(id)
		de := fuse.DirEntry{Name: name, Mode: e.Mode, Ino: uint64(id) + 1, Off: pos + 1}
		if !plus {
			if !out.AddDirEntry(de) {
				break
			}
			continue
		}
		eo := out.AddDirLookupEntry(de)
		if eo == nil {
			break
		}
		if pos >= 2 { // the kernel takes no reference on "." and ".."
			f.fillEntry(eo, id, e)
		}
	}
	return fuse.OK
}

// StatFs reports the shard set's size as used blocks and its entries as used inodes.
func (f *FS) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	const frsize = 4096
	*out = fuse.StatfsOut{
		Blocks:  (f.bytes + frsize - 1) / frsize,
		Files:   uint64(f.x.Len()),
		Bsize:   blksize,
		Frsize:  frsize,
		NameLen: 255,
	}
	f.stats.done(opStatFs, f.stats.start(), fuse.OK)
	return fuse.OK
}

// Everything that would change the tree is refused with EROFS. The kernel mount is read-write
// only so that the plan file can be written (unless mounted with -o ro): these handlers are
// what keeps the tree read-only.

// SetAttr accepts only truncating the plan file (open with O_TRUNC), which changes nothing.
func (f *FS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	if in.NodeId == ctlPlanIno && in.Valid&^(fuse.FATTR_SIZE|fuse.FATTR_FH|fuse.FATTR_LOCKOWNER) == 0 && in.Size == 0 {
		return f.ctl.getAttr(in.NodeId, out)
	}
	return f.refuse()
}
func (f *FS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	return f.refuse()
}
func (f *FS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	return f.refuse()
}
func (f *FS) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	return f.refuse()
}
func (f *FS) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	return f.refuse()
}
func (f *FS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	return f.refuse()
}
func (f *FS) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	return f.refuse()
}
func (f *FS) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	return f.refuse()
}
func (f *FS) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	return f.refuse()
}
func (f *FS) RemoveXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	return f.refuse()
}
func (f *FS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	return f.refuse()
}
func (f *FS) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	return f.refuse()
}

// Write accepts the plan file's content (see control.go) and refuses everything else.
func (f *FS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	if in.NodeId != ctlPlanIno {
		return 0, f.refuse()
	}
	t := f.stats.start()
	n, st := f.ctl.writePlan(in.Pid, in.Offset, data)
	f.stats.done(opPlan, t, st)
	return n, st
}
func (f *FS) CopyFileRange(cancel <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	return 0, f.refuse()
}
func (f *FS) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	return f.refuse()
}

// Requests aifs does not implement are counted, then answered with ENOSYS, which most of them
// make the kernel remember (it stops sending them).

func (f *FS) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	return nil, f.other()
}
func (f *FS) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status { return f.other() }
func (f *FS) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	return 0, f.other()
}
func (f *FS) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	return 0, f.other()
}
func (f *FS) GetLk(cancel <-chan struct{}, in *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	return f.other()
}
func (f *FS) SetLk(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status  { return f.other() }
func (f *FS) SetLkw(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status { return f.other() }
func (f *FS) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	return f.other()
}
func (f *FS) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status    { return f.other() }
func (f *FS) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status { return f.other() }
func (f *FS) Statx(cancel <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	return f.other()
}

func (f *FS) other() fuse.Status {
	f.stats.done(opOther, f.stats.start(), fuse.ENOSYS)
	return fuse.ENOSYS
}

func (f *FS) refuse() fuse.Status {
	f.stats.done(opWrite, f.stats.start(), fuse.EROFS)
	return fuse.EROFS
}

// errno logs err, with the op, the sample's path and id, and returns its errno. A corrupt
// sample (prefetch.ErrCorrupt) is logged once, however often it is read.
func (f *FS) errno(op string, id layout.ID, err error) fuse.Status {
	st := errnoOf(err)
	if errors.Is(err, prefetch.ErrCorrupt) {
		if _, seen := f.loggedCorrupt.LoadOrStore(id, struct{}{}); seen {
			return st
		}
	}
	f.log.Error("request failed", zap.String("op", op), zap.String("path", f.x.Path(id)),
		zap.Uint32("id", uint32(id)), zap.String("errno", syscall.Errno(st).Error()), zap.Error(err))
	return st
}

var _ fuse.RawFileSystem = (*FS)(nil)
