package kernel

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/aifs/aifs/internal/mountinfo"
	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/plan"
)

// Plane carries out the Loader's decisions on the files of a kernel plane mount
// (prefetch.Options.WillNeed and Drop) and tells it which were read (Watch) and how many of them
// missed the page cache (Misses). Its methods are safe for concurrent use.
type Plane struct {
	mnt  string // the mountpoint, absolute, without a trailing slash
	x    *layout.Index
	mean uint64 // the mean sample's bytes

	// disks are the stat files (/sys/dev/block/MAJ:MIN/stat) of the block devices the shards
	// lie on (StorageReads).
	disks []string

	mu sync.Mutex
	// readers holds each reader that Watch has told of (a pid) with the bytes it had read from
	// storage at the last look (/proc/PID/io); missed sums what they read from storage since.
	readers map[uint32]uint64
	missed  uint64
	// w is Watch's group until its Run ends; quiet, whether its marks are off (Quiet).
	w     *Watcher
	quiet bool
}

// NewPlane returns the Plane of the kernel plane mount at mnt, serving x from the shard files
// shards.
func NewPlane(mnt string, x *layout.Index, shards []string) *Plane {
	p := &Plane{mnt: filepath.Clean(mnt), x: x, mean: 1, readers: map[uint32]uint64{}}
	if n := uint64(x.Files()); n > 0 {
		p.mean = max(1, x.FileBytes()/n)
	}
	seen := map[uint64]bool{}
	for _, s := range shards {
		var st unix.Stat_t
		if unix.Stat(s, &st) != nil || seen[st.Dev] {
			continue
		}
		seen[st.Dev] = true
		f := fmt.Sprintf("/sys/dev/block/%d:%d/stat", unix.Major(st.Dev), unix.Minor(st.Dev))
		if _, ok := sectorsRead(f); ok {
			p.disks = append(p.disks, f)
		}
	}
	return p
}

// StorageReads returns the bytes read so far from the block devices under the shards, by any
// process (prefetch.Options.StorageReads: what wakes a quiet plane); 0 where the shards lie on
// no block device.
func (p *Plane) StorageReads() uint64 {
	var n uint64
	for _, f := range p.disks {
		s, _ := sectorsRead(f)
		n += s
	}
	return n * 512
}

// sectorsRead returns the sectors read field (the third) of a block device's stat file.
func sectorsRead(file string) (uint64, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return 0, false
	}
	n, err := strconv.ParseUint(f[2], 10, 64)
	return n, err == nil
}

// Quiet takes Watch's marks off (true), so that reads of the plane raise no event and cost
// their readers and the daemon nothing, or puts them back (false); prefetch.Options.Quiet.
// Before Watch has set its group up, it says how Watch starts.
func (p *Plane) Quiet(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.quiet == on {
		return
	}
	p.quiet = on
	if p.w != nil {
		if err := p.w.mark(!on); err != nil {
			p.quiet = !on // as the marks are
		}
	}
}

// Misses estimates how many sample reads on the plane have missed the page cache: the bytes
// that the plane's readers (the processes Watch has seen read) read from storage since it first
// saw each (read_bytes of /proc/PID/io: EROFS reads a missing sample from its shard in the
// reader's own time, with directio straight from the device), over the mean sample's. The
// daemon's reads ahead are its own, and other processes' reads of the same disk theirs: neither
// counts. A reader's reads of other files count, and so do its misses before its first event.
// It stands in for the misses of READs that open chunk reads on the FUSE plane
// (prefetch.Options.Misses); it reads one small file per reader, once a tick.
func (p *Plane) Misses() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	for pid, last := range p.readers {
		now, ok := readBytes(pid)
		if !ok { // ended
			delete(p.readers, pid)
			continue
		}
		p.missed += now - min(now, last)
		p.readers[pid] = now
	}
	return p.missed / p.mean
}

