package fs

import (
	"os"
	"strings"
	"syscall"

	"github.com/aifs/aifs/internal/mountinfo"
	"go.uber.org/zap"
)

// guardReadOnly keeps the kernel mount at mnt read-only for as long as done is open: root can
// remount any mount read-write (mount -o remount,rw), and with OPEN answered ENOSYS (no-open
// mode) aifs would never see the opens for writing that then succeed. It waits for changes of
// the mount table (POLLPRI on /proc/self/mountinfo), and when its mount's
// superblock is read-write it remounts it read-only at once and counts it (Stats,
// rw_remounts_reverted). The window between the two is docs/reliability.md's: a file opened for
// writing in it keeps its descriptor, through which a writable shared mapping can still change
// the page cache (never the shards: every WRITE is refused). Only root can remount, so only a
// daemon running as root guards; for others it returns at once.
func (f *FS) guardReadOnly(mnt string, done <-chan struct{}) {
	if os.Geteuid() != 0 {
		return
	}
	id := ""
	err := mountinfo.Watch(done, func(table []byte) bool {
		var rw bool
		if id, rw = superblockRW(table, mnt, id); rw {
			f.revertRW(mnt)
		}
		return true
	})
	if err != nil {
		f.log.Warn("cannot watch the mount table: a read-write remount would not be reverted", zap.Error(err))
	}
}

// superblockRW finds, in table (a mountinfo.File), the mount with ID id (or, with id "", the
// last aifs mount at mnt: the one just made) and reports its ID and whether its superblock is
// read-write.
func superblockRW(table []byte, mnt, id string) (string, bool) {
	found, rw := "", false
	for _, m := range mountinfo.Parse(table) {
		if id != "" && m.ID == id || id == "" && m.Point == mnt && strings.HasPrefix(m.FSType, "fuse") {
			found, rw = m.ID, !m.ReadOnly()
		}
	}
	if found == "" {
		return id, false
	}
	return found, rw
}

// revertRW remounts mnt read-only (its superblock), and counts it.
func (f *FS) revertRW(mnt string) {
	err := syscall.Mount("", mnt, "", syscall.MS_REMOUNT|syscall.MS_RDONLY, "")
	f.stats.rwReverted.Add(1)
	f.log.Warn("the mount was remounted read-write; aifs made it read-only again", zap.String("mountpoint", mnt), zap.Error(err))
}
