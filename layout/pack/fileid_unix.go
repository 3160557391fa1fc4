//go:build unix

package pack

import (
	"os"
	"syscall"
)

// fileID identifies a directory for symlink-loop detection.
type fileID struct{ dev, ino uint64 }

func idOf(fi os.FileInfo) fileID {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}
	}
	return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino)}
}