// noteReaders adds the readers in pids that the Plane does not know yet to those Misses looks
// at, from now on.
func (p *Plane) noteReaders(pids []uint32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pid := range pids {
		if _, ok := p.readers[pid]; !ok {
			if n, ok := readBytes(pid); ok {
				p.readers[pid] = n
			}
		}
	}
}

// readBytes returns the bytes that process pid has read from storage (the read_bytes line of
// /proc/PID/io), and false if it cannot be read (the process has ended).
func readBytes(pid uint32) (uint64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/io")
	if err != nil {
		return 0, false
	}
	_, rest, ok := strings.Cut(string(b), "\nread_bytes: ")
	if !ok {
		return 0, false
	}
	line, _, _ := strings.Cut(rest, "\n")
	n, err := strconv.ParseUint(line, 10, 64)
	return n, err == nil
}

// open opens sample id's file on the mount, read-only, without updating its atime and without
// a controlling terminal. The open is the kernel's: a path walk in the dentry cache, no daemon.
func (p *Plane) open(id layout.ID) (int, error) {
	return unix.Open(p.mnt+"/"+p.x.Path(id), unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOATIME|unix.O_NOCTTY, 0)
}

// WillNeed asks the kernel to read sample id into the page cache (POSIX_FADV_WILLNEED, the
// kernel's read-ahead of the whole file; prefetch.Options.WillNeed). It reports whether the
// kernel took the request. The read runs in the background; with wait, WillNeed returns once
// the file's last byte is read (a read of it, which waits for its page), so that a chunk read's
// flight lasts as long as its reads.
func (p *Plane) WillNeed(id layout.ID, wait bool) bool {
	fd, err := p.open(id)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	size := int64(p.x.Entry(id).Size)
	if unix.Fadvise(fd, 0, size, unix.FADV_WILLNEED) != nil {
		return false
	}
	if wait && size > 0 {
		var b [1]byte
		unix.Pread(fd, b[:], size-1)
	}
	return true
}

// Drop drops sample id's pages from the page cache (POSIX_FADV_DONTNEED: clean pages only, and
// an EROFS file's are always clean; prefetch.Options.Drop).
func (p *Plane) Drop(id layout.ID) {
	fd, err := p.open(id)
	if err != nil {
		return
	}
	unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED)
	unix.Close(fd)
}

// Watch sets up what tells which files of the mount processes read (a fanotify group, its
// events read by Watcher.Run) and puts its marks on, unless the Plane is quiet: reads from its
// return on are told, so a daemon calls it before it reports the mount live. The events name the
// file by its directory's handle and its name (watchNames) where the set has at most maxDirMarks
// directories, else by a descriptor of it (watchDescriptors); see docs/kernel.md, "What the
// daemon costs a sample".
func (p *Plane) Watch() (*Watcher, error) {
	w, err := p.watchNames()
	if errors.Is(err, errManyDirs) {
		w, err = p.watchDescriptors()
	}
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.quiet {
		if err := w.mark(true); err != nil {
			unix.Close(w.fan)
			return nil, err
		}
	}
	p.w = w
	return w, nil
}

// Run tells seen of every file of the mount that a process (reader, its pid) closes after
// reading, until ctx is done, and then closes the group: fanotify FAN_CLOSE_NOWRITE, read in
// batches, waiting gatherAfter after each. The events are notifications, so no reader waits for Run;
// the queue is unlimited, so none is lost (an overflow, were it to come, is skipped). Closes of
// directories, of files not in the index and the daemon's own (WillNeed, Drop) are not told.
// It returns ctx's end as nil, or why it could not go on.
func (w *Watcher) Run(ctx context.Context, seen func(reader uint32, id layout.ID)) error {
	p := w.p
	defer func() {
		p.mu.Lock()
		p.w = nil
		p.mu.Unlock()
		unix.Close(w.fan)
	}()
	self := uint32(os.Getpid())
	var pids []uint32 // the readers of a batch
	events := 0       // in the batch
	return eachEvent(ctx, w.fan, func(ev []byte) {
		events++
		id, ok := w.id(ev)
		// The daemon's own opens (WillNeed, Drop) are not reads.
		if pid := binary.NativeEndian.Uint32(ev[20:24]); ok && pid != self {
			seen(pid, id)
			if !slices.Contains(pids, pid) {
				pids = append(pids, pid)
			}
		}
	}, func() {
		p.noteReaders(pids)
		pids = pids[:0]
		time.Sleep(gatherAfter(events))
		events = 0
	})
}

