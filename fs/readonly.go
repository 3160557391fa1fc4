package fs

import "github.com/hanwen/go-fuse/v2/fuse"

// Everything that would change the tree is refused with EROFS. The kernel mount is read-only
// (mount.go), so the kernel refuses these itself before they reach aifs; the handlers are the
// second line, for a mount made by other means (go-fuse's own tests, a future rw option).

func (f *FS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
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

func (f *FS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	return 0, f.refuse()
}
func (f *FS) CopyFileRange(cancel <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	return 0, f.refuse()
}
func (f *FS) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	return f.refuse()
}

// Files have no extended attributes. GETXATTR is answered ENOSYS, once: the kernel then stops
// sending it for the mount's life (no_getxattr) and answers getxattr(2) EOPNOTSUPP itself, so
// ls -l (two lookups an entry: security.selinux, system.posix_acl_access) and cp -a cost no
// round trip; ENODATA, a native file system's answer, the kernel never remembers, and it cost
// ls -lR 5-9× ext4 (docs/bench/edges-notes.md, "Extended attributes"). LISTXATTR stays an empty
// list, as a native file system without any answers, so that getfattr -d, tar --xattrs and
// cp -a, which list first, stay silent; only getfattr -n NAME says "Operation not supported".

func (f *FS) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	f.stats.done(opXattr, f.stats.start(), fuse.OK) // the answer, not a failure
	return 0, fuse.ENOSYS
}
func (f *FS) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	f.stats.done(opXattr, f.stats.start(), fuse.OK)
	return 0, fuse.OK
}

// Requests aifs does not implement are counted, then answered with ENOSYS, which most of them
// make the kernel remember (it stops sending them).

func (f *FS) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	return nil, f.other()
}
func (f *FS) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status { return f.other() }
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
