package fs

import (
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/plan"
)

// The control directory, /.aifs, is found by LOOKUP but appears in no listing of the root. It
// holds the stats file, the plan file (docs/plan.md) and the locations file (locations.go). Its
// inode numbers start at ctlBase, far above any entry's (ids are 32-bit), so the two never meet.
const (
	ctlName    = plan.ControlDir
	statsName  = "stats"
	planName   = plan.ControlFile
	ctlBase    = 1 << 62
	ctlDirIno  = ctlBase
	ctlPlanIno = ctlBase | 1<<61 // above every stats snapshot's
	ctlLocIno  = ctlBase | 1<<60 // likewise
)

// The plan file takes the coming order of samples from trainers by ioctl (plan.go; the protocol
// is docs/plan.md). It always reads as empty.

// Each LOOKUP of .aifs/stats takes a snapshot of the statistics and gives it a new inode number
// whose size and bytes never change: a reader always sees one consistent JSON document, and the
// kernel's page cache (kept in no-open mode) can never serve an old snapshot under a new size.
// The entry is not cached, so every open looks it up again. The last snapshotRing snapshots are
// kept; a reader that holds an older one open gets ESTALE.
const snapshotRing = 64

type control struct {
	f   *FS
	loc *locations

	mu   sync.Mutex // guards gen and ring
	gen  uint64
	ring [snapshotRing]snapshotFile
}

type snapshotFile struct {
	ino  uint64
	data []byte
}

// init readies c. Snapshot inode numbers start at the daemon's start time in nanoseconds (below
// 2⁶⁰, so below ctlPlanIno): a daemon that takes a mount over from another (a keeper's restart)
// never gives a snapshot a number that the kernel still caches with the old daemon's bytes.
func (c *control) init(f *FS) {
	c.f, c.loc = f, newLocations(f.x, f.opt.Source)
	c.gen = uint64(f.stats.started.UnixNano()) % (1 << 60)
}

// owns reports whether ino is a control inode.
func (c *control) owns(ino uint64) bool { return ino >= ctlBase }

// lookup answers a LOOKUP in the control directory by thread caller, whose process tree and
// cgroup a new stats snapshot reports (aifs.stall).
func (c *control) lookup(caller uint32, parent uint64, name string, out *fuse.EntryOut) fuse.Status {
	switch {
	case parent == fuse.FUSE_ROOT_ID:
		*out = fuse.EntryOut{NodeId: ctlDirIno, Generation: 1}
		out.SetEntryTimeout(cacheTimeout)
		out.SetAttrTimeout(cacheTimeout)
		c.fillAttr(&out.Attr, ctlDirIno, 0)
		return fuse.OK
	case parent == ctlDirIno && name == statsName:
		data := c.f.stats.JSON(caller)
		c.mu.Lock()
		c.gen++
		ino := ctlDirIno + c.gen
		c.ring[c.gen%snapshotRing] = snapshotFile{ino: ino, data: data}
		c.mu.Unlock()
		*out = fuse.EntryOut{NodeId: ino, Generation: 1} // entry timeout 0: look up every time
		out.SetAttrTimeout(cacheTimeout)
		c.fillAttr(&out.Attr, ino, uint64(len(data)))
		return fuse.OK
	case parent == ctlDirIno && (name == planName || name == locationsName):
		ino := uint64(ctlPlanIno)
		if name == locationsName {
			ino = ctlLocIno
		}
		*out = fuse.EntryOut{NodeId: ino, Generation: 1}
		out.SetEntryTimeout(cacheTimeout)
		out.SetAttrTimeout(cacheTimeout)
		c.fillAttr(&out.Attr, ino, c.fixedSize(ino))
		return fuse.OK
	case parent == ctlDirIno:
		return fuse.ENOENT
	default:
		return fuse.Status(syscall.ENOTDIR)
	}
}