// eachEvent reads the events of fanotify group fan (non-blocking) until ctx is done, in
// batches (a wait, then reads until none is left), calling event with each event's bytes (its
// metadata and records, valid during the call) and then batch, if not nil, after each batch. It
// returns ctx's end as nil, or why it could not read.
//
// It waits in Go's network poller (a duplicate of fan, as an os.File), not in poll(2): a
// goroutine blocked in a system call holds its thread, which the runtime then replaces, and at a
// few hundred events a second that churn of threads cost the daemon more CPU than the events
// (docs/kernel.md, "What the daemon costs a sample").
func eachEvent(ctx context.Context, fan int, event func(ev []byte), batch func()) error {
	dup, err := unix.FcntlInt(uintptr(fan), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("fanotify: dup: %w", err)
	}
	f := os.NewFile(uintptr(dup), "fanotify")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("fanotify: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	buf := make([]byte, 64<<10)
	n := 0
	var rerr error
	readOne := func(fd uintptr) bool {
		n, rerr = unix.Read(int(fd), buf)
		return !errors.Is(rerr, unix.EAGAIN) // EAGAIN: wait for the poller
	}
	for {
		// Wait until an event can be read, and read it.
		if err := rc.Read(readOne); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("wait for fanotify: %w", err)
		}
		for {
			if errors.Is(rerr, unix.EAGAIN) || (rerr == nil && n <= 0) {
				break
			}
			if rerr != nil && !errors.Is(rerr, unix.EINTR) {
				return fmt.Errorf("read fanotify: %w", rerr)
			}
			for b := buf[:max(n, 0)]; len(b) >= eventSize; {
				evLen := binary.NativeEndian.Uint32(b[0:4])
				if evLen < eventSize || int(evLen) > len(b) {
					break
				}
				event(b[:evLen])
				b = b[evLen:]
			}
			if ctx.Err() != nil {
				return nil
			}
			n, rerr = unix.Read(dup, buf) // the rest of the batch, without waiting
		}
		if batch != nil {
			batch()
		}
	}
}

// maxDirMarks is the most directories whose files' events watchNames asks for: each is a mark
// that holds its directory's inode in memory (an ImageFolder tree has one per class). A variable
// for the tests, which watch a small set both ways.
var maxDirMarks = 1 << 16

// errManyDirs: the set has more than maxDirMarks directories.
var errManyDirs = errors.New("kernel plane: too many directories to mark")

// Watcher is a fanotify group watching a plane's reads (Plane.Watch), and how to find the file
// of its events.
type Watcher struct {
	fan int
	// dirs holds each directory of the index by its file handle (handle type and bytes, as an
	// event's directory record has them): a group of watchNames. Nil for watchDescriptors.
	dirs map[string]layout.ID
	// The path of an event's descriptor, and the mount's prefix in it (watchDescriptors).
	link   []byte
	prefix string
	p      *Plane
}

