package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/aifs/aifs/internal/human"
	"github.com/aifs/aifs/layout"
)

func runLs(ctx context.Context, args []string) int {
	flags := newFlags("ls", "SRC [PATH]", `
Lists directory PATH (default: the root) of the shard set in directory SRC (or at
s3://BUCKET/PREFIX), one line per entry in
name order like 'ls -l': mode, size in bytes, modification time, name (directories end in '/').
If PATH is a file, prints its line alone. Reads only the index.`+s3Help)
	var s3c s3Config
	s3c.register(flags)
	pos, code, ok := parseArgs(flags, args, 1, 2)
	if !ok {
		return code
	}
	src, err := openSource(ctx, pos[0], &s3c, zap.NewNop())
	if err != nil {
		return fail("ls", err)
	}
	src.be.Close()
	x := src.x
	path := ""
	if len(pos) == 2 {
		path = pos[1]
	}
	id, err := x.LookupPath(path)
	if err != nil {
		return fail("ls", lookupError(err, path, pos[0]))
	}
	e := x.Entry(id)
	if !e.IsDir() {
		printEntry(x, id)
		return exitOK
	}
	for k := range e.NumChildren {
		c, _, err := x.Child(id, e, k)
		if err != nil {
			return fail("ls", err)
		}
		printEntry(x, c)
	}
	return exitOK
}

// lookupError is the message for a path that LookupPath could not resolve in set src.
func lookupError(err error, path, src string) error {
	if errors.Is(err, layout.ErrNotFound) {
		return fmt.Errorf("%s: no such file or directory in %s", human.Name(path), src)
	}
	return fmt.Errorf("%s in %s: %w", human.Name(path), src, err)
}

func printEntry(x *layout.Index, id layout.ID) {
	e := x.Entry(id)
	mode := fs.FileMode(e.Mode & 0o777)
	name := human.Name(string(x.Name(id)))
	if e.IsDir() {
		mode |= fs.ModeDir
		name += "/"
	}
	if e.Mode&0o4000 != 0 {
		mode |= fs.ModeSetuid
	}
	if e.Mode&0o2000 != 0 {
		mode |= fs.ModeSetgid
	}
	if e.Mode&0o1000 != 0 {
		mode |= fs.ModeSticky
	}
	size := e.Size
	if e.IsDir() {
		size = uint64(e.NumChildren)
	}
	fmt.Fprintf(os.Stdout, "%s %12d %s %s\n", mode, size, time.Unix(0, e.MTime).Format("2006-01-02 15:04"), name)
}
