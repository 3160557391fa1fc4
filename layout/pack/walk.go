package pack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/aifs/aifs/layout"
)

// ListOptions configure ListFiles. The zero value lists what Pack would pack.
type ListOptions struct {
	// FollowExternal follows symlinks out of the tree, as Options.FollowExternal. Default
	// false: such a symlink fails the listing, naming it.
	FollowExternal bool
	// SkipTop is a name left out of the root directory: aifs bench leaves out an aifs mount's
	// ".aifs". Default "": nothing is left out.
	SkipTop string
	// Warn receives one line per entry skipped, as Options.Warn. Default: discard.
	Warn func(msg string)
}

// ListFiles returns the "/"-separated paths relative to root of the regular files that Pack
// would pack from root, in pack order (FORMAT.md): a directory's files by name bytes, then its
// subdirectories by name bytes, each expanded the same way. It follows and skips entries as Pack
// does, and fails where Pack would, but does not stat files reached without a symlink: it costs
// the directory reads and one stat per directory and symlink.
func ListFiles(ctx context.Context, root string, opt ListOptions) ([]string, error) {
	if opt.Warn == nil {
		opt.Warn = func(string) {}
	}
	w := &walker{followExternal: opt.FollowExternal, warn: opt.Warn, skipTop: opt.SkipTop}
	fi, err := w.root(root)
	if err != nil {
		return nil, err
	}
	var paths []string
	return paths, w.list(ctx, root, "", []fileID{idOf(fi)}, &paths)
}

// list appends to paths the files of directory dir (relative path rel: "" or ending in "/"),
// then walks its subdirectories in name order. ancestors identifies dir and those above it.
func (w *walker) list(ctx context.Context, dir, rel string, ancestors []fileID, paths *[]string) error {
	ents, err := readDir(ctx, dir)
	if err != nil {
		return err
	}
	var subdirs []walkEntry
	for _, de := range ents {
		if rel == "" && de.Name() == w.skipTop {
			continue
		}
		e, ok, err := w.entry(dir, de, ancestors)
		switch {
		case err != nil:
			return err
		case !ok:
		case e.dir:
			subdirs = append(subdirs, e)
		default:
			*paths = append(*paths, rel+e.name)
		}
	}
	for _, s := range subdirs {
		if err := w.list(ctx, s.path, rel+s.name+"/", append(ancestors, s.id), paths); err != nil {
			return err
		}
	}
	return nil
}

// walker decides, entry by entry, what a walk of a source tree keeps: the rules that Pack and
// ListFiles share. It is used by one goroutine.
type walker struct {
	followExternal bool
	warn           func(msg string)
	statFiles      bool   // stat every regular file: Pack records its size, mode and mtime
	skipTop        string // a name left out of the root directory ("" for none)
	rootReal       string // the root with symlinks resolved, absolute: what "inside" means
}

// walkEntry is an entry of a source directory that a walk keeps: a regular file or a
// directory, reached directly or through a symlink.
type walkEntry struct {
	name, path string // path is dir/name; empty for a file when the walker does not stat files
	dir        bool
	info       os.FileInfo // what the entry leads to; nil for a file when the walker does not stat files
	id         fileID      // directories: for symlink-loop detection
}

// root checks that root is a directory and records where it really is; it returns its stat.
func (w *walker) root(root string) (os.FileInfo, error) {
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("source %s is not a directory", root)
	}
	if w.rootReal, err = realPath(root); err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	return fi, nil
}

// readDir returns the entries of dir sorted by name, unless ctx is done.
func readDir(ctx context.Context, dir string) ([]os.DirEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read directory: %w", err)
	}
	return ents, nil
}

// entry classifies de, an entry of directory dir below ancestors. It follows a symlink; it
// skips (ok false, with a warning) a dangling symlink, a directory that is one of its own
// ancestors and anything neither a regular file nor a directory; it fails on a name that cannot
// be stored, a symlink out of the tree (unless followExternal) and a failed stat.
func (w *walker) entry(dir string, de os.DirEntry, ancestors []fileID) (e walkEntry, ok bool, err error) {
	e.name = de.Name()
	if !layout.ValidName([]byte(e.name)) {
		return e, false, fmt.Errorf("%s: name cannot be stored (1-%d bytes, no '/' or NUL)", filepath.Join(dir, e.name), layout.MaxNameLen)
	}
	typ := de.Type()
	if typ.IsRegular() && !w.statFiles {
		return e, true, nil // a listing's path is its own: no join, no stat per file
	}
	e.path = filepath.Join(dir, e.name)
	switch {
	case typ&os.ModeSymlink != 0:
		if e.info, err = os.Stat(e.path); err != nil {
			w.warn(fmt.Sprintf("skipping %s: dangling symlink (%v)", e.path, errors.Unwrap(err)))
			return e, false, nil
		}
		if err := w.checkInside(e.path); err != nil {
			return e, false, err
		}
	default:
		if e.info, err = de.Info(); err != nil {
			return e, false, fmt.Errorf("stat: %w", err)
		}
	}
	switch {
	case e.info.Mode().IsRegular():
		return e, true, nil
	case e.info.IsDir():
		e.dir, e.id = true, idOf(e.info)
		if containsID(ancestors, e.id) {
			w.warn(fmt.Sprintf("skipping %s: symlink loop (leads back to an ancestor directory)", e.path))
			return e, false, nil
		}
		return e, true, nil
	}
	w.warn(fmt.Sprintf("skipping %s: %s is not a regular file or directory", e.path, fileKind(e.info.Mode())))
	return e, false, nil
}

// checkInside fails for symlink path if its target lies outside the source tree, unless
// followExternal.
func (w *walker) checkInside(path string) error {
	if w.followExternal {
		return nil
	}
	target, err := realPath(path)
	if err != nil {
		return fmt.Errorf("symlink: %w", err)
	}
	if rel, err := filepath.Rel(w.rootReal, target); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("%s: symlink to %s, outside the source tree (--follow-external-symlinks packs what it points to)", path, target)
	}
	return nil
}

// realPath returns p with every symlink resolved, as an absolute path: the one form in which
// checkInside compares a target with the source root. (EvalSymlinks of a relative path is
// relative, and a relative target never lies inside an absolute root.)
func realPath(p string) (string, error) {
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", err
	}
	return filepath.Abs(r)
}

func containsID(ids []fileID, id fileID) bool {
	for _, a := range ids {
		if a == id {
			return true
		}
	}
	return false
}

func fileKind(m os.FileMode) string {
	switch {
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return "it"
}