// watchNames sets up a group whose events name the file closed by its directory's handle and
// its name (FAN_REPORT_DFID_NAME), with a mark on each directory of the set for its files'
// closes. Nothing is opened for an event and no path is built: the daemon's cost a sample is
// half the descriptors'. A file-backed EROFS mount has no filesystem id, for which Linux (6.8+)
// takes marks on inodes only, hence the marks on every directory rather than one on the mount.
// They are on the file system, not on the mount, so reads through a bind mount of the plane (a
// container's volume) are seen as well.
func (p *Plane) watchNames() (*Watcher, error) {
	n, dirs := p.x.Dirs()
	if n > maxDirMarks {
		return nil, errManyDirs
	}
	fan, err := unix.FanotifyInit(unix.FAN_CLASS_NOTIF|unix.FAN_CLOEXEC|unix.FAN_UNLIMITED_QUEUE|unix.FAN_UNLIMITED_MARKS|
		unix.FAN_NONBLOCK|unix.FAN_REPORT_DFID_NAME, unix.O_RDONLY)
	if err != nil {
		return nil, fmt.Errorf("fanotify_init: %w", err)
	}
	w := &Watcher{fan: fan, dirs: make(map[string]layout.ID, n), p: p}
	for id := range dirs {
		path := p.mnt + "/" + p.x.Path(id)
		h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, path, 0)
		if err != nil {
			unix.Close(fan)
			return nil, fmt.Errorf("fanotify: the handle of %s: %w", path, err)
		}
		w.dirs[string(binary.NativeEndian.AppendUint32(nil, uint32(h.Type())))+string(h.Bytes())] = id
	}
	return w, nil
}

// mark puts the group's marks on (true) or takes them off (false): one on each directory of
// the set (a group of watchNames) or one on the mount (watchDescriptors).
func (w *Watcher) mark(on bool) error {
	switch {
	case w.dirs == nil && on:
		return markErr(w.p.mnt, unix.FanotifyMark(w.fan, unix.FAN_MARK_ADD|unix.FAN_MARK_MOUNT, unix.FAN_CLOSE_NOWRITE, unix.AT_FDCWD, w.p.mnt))
	case w.dirs == nil:
		return markErr(w.p.mnt, unix.FanotifyMark(w.fan, unix.FAN_MARK_REMOVE|unix.FAN_MARK_MOUNT, unix.FAN_CLOSE_NOWRITE, unix.AT_FDCWD, w.p.mnt))
	case !on:
		return markErr(w.p.mnt, unix.FanotifyMark(w.fan, unix.FAN_MARK_FLUSH, 0, unix.AT_FDCWD, w.p.mnt))
	}
	_, dirs := w.p.x.Dirs()
	for id := range dirs {
		path := w.p.mnt + "/" + w.p.x.Path(id)
		if err := unix.FanotifyMark(w.fan, unix.FAN_MARK_ADD|unix.FAN_MARK_ONLYDIR, unix.FAN_CLOSE_NOWRITE|unix.FAN_EVENT_ON_CHILD, unix.AT_FDCWD, path); err != nil {
			return markErr(path, err)
		}
	}
	return nil
}

// markErr gives a fanotify_mark error of path its context.
func markErr(path string, err error) error {
	if err != nil {
		return fmt.Errorf("fanotify_mark %s: %w", path, err)
	}
	return nil
}

// watchDescriptors sets up a group whose events come with a descriptor of the file closed, with
// one mark on the whole mount: for sets with more directories than maxDirMarks. The daemon reads
// each descriptor's path and looks it up. Reads through other mounts of the plane are not seen.
func (p *Plane) watchDescriptors() (*Watcher, error) {
	fan, err := unix.FanotifyInit(unix.FAN_CLASS_NOTIF|unix.FAN_CLOEXEC|unix.FAN_UNLIMITED_QUEUE|unix.FAN_NONBLOCK,
		unix.O_RDONLY|unix.O_LARGEFILE|unix.O_CLOEXEC|unix.O_NOATIME)
	if err != nil {
		return nil, fmt.Errorf("fanotify_init: %w", err)
	}
	return &Watcher{fan: fan, link: make([]byte, unix.PathMax), prefix: p.mnt + "/", p: p}, nil
}

