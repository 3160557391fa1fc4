package erofsmeta

import (
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"path"
	"time"

	"github.com/erofs/go-erofs"

	"github.com/aifs/aifs/layout"
)

// Build writes the metadata-only EROFS image of x to w, with blocks of blockSize bytes (a power
// of two from 512 to the block size Check returns). It runs Check first, so it reads and checks
// every block of the index and every entry, and writes nothing to w from an index that fails
// (that error, wrapped) or a set EROFS cannot serve (a *NotServable).
//
// The image holds the tree the FUSE plane shows, less its virtual .aifs directory: every name
// (any bytes but '/' and NUL), mode (permission, setuid, setgid and sticky bits), size and mtime
// to the nanosecond of the index; owner root (0:0), which is who mounts the kernel plane and so
// who the FUSE plane, run by root, shows; nlink 2 for a directory and 1 for a file, as the FUSE
// plane reports (a hard link of a tar is a file of its own, sharing the extent). Device i+1 is
// shard i of x.Shards(), in order, of the shard's size rounded up to blocks: the mount passes
// the shards' paths in that order. The same index and block size always give the same bytes.
//
// Build holds the whole tree in go-erofs's memory until the image is written, about 0.85 KB and
// 4.5 µs an entry (docs/bench/erofs-notes.md). It walks the index once, and for each shard the
// files of that shard (ExtentPos, ByExtent): O(entries + shards × depth).
func Build(x *layout.Index, w io.WriteSeeker, blockSize int) error {
	bs, err := Check(x)
	if err != nil {
		return err
	}
	if blockSize < MinBlockSize || blockSize > bs || blockSize&(blockSize-1) != 0 {
		return fmt.Errorf("erofs image: block size %d: the set's samples are aligned to %d bytes; give a power of two from %d to %d", blockSize, bs, MinBlockSize, bs)
	}
	if !haveStat {
		return errNotLinux
	}
	// The build time is the root's mtime: inodes with that mtime (to the second, no
	// nanoseconds) are written compact, and the image does not depend on the clock.
	sec, _ := splitTime(x.Entry(layout.Root).MTime)
	img := erofs.Create(w, erofs.WithBlockSize(blockSize), erofs.WithBuildTime(uint64(sec), 0))
	shards := x.Shards()
	// One CopyFrom per shard adds one device. The first also adds every directory (so that empty
	// ones are there); each adds its shard's files and the directories above them. A directory
	// added again keeps its children and gets the same attributes (CopyFrom without Merge, which
	// would take names beginning with ".wh." for whiteouts).
	for k := range max(len(shards), 1) {
		var src fs.FS = newPass(x, k, k == 0, blockSize)
		if len(shards) == 0 {
			src = deviceless{src.(*pass)}
		}
		if err := img.CopyFrom(src, erofs.MetadataOnly()); err != nil {
			return fmt.Errorf("erofs image: shard %d: %w", k, err)
		}
	}
	if err := x.Err(); err != nil { // CheckAll checked every block; this cannot fail, but costs nothing
		return fmt.Errorf("index: %w", err)
	}
	if err := img.Close(); err != nil {
		return fmt.Errorf("erofs image: %w", err)
	}
	if len(shards) > 0 {
		return fixDeviceTable(w)
	}
	return nil
}

// The superblock's place in an image, and its field that says where the device table lies, in
// units of a device slot (128 bytes).
const (
	superblockOffset = 1024
	superblockSize   = 128
	devtSlotOffField = superblockOffset + 88
	deviceSlotSize   = 128
)

// fixDeviceTable corrects a go-erofs v0.3.1 bug: it writes the device slots right after the
// superblock, at byte 1152, but records their place as 8 slots (byte 1024, the superblock itself)
// instead of 9, and its reader reads from the same wrong place (it uses no slot's contents, so
// its tests pass). Read so, device 1's slot is the superblock's bytes and device k's is device
// k-1's. Linux 6.18 maps a file-backed image's chunks without the slots' sizes, so it served
// such images right (TestKernelMount passes without the fix), but the slots are the format's
// (EROFS's tools, a flat or unified device layout read them): the image must say where they are.
func fixDeviceTable(w io.WriteSeeker) error {
	if _, err := w.Seek(devtSlotOffField, io.SeekStart); err != nil {
		return fmt.Errorf("erofs image: %w", err)
	}
	var b [2]byte
	binary.LittleEndian.PutUint16(b[:], (superblockOffset+superblockSize)/deviceSlotSize)
	if _, err := w.Write(b[:]); err != nil {
		return fmt.Errorf("erofs image: %w", err)
	}
	if _, err := w.Seek(0, io.SeekEnd); err != nil {
		return fmt.Errorf("erofs image: %w", err)
	}
	return nil
}

// pass is the fs.FS that one CopyFrom walks: the files of one shard (its device) and the
// directories above them, or every directory too. It answers fs.WalkDir only: Stat of the
// directories and ReadDir; its files are never opened (MetadataOnly). A pass is used by one
// goroutine.
type pass struct {
	x        *layout.Index
	bs       int
	blocks   uint64                    // the shard's size in blocks
	children map[layout.ID][]layout.ID // the children this pass lists, of each directory it holds
	dirs     map[string]layout.ID      // the directories listed so far by the path WalkDir gives them
}