// snapshot returns the bytes of stats inode ino, or false if it is no longer kept.
func (c *control) snapshot(ino uint64) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.ring[(ino-ctlDirIno)%snapshotRing]
	return s.data, s.ino == ino && ino != ctlDirIno
}

// fillAttr sets the attributes of control inode ino. Its times are the daemon's start, to the
// nanosecond: a process that noted the locations file's mtime (python/aifs_direct.py) tells
// from it that the set was remounted, even where the new mount reuses the old one's device
// number (the kernel hands freed numbers out again).
func (c *control) fillAttr(a *fuse.Attr, ino, size uint64) {
	now, ns := uint64(c.f.stats.started.Unix()), uint32(c.f.stats.started.Nanosecond())
	*a = fuse.Attr{Ino: ino, Size: size, Blocks: (size + 511) / 512, Mtime: now, Atime: now, Ctime: now,
		Mtimensec: ns, Atimensec: ns, Ctimensec: ns,
		Mode: syscall.S_IFREG | 0o444, Nlink: 1, Blksize: blksize, Owner: fuse.Owner{Uid: c.f.uid, Gid: c.f.gid}}
	if ino == ctlDirIno {
		a.Mode, a.Nlink, a.Size, a.Blocks = syscall.S_IFDIR|0o555, 2, 4096, 8
	}
}

// fixedSize returns the size of the plan file (0) and the locations file.
func (c *control) fixedSize(ino uint64) uint64 {
	if ino == ctlLocIno {
		return c.loc.size()
	}
	return 0
}

func (c *control) getAttr(ino uint64, out *fuse.AttrOut) fuse.Status {
	size := c.fixedSize(ino)
	if ino != ctlDirIno && ino != ctlPlanIno && ino != ctlLocIno {
		data, ok := c.snapshot(ino)
		if !ok {
			return fuse.Status(syscall.ESTALE)
		}
		size = uint64(len(data))
	}
	out.SetTimeout(cacheTimeout)
	c.fillAttr(&out.Attr, ino, size)
	return fuse.OK
}

func (c *control) read(ino, off uint64, buf []byte) (int, fuse.Status) {
	switch ino {
	case ctlDirIno:
		return 0, fuse.Status(syscall.EISDIR)
	case ctlPlanIno:
		return 0, fuse.OK
	case ctlLocIno:
		n, err := c.loc.read(off, buf)
		if err != nil {
			return 0, c.f.errno("locations", layout.Root, err)
		}
		return n, fuse.OK
	}
	data, ok := c.snapshot(ino)
	if !ok {
		return 0, fuse.Status(syscall.ESTALE)
	}
	if off >= uint64(len(data)) {
		return 0, fuse.OK
	}
	return copy(buf, data[off:]), fuse.OK
}

// readDir lists the control directory: ".", "..", "locations", "plan", "stats". In READDIRPLUS no entry carries
// attributes (node id 0), so listing takes no snapshot.
func (c *control) readDir(in *fuse.ReadIn, out *fuse.DirEntryList, plus bool) fuse.Status {
	if in.NodeId != ctlDirIno {
		return fuse.Status(syscall.ENOTDIR)
	}
	names := [...]fuse.DirEntry{
		{Name: ".", Mode: syscall.S_IFDIR, Ino: ctlDirIno},
		{Name: "..", Mode: syscall.S_IFDIR, Ino: fuse.FUSE_ROOT_ID},
		{Name: locationsName, Mode: syscall.S_IFREG, Ino: ctlLocIno},
		{Name: planName, Mode: syscall.S_IFREG, Ino: ctlPlanIno},
		{Name: statsName, Mode: syscall.S_IFREG, Ino: ctlDirIno + 1},
	}
	for pos := in.Offset; pos < uint64(len(names)); pos++ {
		de := names[pos]
		de.Off = pos + 1
		if plus {
			if out.AddDirLookupEntry(de) == nil {
				break
			}
		} else if !out.AddDirEntry(de) {
			break
		}
	}
	return fuse.OK
}
