package kernel

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aifs/aifs/internal/mountinfo"
	"github.com/aifs/aifs/internal/wake"
	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/plan"
)

// Plane carries out the Loader's decisions on the files of a kernel plane mount
// (prefetch.Options.WillNeed and Drop) and tells it which were read (Watch). Its methods are
// safe for concurrent use.
type Plane struct {
	mnt string // the mountpoint, absolute, without a trailing slash
	x   *layout.Index
	// disks are the stat files (/sys/dev/block/MAJ:MIN/stat) of the block devices the shards
	// lie on, base the sectors read from them when the Plane was made, and mean the mean
	// sample's bytes (Misses).
	disks []string
	base  uint64
	mean  uint64
}

// NewPlane returns the Plane of the kernel plane mount at mnt, serving x from the shard files
// shards.
func NewPlane(mnt string, x *layout.Index, shards []string) *Plane {
	p := &Plane{mnt: filepath.Clean(mnt), x: x, mean: 1}
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
	p.base = p.sectors()
	return p
}

// Misses estimates how many sample reads on the plane have missed the page cache since it was
// made: the bytes read from the block devices under the shards (EROFS reads a missing sample
// from its shard, with directio straight from the device) over the mean sample's. Reads ahead
// count too, and so does anything else that reads those devices; a shard on no block device (a
// network or memory file system) counts nothing. It stands in for the misses of READs that open
// chunk reads on the FUSE plane (prefetch.Options.Misses).
func (p *Plane) Misses() uint64 { return (p.sectors() - p.base) * 512 / p.mean }

// sectors returns the sectors read so far from the devices under the shards.
func (p *Plane) sectors() uint64 {
	var n uint64
	for _, f := range p.disks {
		s, _ := sectorsRead(f)
		n += s
	}
	return n
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

// Watch tells seen of every file of the mount that a process (reader, its pid) closes after
// reading, until ctx is done: fanotify FAN_CLOSE_NOWRITE on the whole mount, read in batches by
// this goroutine, which waits gather after each. The events are notifications, so no reader waits for Watch; the queue is
// unlimited, so none is lost (an overflow, were it to come, is skipped). Closes of directories,
// of files not in the index and the daemon's own (WillNeed, Drop) are not told. It returns ctx's end as nil, or why
// it could not watch.
func (p *Plane) Watch(ctx context.Context, seen func(reader uint32, id layout.ID)) error {
	fan, err := unix.FanotifyInit(unix.FAN_CLASS_NOTIF|unix.FAN_CLOEXEC|unix.FAN_UNLIMITED_QUEUE|unix.FAN_NONBLOCK,
		unix.O_RDONLY|unix.O_LARGEFILE|unix.O_CLOEXEC|unix.O_NOATIME)
	if err != nil {
		return fmt.Errorf("fanotify_init: %w", err)
	}
	defer unix.Close(fan)
	if err := unix.FanotifyMark(fan, unix.FAN_MARK_ADD|unix.FAN_MARK_MOUNT, unix.FAN_CLOSE_NOWRITE, unix.AT_FDCWD, p.mnt); err != nil {
		return fmt.Errorf("fanotify_mark %s: %w", p.mnt, err)
	}
	end, release, err := wake.Pipe(ctx.Done())
	if err != nil {
		return err
	}
	defer release()
	buf := make([]byte, 64<<10)
	link := make([]byte, unix.PathMax)
	prefix := p.mnt + "/"
	self := uint32(os.Getpid())
	fds := []unix.PollFd{{Fd: int32(fan), Events: unix.POLLIN}, {Fd: int32(end), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("poll fanotify: %w", err)
		}
		if ctx.Err() != nil {
			return nil
		}
		for {
			n, err := unix.Read(fan, buf)
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) || n <= 0 {
				break
			}
			if err != nil {
				return fmt.Errorf("read fanotify: %w", err)
			}
			for b := buf[:n]; len(b) >= eventSize; {
				evLen := binary.NativeEndian.Uint32(b[0:4])
				if evLen < eventSize || int(evLen) > len(b) {
					break
				}
				fd := int32(binary.NativeEndian.Uint32(b[16:20]))
				pid := binary.NativeEndian.Uint32(b[20:24])
				b = b[evLen:]
				if fd < 0 { // FAN_NOFD: a queue overflow
					continue
				}
				// The daemon's own opens (WillNeed, Drop) are not reads.
				if pid != self {
					if id, ok := p.idOf(int(fd), link, prefix); ok {
						seen(pid, id)
					}
				}
				unix.Close(int(fd))
			}
		}
		time.Sleep(gather)
	}
}

// gather is how long Watch lets events gather after a batch. At 36,000 files/s (8 readers of a
// warm epoch on 2 cores) a wakeup every few events cost the daemon half its time in poll; after
// 1 ms a wakeup takes tens of events, and the Loader learns of a read at most that much later
// (docs/kernel.md, "What the daemon costs a sample", where FID mode is ruled out).
const gather = time.Millisecond

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
