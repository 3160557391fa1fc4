// Package human formats what aifs prints for people: byte counts and names.
package human

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bytes formats a byte count for people, in decimal units as throughput is usually quoted.
func Bytes(n int64) string {
	f := float64(n)
	for _, u := range []string{"B", "kB", "MB", "GB", "TB"} {
		if f < 1000 || u == "TB" {
			if u == "B" {
				return fmt.Sprintf("%d B", n)
			}
			return fmt.Sprintf("%.1f %s", f, u)
		}
		f /= 1000
	}
	return ""
}

// Name returns a path or name as it should appear on a terminal: unchanged if it is printable
// UTF-8, otherwise Go-quoted so that newlines and invalid bytes are visible. A name that begins
// with '"' is quoted too, so that output beginning with '"' is always a quoted string and no two
// names look alike.
func Name(s string) string {
	if !utf8.ValidString(s) || strings.HasPrefix(s, `"`) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}
