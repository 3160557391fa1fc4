package erofsmeta

import (
	"syscall"

	"github.com/aifs/aifs/layout"
)

// haveStat says that statOf gives go-erofs an entry's mtime and owner.
const haveStat = true

// statOf returns what go-erofs reads from an fs.FileInfo's Sys on Linux: the mtime, and owner
// root. Nlink is left 0: go-erofs then writes 2 for a directory and 1 for a file.
func statOf(e layout.Entry) any {
	sec, nsec := splitTime(e.MTime)
	return &syscall.Stat_t{Mtim: syscall.Timespec{Sec: sec, Nsec: nsec}}
}
