// Package fs serves a shard set as a read-only FUSE file system. It is the only aifs package that
// imports go-fuse: a thin adapter over go-fuse's raw fuse.RawFileSystem that answers namespace
// requests (LOOKUP, GETATTR, READDIR[PLUS], STATFS) from the in-memory layout.Index and READs
// from the backend, with no Go object per file: the inode number of entry id is id+1 (the root
// is 1, FUSE_ROOT_ID), FORGET is a no-op, and every attribute is decoded from the index on
// demand. The data is immutable, so entry and attribute timeouts are long.
//
// The request count per sample is kept as low as the kernel allows (docs/design.md): a sample's
// st_blksize is 1 MiB so Python's buffered reader asks for all of it in one read(2), OPEN and
// FLUSH are answered with ENOSYS so the kernel stops sending them (and RELEASE), ioctls get
// ENOTTY at once, and the first READ of a sample pushes the rest of it into the page cache
// (prefetch.Options.Push). With that, one PIL.Image.open(f).convert() costs IOCTL(TCGETS) +
// READ. Files larger than a sample look like ext4's to readers (4 KiB blocks, the kernel's own
// read-ahead), so random access to them costs what it costs natively.
//
// The kernel mount is read-only (mount.go): no write, writable shared mapping or truncate reaches
// the tree, whoever asks; the handlers in readonly.go answer EROFS as a second line.
//
// A hidden control directory, /.aifs, is reachable by name but never listed (ImageFolder would
// take it for a class); it holds the stats file (control.go), the plan file, which takes plans
// by ioctl (plan.go), and the locations file, where each file's bytes lie (locations.go). Counters and latencies of every request live in Stats (stats.go); errors
// become errnos in one place (errno.go).
//
// This package may import layout, backend, plan and prefetch.
package fs

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/aifs/aifs/backend"
	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/plan"
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
	// NoPlans refuses plans (EPERM): the mount reads ahead only from the reads it sees
	// (-o plans=off, for measuring what plans are worth). Default: false, plans are taken.
	NoPlans bool
	// Storage adds the statistics of the storage below the loader to the stats file, under
	// "storage" by name (s3 requests, disk cache hits). Each func is called once per snapshot
	// and returns a value that encodes as a JSON object of numbers. Default: none.
	Storage map[string]func() any
	// DataPlane is reported in the stats file. Default: empty, read as the FUSE plane.
	DataPlane DataPlane
	// Restarts is how many daemons served this mount before this one (a keeper's restarts
	// and upgrades: docs/reliability.md), reported in the stats file. Default: 0.
	Restarts uint64
	// KeeperPID is the pid of the keeper that started this daemon, 0 if none (the stats
	// file's daemon.keeper_pid: aifs upgrade signals it). Default: 0.
	KeeperPID int
}

// Timeouts for the kernel's entry and attribute caches: the shard set never changes while it
// is mounted, so an hour is as good as forever and still lets a pathological kernel cache age.
const cacheTimeout = time.Hour

// blksize is the st_blksize of a sample (a file of at most blksize bytes) and of the control
// files: Python's io.open sizes its buffer from it, and a buffer of 1 MiB reads a whole sample
// in one read(2) and so one READ (docs/design.md).
const blksize = 1 << 20

// largeBlksize is the st_blksize of a file larger than blksize, as ext4 reports it: a buffered
// reader that seeks and reads a little at a time (numpy, h5py, Python's io at random offsets)
// then reads about a page per read, not 1 MiB (256 times the bytes for a 4 KiB read).
const largeBlksize = 4096

// blksizeOf returns the st_blksize of a file of size bytes.
func blksizeOf(size uint64) uint32 {
	if size > blksize {
		return largeBlksize
	}
	return blksize
}

// FS answers FUSE requests for one shard set. Create it with New, serve it with Mount, and
// Close it after the server has stopped.
type FS struct {
	fuse.RawFileSystem // ENOSYS for every op not defined below

	x      *layout.Index
	loader *prefetch.Loader
	srv    atomic.Pointer[fuse.Server] // set by Mount, for NOTIFY_STORE
	mnt    string                      // the absolute mountpoint, set by Mount before srv
	opt    Options
	log    *zap.Logger
	stats  *Stats
	ctl    control
	uid    uint32
	gid    uint32

	lastRead atomic.Int64 // when the last READ of a sample came (UnixNano), for drop

	failures failLog // which failed READs are logged (errno.go)

	closeOnce sync.Once
}

