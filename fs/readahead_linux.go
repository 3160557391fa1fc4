package fs

import (
	"fmt"
	"os"
	"syscall"
)

// setReadAhead sets the kernel read-ahead of the mount at mountpoint (its backing device info,
// /sys/class/bdi/MAJOR:MINOR/read_ahead_kb) to kb. The kernel offers FUSE 128 KiB, which splits
// a sample larger than that into two READs; 1 MiB makes one READ per sample. Writing it needs
// root.
func setReadAhead(mountpoint string, kb int) error {
	var st syscall.Stat_t
	if err := syscall.Stat(mountpoint, &st); err != nil {
		return err
	}
	dev := uint64(st.Dev)
	major := (dev>>8)&0xfff | (dev>>32)&^0xfff
	minor := dev&0xff | (dev>>12)&^0xff
	path := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", major, minor)
	return os.WriteFile(path, fmt.Appendf(nil, "%d\n", kb), 0)
}
