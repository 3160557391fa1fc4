//go:build !linux

package erofsmeta

import "github.com/aifs/aifs/layout"

// haveStat is false where go-erofs reads no mtime or owner from a *syscall.Stat_t: Build
// refuses (errNotLinux) rather than write wrong mtimes.
const haveStat = false

func statOf(layout.Entry) any { return nil }