// New returns an FS serving x, whose loader opens every shard of x through b (a missing or
// mismatched shard is an error naming it, so a bad shard set never gets mounted). The caller
// keeps b and closes it after the FS.
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
	po := opt.Prefetch
	po.KeepRead = opt.KernelCache == CacheOff
	if opt.KernelCache == CacheOn && po.WillNeed == nil { // else another serving path carries them out
		po.Push, po.Drop = f.push, f.drop
	}
	var err error
	if f.loader, err = prefetch.NewLoader(ctx, x, b, po); err != nil {
		return nil, err
	}
	f.stats = newStats(f)
	f.ctl.init(f)
	if _, err := x.Lookup(layout.Root, ctlName); err == nil {
		f.log.Warn("the shard set has a top-level entry named " + ctlName + "; the control directory hides it")
	}
	return f, nil
}

// push pushes data, the bytes of sample id from offset off to its end, into the kernel's page
// cache (NOTIFY_STORE; prefetch.Options.Push) and reports whether the kernel took them. The
// kernel refuses (ENOENT) when it holds no inode for the file, and before the mount is live
// there is no kernel to push to; the sample is then read by READ as usual.
func (f *FS) push(id layout.ID, off int64, data []byte) bool {
	srv := f.srv.Load()
	if srv == nil {
		return false
	}
	st := srv.InodeNotifyStoreCache(uint64(id)+1, off, data)
	if st != fuse.OK && st != fuse.ENOENT {
		f.log.Debug("NOTIFY_STORE refused", zap.Uint32("id", uint32(id)), zap.Int64("offset", off), zap.Stringer("status", st))
	}
	return st == fuse.OK
}

// drop drops sample id's pages from the kernel's page cache (prefetch.Options.Drop). While
// READs come (one in the last dropIdle), it opens the file through the mount and advises
// POSIX_FADV_DONTNEED, which drops its clean pages and nothing else. NOTIFY_INVAL_INODE, the
// FUSE way, also makes the kernel forget the file's attributes, so that its next read (a
// buffered reader reads past the end) costs a GETATTR and the reads are slower
// (docs/bench/edges-notes.md, "Dropping pages"). But an open file keeps the mount busy, so on a
// mount with no READ lately (a user may be unmounting it) drop uses NOTIFY_INVAL_INODE, as it
// does where the open fails; the GETATTR then falls on a read that is not coming soon. drop
// never runs on a READ's path: the kernel locks the pages to drop them, and waits for a READ
// that holds them. The open sends no request (no-open mode, entries cached for an hour), or a
// LOOKUP that another goroutine of the server answers.
func (f *FS) drop(id layout.ID) {
	srv := f.srv.Load()
	if srv == nil {
		return
	}
	if time.Now().UnixNano()-f.lastRead.Load() < int64(dropIdle) { // the mount is being read
		fd, err := unix.Open(filepath.Join(f.mnt, f.x.Path(id)), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			err = unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED)
			unix.Close(fd)
			if err == nil {
				return
			}
		}
	}
	if st := srv.InodeNotify(uint64(id)+1, 0, 0); st != fuse.OK && st != fuse.ENOENT {
		f.log.Debug("NOTIFY_INVAL_INODE refused", zap.Uint32("id", uint32(id)), zap.Stringer("status", st))
	}
}

// dropIdle: a mount with no READ for this long drops pages without opening files (FS.drop). It
// is short: drops come 10-20 ms after their READs (prefetch's ticks), so the drops that follow
// a workload's last READs, when a user may unmount, do not open files; a mount being read
// sends READs every few ms or less.
const dropIdle = 5 * time.Millisecond

// Arrived is told that bytes data of the shard named shard, from offset off, have just come
// from a slow source (a disk cache's fetch from S3; diskcache.Cache.OnArrived): with
// CacheOn, the samples inside them that this epoch has not read yet go into the kernel's page
// cache (prefetch.Loader.Arrived). Call it after the readers waiting for the bytes were woken.
func (f *FS) Arrived(shard string, off int64, data []byte) { f.loader.Arrived(shard, off, data) }

// Seen tells the loader that reader (a pid) read sample id on the kernel data plane
// (prefetch.Loader.Seen; kernel.Plane.Watch), and the stall statistics that the process reads
// the mount (readers.go).
func (f *FS) Seen(reader uint32, id layout.ID) {
	f.loader.Seen(reader, id)
	f.stats.readers.seen(reader, f.x.Entry(id).Size)
}

// Stats returns the FS's request statistics.
func (f *FS) Stats() *Stats { return f.stats }

// Close closes the loader, and with it the shards. It is idempotent; call it after the server
// has stopped.
func (f *FS) Close() error {
	f.closeOnce.Do(f.loader.Close)
	return nil
}

func (f *FS) String() string { return "aifs" }

// entry returns the index entry for inode ino, or the status to answer: ESTALE if ino is not an
// index inode, EIO if its block of the index failed its checks (logged by errno).
func (f *FS) entry(ino uint64) (layout.ID, layout.Entry, fuse.Status) {
	if ino == 0 || ino > uint64(f.x.Len()) {
		return 0, layout.Entry{}, fuse.Status(syscall.ESTALE)
	}
	id := layout.ID(ino - 1)
	e := f.x.Entry(id)
	if e.Mode == 0 {
		return id, e, f.errno("index", id, f.x.Err())
	}
	return id, e, fuse.OK
}

