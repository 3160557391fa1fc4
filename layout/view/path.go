package view

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aifs/aifs/layout"
)

// CleanPath returns a member's name as a path in the tree (AppendCleanPath).
// A name that is clean already is returned as it is, with no copy.
func CleanPath(name string) (string, error) {
	if isClean(name) {
		return name, nil
	}
	p, err := AppendCleanPath(nil, name)
	return string(p), err
}

// isClean reports whether AppendCleanPath would append name unchanged: components that
// ValidName accepts, none "." or "..", joined by single slashes, none leading or trailing.
func isClean(name string) bool {
	for part := range strings.SplitSeq(name, "/") {
		if part == "." || part == ".." || !layout.ValidName([]byte(part)) {
			return false
		}
	}
	return name != ""
}

// AppendCleanPath appends a member's name as a path in the tree (Record.Path) to dst: leading
// "/", empty and "." components dropped (nothing is appended for the top). A ".." component
// would leave the tree, and a component longer than 255 bytes or holding a NUL (a PAX path or a
// ZIP name may) cannot be stored: both are errors. Every format cleans its names so.
func AppendCleanPath[S string | []byte](dst []byte, name S) ([]byte, error) {
	start := len(dst)
	for i := 0; i <= len(name); {
		j := i
		for j < len(name) && name[j] != '/' {
			j++
		}
		part := name[i:j]
		i = j + 1
		switch {
		case len(part) == 0 || string(part) == ".":
			continue
		case string(part) == "..":
			return dst[:start], errors.New(`the name has a ".." component, which would lead out of the tree`)
		case !layout.ValidName([]byte(part)):
			return dst[:start], fmt.Errorf("the name component %.40q cannot be stored: longer than %d bytes, or holding a NUL", part, layout.MaxNameLen)
		}
		if len(dst) > start {
			dst = append(dst, '/')
		}
		dst = append(dst, part...)
	}
	return dst, nil
}

// SplitKey splits a member's path into WebDataset's key and extension: the key is the directory
// part plus the base name up to its first dot ("a/b.c.jpg" is key "a/b", extension "c.jpg"); ok
// is false for a base name with no dot after its first byte (WebDataset skips those members).
// It is the key a --labels file names, in every format.
func SplitKey(p string) (key, ext string, ok bool) {
	base := p[strings.LastIndexByte(p, '/')+1:]
	i := strings.IndexByte(base, '.')
	if i < 1 {
		return "", "", false
	}
	return p[:len(p)-len(base)+i], base[i+1:], true
}
