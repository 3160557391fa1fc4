package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"go.uber.org/zap"

	"github.com/aifs/aifs/backend/s3"
	"github.com/aifs/aifs/internal/human"
	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/plan"
)

func runLocate(ctx context.Context, args []string) int {
	flags := newFlags("locate", "SRC|MOUNTPOINT [PATH...]", `
Prints where the bytes of each file lie, one line per file, tab-separated: its path in the set,
its shard (an absolute path for a local set, the s3:// URL in S3), the offset and the length of
its bytes there, and their CRC32C (8 hex digits; 00000000 where the set has no checksums, or has
a ZIP's CRC-32 instead, which aifs verify checks). A path
that is not printable UTF-8 is Go-quoted. SRC is a shard set (a directory or s3://BUCKET/PREFIX);
MOUNTPOINT a live aifs mount, whose index is read from its source after checking, through
MOUNTPOINT/.aifs/locations, that it is the one mounted. PATHs are relative to the set's root
(under a MOUNTPOINT, also paths inside it); a directory stands for every file under it, in pack
order (a directory's files, then its subdirectories); no PATH: every file. Programs read the same facts from MOUNTPOINT/.aifs/locations
(binary, by inode; python/aifs_direct.py).`+s3Help)
	var s3c s3Config
	s3c.register(flags)
	pos, code, ok := parseArgs(flags, args, 1, -1)
	if !ok {
		return code
	}
	src, paths, err := locateSource(ctx, pos[0], pos[1:], &s3c)
	if err != nil {
		return fail("locate", err)
	}
	src.be.Close()
	w := bufio.NewWriter(os.Stdout)
	if len(paths) == 0 {
		paths = []string{""}
	}
	for _, p := range paths {
		id, err := src.x.LookupPath(p)
		if err != nil {
			w.Flush()
			return fail("locate", lookupError(err, p, pos[0]))
		}
		if err := printLocations(w, src, id); err != nil {
			w.Flush() // the lines before the damage are right
			return fail("locate", err)
		}
	}
	if err := w.Flush(); err != nil {
		return fail("locate", err)
	}
	return exitOK
}

// locateSource opens the shard set arg names, or the one mounted at arg, and returns it with
// paths made relative to its root.
func locateSource(ctx context.Context, arg string, paths []string, s3c *s3Config) (*source, []string, error) {
	if s3.IsURL(arg) {
		src, err := openSource(ctx, arg, s3c, zap.NewNop())
		return src, paths, err
	}
	mnt, err := filepath.Abs(arg)
	if err != nil {
		return nil, nil, err
	}
	source, identity, err := readLocationsHead(filepath.Join(plan.Control(mnt), "locations"))
	if errors.Is(err, os.ErrNotExist) {
		src, err := openSource(ctx, arg, s3c, zap.NewNop())
		return src, paths, err
	}
	if err != nil {
		return nil, nil, err
	}
	src, err := openSource(ctx, source, s3c, zap.NewNop())
	if err != nil {
		return nil, nil, fmt.Errorf("the set mounted at %s: %w", arg, err)
	}
	if src.x.Identity() != identity {
		src.be.Close()
		return nil, nil, fmt.Errorf("the index at %s is not the one mounted at %s (it was replaced since): remount to locate its files", source, arg)
	}
	rel := make([]string, len(paths))
	for i, p := range paths {
		rel[i] = p
		if filepath.IsAbs(p) {
			if r, err := filepath.Rel(mnt, p); err == nil && r != ".." && !strings.HasPrefix(r, "../") {
				rel[i] = r
				if r == "." {
					rel[i] = ""
				}
			}
		}
	}
	return src, rel, nil
}

// readLocationsHead returns the source and the index identity of a mount's locations file
// (format in fs/locations.go).
func readLocationsHead(path string) (source string, identity uint32, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", 0, err
	}
	le := binary.LittleEndian
	if len(b) < 64 || string(b[:8]) != "AIFSLOC\x00" || le.Uint32(b[8:]) != 1 {
		return "", 0, fmt.Errorf("%s is not a locations file of version 1", path)
	}
	table, shards := le.Uint64(b[24:]), le.Uint32(b[32:])
	p := table
	for range shards {
		if p+10 > uint64(len(b)) {
			return "", 0, fmt.Errorf("%s: %w", path, io.ErrUnexpectedEOF)
		}
		p += 10 + uint64(le.Uint16(b[p+8:]))
	}
	if p+2 > uint64(len(b)) || p+2+uint64(le.Uint16(b[p:])) > uint64(len(b)) {
		return "", 0, fmt.Errorf("%s: %w", path, io.ErrUnexpectedEOF)
	}
	return string(b[p+2 : p+2+uint64(le.Uint16(b[p:]))]), le.Uint32(b[36:]), nil
}

// printLocations writes the line of file id, or of every file under directory id in pack
// order: a directory's files, then each of its subdirectories. It stops with an error where a
// block of the index it needs failed its checks.
func printLocations(w *bufio.Writer, src *source, id layout.ID) error {
	x := src.x
	e := x.Entry(id)
	if e.Mode == 0 {
		return x.Err() // its block of the index failed its checks: no line for it
	}
	if !e.IsDir() {
		crc := e.CRC
		if x.Shards()[e.Shard].Checksum != layout.CRC32C {
			crc = 0
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%08x\n", human.Name(x.Path(id)), shardLocation(src, e.Shard), e.Offset, e.Size, crc)
		return nil
	}
	for _, dirs := range []bool{false, true} {
		for k := range e.NumChildren {
			c, ce, err := x.Child(id, e, k)
			if err != nil {
				return err
			}
			if ce.IsDir() == dirs {
				if err := printLocations(w, src, c); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// shardLocation returns where shard n of src lies: a path, or an s3:// URL.
func shardLocation(src *source, n uint32) string {
	s := src.x.Shards()[n]
	if s3.IsURL(src.name) {
		return strings.TrimSuffix(src.name, "/") + "/" + s.Name
	}
	return layout.ShardPath(src.name, s)
}