// fillAttr sets a from entry e with inode ino.
func (f *FS) fillAttr(a *fuse.Attr, ino uint64, e layout.Entry) {
	*a = fuse.Attr{Ino: ino, Mode: e.Mode, Blksize: blksizeOf(e.Size), Owner: fuse.Owner{Uid: f.uid, Gid: f.gid}}
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
	st := f.lookup(h.Pid, h.NodeId, name, out)
	f.stats.doneBy(opLookup, t, st, h.Pid, 0, f.ctl.owns(h.NodeId) || h.NodeId == fuse.FUSE_ROOT_ID && name == ctlName)
	return st
}

func (f *FS) lookup(caller uint32, parent uint64, name string, out *fuse.EntryOut) fuse.Status {
	if f.ctl.owns(parent) || (parent == fuse.FUSE_ROOT_ID && name == ctlName) {
		return f.ctl.lookup(caller, parent, name, out)
	}
	dir, d, st := f.entry(parent)
	if st != fuse.OK {
		return st
	}
	if !d.IsDir() {
		return fuse.Status(syscall.ENOTDIR)
	}
	id, err := f.x.Lookup(dir, name)
	if err == layout.ErrNotFound {
		*out = fuse.EntryOut{}
		out.SetEntryTimeout(cacheTimeout)
		return fuse.OK // NodeId 0: a cacheable negative entry
	} else if err != nil {
		return f.errno("lookup", dir, err)
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
	} else if _, e, est := f.entry(in.NodeId); est == fuse.OK {
		out.SetTimeout(cacheTimeout)
		f.fillAttr(&out.Attr, in.NodeId, e)
	} else {
		st = est
	}
	f.stats.doneBy(opGetAttr, t, st, in.Pid, 0, f.ctl.owns(in.NodeId))
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
	f.stats.doneBy(opOpen, t, st, in.Pid, 0, f.ctl.owns(in.NodeId))
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

// Ioctl takes plans on the plan file (plan.go) and answers every other ioctl ENOTTY at once:
// aifs files are not terminals (Python asks, with TCGETS, on every open).
func (f *FS) Ioctl(cancel <-chan struct{}, in *fuse.IoctlIn, inbuf []byte, out *fuse.IoctlOut, outbuf []byte) fuse.Status {
	t := f.stats.start()
	if in.NodeId == ctlPlanIno && in.Cmd == plan.Ioctl {
		st := f.ctl.ioctlPlan(in.Pid, inbuf)
		f.stats.done(opPlan, t, st)
		return st
	}
	st := fuse.Status(syscall.ENOTTY)
	f.stats.done(opIoctl, t, st)
	return st
}

// OpenDir lets the kernel cache directory contents (FOPEN_CACHE_DIR): a second scan of the
// tree is served without requests.
func (f *FS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	t := f.stats.start()
	st := fuse.OK
	if f.ctl.owns(in.NodeId) {
		out.OpenFlags = fuse.FOPEN_DIRECT_IO // never cached: its listing is not the tree's
	} else if _, e, est := f.entry(in.NodeId); est != fuse.OK {
		st = est
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
	dir, d, st := f.entry(in.NodeId)
	if st != fuse.OK {
		return st
	}
	if !d.IsDir() {
		return fuse.Status(syscall.ENOTDIR)
	}
	for pos := in.Offset; pos < 2+uint64(d.NumChildren); pos++ {
		var id layout.ID
		var name string
		var e layout.Entry
		switch pos {
		case 0:
			id, name, e = dir, ".", d
		case 1:
			id, name, e = d.Parent, "..", f.x.Entry(d.Parent)
		default:
			var err error
			if id, e, err = f.x.Child(dir, d, uint32(pos-2)); err != nil {
				// Its block failed its checks: the listing stops with what it has.
				if pos == in.Offset {
					return f.errno("readdir", dir, err)
				}
				return fuse.OK
			}
			b := f.x.Name(id)
			name = unsafe.String(unsafe.SliceData(b), len(b)) // the index is immutable
			if dir == layout.Root && name == ctlName {
				continue // hidden by the control directory, which is never listed
			}
		}
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
		Blocks:  (f.x.FileBytes() + frsize - 1) / frsize,
		Files:   uint64(f.x.Len()),
		Bsize:   blksize,
		Frsize:  frsize,
		NameLen: 255,
	}
	f.stats.done(opStatFs, f.stats.start(), fuse.OK)
	return fuse.OK
}

var _ fuse.RawFileSystem = (*FS)(nil)
