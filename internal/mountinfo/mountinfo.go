// Package mountinfo reads the mount table of this process's mount namespace,
// /proc/self/mountinfo: the daemon finds its own mount there (cmd/aifs: stale mounts, its
// device; fs: the read-only guard) and the tests check a mount's options.
package mountinfo

import (
	"os"
	"strconv"
	"strings"
)

// File is the mount table's path. Opened, it reports each change of the table with POLLPRI.
const File = "/proc/self/mountinfo"

// Mount is one line of the table.
type Mount struct {
	ID     string // the mount's ID, unique while it is mounted
	Dev    string // major:minor, one per file system instance: a FUSE mount's is its connection's
	Point  string // where it is mounted, unescaped
	FSType string // "unknown" where the line has none
	Source string // unescaped; "unknown" where the line has none
	// SuperOptions are the file system's (superblock's) options, "ro" or "rw" first.
	SuperOptions []string
}

// Parse returns the mounts of table, a copy of File, in its order (a mount stacked on another at
// the same point comes after it).
func Parse(table []byte) []Mount {
	var ms []Mount
	for _, line := range strings.Split(string(table), "\n") {
		// ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		m := Mount{ID: f[0], Dev: f[2], Point: Unescape(f[4]), FSType: "unknown", Source: "unknown"}
		for i, v := range f {
			if v == "-" && i+2 < len(f) {
				m.FSType, m.Source = f[i+1], Unescape(f[i+2])
				if i+3 < len(f) {
					m.SuperOptions = strings.Split(f[i+3], ",")
				}
				break
			}
		}
		ms = append(ms, m)
	}
	return ms
}

// At returns the mount at point (the last one, where mounts are stacked) in this process's
// table, and whether there is one (false too where File cannot be read).
func At(point string) (Mount, bool) {
	b, err := os.ReadFile(File)
	if err != nil {
		return Mount{}, false
	}
	var m Mount
	ok := false
	for _, e := range Parse(b) {
		if e.Point == point {
			m, ok = e, true
		}
	}
	return m, ok
}

// ReadOnly reports whether the mount's file system (its superblock) is read-only.
func (m Mount) ReadOnly() bool { return len(m.SuperOptions) > 0 && m.SuperOptions[0] == "ro" }

// Unescape undoes the octal escapes (\040 for a space) of the table's paths.
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