// id returns the index entry of the file that event ev (its metadata and records) is about,
// closing the event's descriptor if it has one; false for an event of no file of the index
// (an overflow, a file not found).
func (w *Watcher) id(ev []byte) (layout.ID, bool) {
	fd := int32(binary.NativeEndian.Uint32(ev[16:20]))
	if w.dirs == nil {
		if fd < 0 { // FAN_NOFD: a queue overflow
			return 0, false
		}
		defer unix.Close(int(fd))
		return w.p.idOf(int(fd), w.link, w.prefix)
	}
	// The directory record after the metadata: a header (type, pad, length: 4 bytes), the
	// filesystem id (8), the handle's length (4) and type (4), the handle, the name and a NUL.
	meta := int(binary.NativeEndian.Uint16(ev[6:8]))
	if len(ev) < meta+20 || ev[meta] != unix.FAN_EVENT_INFO_TYPE_DFID_NAME {
		return 0, false
	}
	rec := ev[meta:]
	recLen := int(binary.NativeEndian.Uint16(rec[2:4]))
	hb := int(binary.NativeEndian.Uint32(rec[12:16]))
	if recLen > len(rec) || 20+hb >= recLen {
		return 0, false
	}
	dir, ok := w.dirs[string(rec[16:20+hb])]
	if !ok {
		return 0, false
	}
	name := rec[20+hb : recLen]
	if k := bytes.IndexByte(name, 0); k >= 0 {
		name = name[:k]
	}
	id, err := w.p.x.Lookup(dir, unsafe.String(unsafe.SliceData(name), len(name)))
	return id, err == nil
}

// gatherAfter is how long Watch lets events gather after a batch of n events. At 36,000 files/s
// (8 readers of a warm epoch on 2 cores) a wakeup every few events cost the daemon half its time
// in poll; after 1 ms a wakeup takes tens of events, and the Loader learns of a read at most that
// much later (docs/kernel.md, "What the daemon costs a sample", where FID mode is ruled out). At a
// few hundred files/s (RetinaNet's decoding readers) a batch is an event or two, and each wakeup,
// with the Go scheduler's threads it wakes, cost more than its events: after a batch of fewer
// than gatherMany events Watch waits gatherLong, so that it wakes at most 100 times a second.
func gatherAfter(n int) time.Duration {
	if n < gatherMany {
		return gatherLong
	}
	return gather
}

const (
	gather     = time.Millisecond
	gatherLong = 10 * time.Millisecond
	gatherMany = 64
)

// idOf returns the index entry of the file open at fd (an event's), found by its path under
// the mount; link is a buffer for the path.
func (p *Plane) idOf(fd int, link []byte, prefix string) (layout.ID, bool) {
	n, err := unix.Readlink("/proc/self/fd/"+strconv.Itoa(fd), link)
	if err != nil || n <= len(prefix) {
		return 0, false
	}
	path := string(link[:n])
	rel, ok := strings.CutPrefix(path, prefix)
	if !ok {
		return 0, false
	}
	id, err := p.x.LookupPath(rel)
	if err != nil {
		return 0, false
	}
	return id, true
}

// ControlRoot is the directory under which each kernel plane mount's control mount lies, at
// ControlDir of the plane's device number.
const ControlRoot = plan.KernelControlRoot

// ControlDir returns where the control mount of the kernel plane mount with device number dev
// ("major:minor", Dev) lies: a FUSE mount of the same set, whose .aifs holds the plan, stats and
// locations files. Clients find it from any path on the plane (docs/kernel.md).
func ControlDir(dev string) string { return filepath.Join(ControlRoot, dev) }

// MakeControlDir creates ControlDir(dev), empty, for the control mount of a plane just mounted
// with device number dev; a stale one (a daemon killed before it could remove it) is reused.
// A mount still there is a dead plane's control mount (a device number names one live file
// system at a time, and the new plane has dev now): it is detached, not mounted over.
func MakeControlDir(dev string) (string, error) {
	dir := ControlDir(dev)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("control directory: %w", err)
	}
	for range 8 { // stacked mounts, one at a time
		if _, ok := mountinfo.At(dir); !ok {
			return dir, nil
		}
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			return "", fmt.Errorf("control directory %s: detaching a dead plane's mount: %w", dir, err)
		}
	}
	return "", fmt.Errorf("control directory %s: mounts are still stacked on it", dir)
}

// eventSize is the size of struct fanotify_event_metadata: event_len u32, vers u8, reserved u8,
// metadata_len u16, mask u64, fd s32, pid s32.
const eventSize = 24