// newPass returns the pass of shard k (none if the set has no shard), with every directory of
// the tree if allDirs.
func newPass(x *layout.Index, k int, allDirs bool, bs int) *pass {
	p := &pass{x: x, bs: bs, children: map[layout.ID][]layout.ID{layout.Root: nil}, dirs: map[string]layout.ID{".": layout.Root}}
	if allDirs {
		for id := layout.ID(1); id < layout.ID(x.Len()); id++ {
			if e := x.Entry(id); e.IsDir() {
				p.children[e.Parent] = append(p.children[e.Parent], id)
				if _, ok := p.children[id]; !ok {
					p.children[id] = nil
				}
			}
		}
	}
	if k >= len(x.Shards()) {
		return p
	}
	p.blocks = blocks(x.Shards()[k].Size, bs)
	for pos, end := x.ExtentPos(uint32(k), 0), x.ExtentPos(uint32(k)+1, 0); pos < end; pos++ {
		id := x.ByExtent(pos)
		p.add(id, x.Entry(id).Parent)
	}
	return p
}

// add lists id in its directory parent, and parent in its own, up to a directory already held.
func (p *pass) add(id, parent layout.ID) {
	for {
		_, held := p.children[parent]
		p.children[parent] = append(p.children[parent], id)
		if held {
			return
		}
		id, parent = parent, p.x.Entry(parent).Parent
	}
}

// DeviceBlocks is the size of the pass's shard in blocks: go-erofs adds a device of that size
// for the pass.
func (p *pass) DeviceBlocks() uint64 { return p.blocks }

// deviceless is the pass of a set with no shards (so with no file but empty ones): it adds
// no device.
type deviceless struct{ p *pass }

func (d deviceless) Open(name string) (fs.File, error)          { return d.p.Open(name) }
func (d deviceless) Stat(name string) (fs.FileInfo, error)      { return d.p.Stat(name) }
func (d deviceless) ReadDir(name string) ([]fs.DirEntry, error) { return d.p.ReadDir(name) }

func (p *pass) Open(name string) (fs.File, error) {
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid} // MetadataOnly opens no file
}

func (p *pass) Stat(name string) (fs.FileInfo, error) {
	id, ok := p.dirs[name]
	if !ok {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	return p.info(id), nil
}

func (p *pass) ReadDir(name string) ([]fs.DirEntry, error) {
	dir, ok := p.dirs[name]
	if !ok {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	kids := p.children[dir]
	out := make([]fs.DirEntry, len(kids))
	for i, id := range kids {
		fi := p.info(id)
		if fi.e.IsDir() {
			p.dirs[path.Join(name, fi.name)] = id
		}
		out[i] = fi
	}
	return out, nil
}

// info returns entry id as go-erofs reads it.
func (p *pass) info(id layout.ID) *fileInfo {
	fi := &fileInfo{e: p.x.Entry(id), name: string(p.x.Name(id))}
	fi.sys = statOf(fi.e)
	return fi
}

// fileInfo is an entry as an fs.FileInfo and fs.DirEntry, with what go-erofs takes from Sys (a
// *syscall.Stat_t: owner, mtime) and DataRange (a file's extent in the pass's device).
type fileInfo struct {
	e    layout.Entry
	name string
	sys  any
}

func (fi *fileInfo) Name() string { return fi.name }
func (fi *fileInfo) Size() int64 {
	if fi.e.IsDir() {
		return 0
	}
	return int64(fi.e.Size)
}
func (fi *fileInfo) Mode() fs.FileMode {
	m := fs.FileMode(fi.e.Mode & 0o777)
	if fi.e.Mode&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if fi.e.Mode&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if fi.e.Mode&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	if fi.e.IsDir() {
		m |= fs.ModeDir
	}
	return m
}
func (fi *fileInfo) ModTime() time.Time {
	sec, nsec := splitTime(fi.e.MTime)
	return time.Unix(sec, nsec)
}
func (fi *fileInfo) IsDir() bool                { return fi.e.IsDir() }
func (fi *fileInfo) Sys() any                   { return fi.sys }
func (fi *fileInfo) Type() fs.FileMode          { return fi.Mode().Type() }
func (fi *fileInfo) Info() (fs.FileInfo, error) { return fi, nil }

// DataRange is a non-empty file's extent: one range of device 0, the pass's shard.
func (fi *fileInfo) DataRange() []erofs.DataRange {
	if fi.e.IsDir() || fi.e.Size == 0 {
		return nil
	}
	return []erofs.DataRange{{Offset: int64(fi.e.Offset), Size: int64(fi.e.Size)}}
}

// splitTime splits nanoseconds since the epoch into seconds and nanoseconds in [0, 1e9), as
// the FUSE plane does (fs.fillAttr): floor division before 1970.
func splitTime(ns int64) (sec, nsec int64) {
	sec, nsec = ns/1e9, ns%1e9
	if nsec < 0 {
		sec, nsec = sec-1, nsec+1e9
	}
	return sec, nsec
}
