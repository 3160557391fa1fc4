package tarindex

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/layout/tar"
	"github.com/aifs/aifs/layout/view"
)

// treeMember is a member of a scanned tar that the tree may hold: a file or a directory, its
// name cleaned. Its Record's Link marks a hard link, whose extent and checksum are its target's.
type treeMember struct {
	view.Record
	at, end int    // where Path lies in the scan's names, before the scan sets Path
	data    []byte // a label member's bytes (view.ImageFolder)
}

// tarScan is what reading one tar gave.
type tarScan struct {
	entries []treeMember
	crc     uint32 // of the whole tar, with checksums
	members int
	skipped int
}

// scanAll reads every tar, opt.Jobs at a time, and calls use with each one's scan in the order
// of srcs, on the caller's goroutine, as soon as it and those before it are read (while later
// ones are read, at most 2*opt.Jobs tars ahead of use). The first error, in that order, or one
// from use, stops it. use must not keep sc.entries: scanAll hands the slice to a later scan.
func (ix *indexer) scanAll(ctx context.Context, use func(i int, sc *tarScan) error) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	type result struct {
		sc  *tarScan
		err error
	}
	done := make([]chan result, len(ix.srcs))
	for i := range done {
		done[i] = make(chan result, 1) // a reader never waits to hand over a scan
	}
	// A tar is handed to a reader with an entries slice that use is done with, taken in the
	// order of srcs: so the scans held are bounded, the scan use waits for always has one, and
	// no tar makes a slice of its own (docs/bench/layout-notes.md#indextars-allocations).
	type job struct {
		i       int
		entries []treeMember
	}
	free := make(chan []treeMember, 2*ix.opt.Jobs)
	for range cap(free) {
		free <- nil
	}
	next := make(chan job)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(next)
		for i := range ix.srcs {
			var j job
			select {
			case j.entries = <-free:
			case <-ctx.Done():
				return
			}
			j.i = i
			select {
			case next <- j:
			case <-ctx.Done():
				return
			}
		}
	}()
	for range min(ix.opt.Jobs, len(ix.srcs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := &scratch{tr: tar.NewReader(nil), buf: make([]byte, 256<<10)}
			for j := range next {
				sc, err := ix.scan(ctx, j.i, s, j.entries)
				done[j.i] <- result{sc, err}
			}
		}()
	}
	for i := range ix.srcs {
		var r result
		select {
		case r = <-done[i]:
		case <-ctx.Done():
			return ctx.Err()
		}
		if r.err != nil {
			return r.err
		}
		entries := r.sc.entries
		if err := use(i, r.sc); err != nil {
			return err
		}
		clear(entries)
		free <- entries[:0] // never blocks: it holds every slice not held by a scan
	}
	return nil
}

// crcCounter passes reads through, summing their bytes and their CRC32C.
type crcCounter struct {
	r   io.Reader
	sum layout.Sum
}

func (c *crcCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.sum.Add(p[:n])
	return n, err
}

// scratch is what a goroutine of scanAll reuses from tar to tar.
type scratch struct {
	tr    *tar.Reader
	buf   []byte // for the bytes after the end-of-archive blocks
	names []byte // a tar's paths end to end, made one string at its end
}

// scan reads tar i with s.tr, keeping what the tree may hold in entries (empty, maybe nil: its
// capacity is used). The entries' paths are substrings of one string, not a string a member
// (docs/bench/layout-notes.md#indextars-allocations).
func (ix *indexer) scan(ctx context.Context, i int, s *scratch, entries []treeMember) (*tarScan, error) {
	src := ix.srcs[i]
	rc, err := src.Open(ctx)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", src.Label, err)
	}
	defer rc.Close()
	var r io.Reader = rc
	var sum *crcCounter
	if !ix.opt.NoChecksums {
		sum = &crcCounter{r: rc}
		r = sum
	}
	tr, names := s.tr, s.names[:0]
	tr.Reset(r)
	sc := &tarScan{entries: entries}
	var files map[string]int // path → the entry of the regular file there, made at the first hard link
	var reported int64
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		m, name, err := tr.NextName()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src.Label, err)
		}
		sc.members++
		at := len(names)
		if names, err = view.AppendCleanPath(names, name); err != nil {
			return nil, fmt.Errorf("%s: member %q (at byte %d): %w", src.Label, name, m.Header, err)
		}
		p := names[at:] // the path, as bytes until the end of the tar
		e := treeMember{at: at, end: len(names), Record: view.Record{Mode: m.Mode, MTime: m.MTime, Offset: uint64(m.Offset), Size: uint64(m.Size)}}
		switch m.Type {
		case tar.TypeDir: // "./" (p empty) describes the top: the tar's directory, or the root
			e.Dir = true
			sc.entries = append(sc.entries, e)
		case tar.TypeFile:
			if len(p) == 0 {
				return nil, fmt.Errorf("%s: member %q (at byte %d): a file with no name", src.Label, name, m.Header)
			}
			if e.CRC, e.data, err = ix.readMember(tr, m, p); err != nil {
				return nil, fmt.Errorf("%s: member %q: %w", src.Label, name, err)
			}
			if files != nil {
				files[string(p)] = len(sc.entries)
			}
			sc.entries = append(sc.entries, e)
		case tar.TypeHardLink:
			if files == nil {
				files = map[string]int{}
				for j, f := range sc.entries {
					if !f.Dir {
						files[string(names[f.at:f.end])] = j
					}
				}
			}
			target, err := view.CleanPath(m.Linkname)
			j, ok := files[target]
			if err != nil || !ok || len(p) == 0 {
				ix.opt.Warn(fmt.Sprintf("%s: skipped hard link %q: its target %q is not a file before it in the tar", src.Label, name, m.Linkname))
				sc.skipped++
				names = names[:at]
				break
			}
			t := sc.entries[j]
			t.at, t.end, t.Link = e.at, e.end, true
			files[string(p)] = len(sc.entries)
			sc.entries = append(sc.entries, t)
		default:
			ix.opt.Warn(fmt.Sprintf("%s: skipped %s %q", src.Label, typeName(m.Type, m.Linkname), name))
			sc.skipped++
			names = names[:at]
		}
		if n := tr.Offset(); n-reported >= 8<<20 {
			ix.progress(0, n-reported)
			reported = n
		}
	}
	if sum != nil {
		// The bytes after the end-of-archive blocks count in the tar's checksum and size.
		if _, err := io.CopyBuffer(io.Discard, sum, s.buf); err != nil {
			return nil, fmt.Errorf("read %s: %w", src.Label, err)
		}
		if sum.sum.Size != uint64(src.Size) {
			return nil, fmt.Errorf("%s changed while it was indexed (%d bytes when listed, %d read)", src.Label, src.Size, sum.sum.Size)
		}
		sc.crc = sum.sum.CRC
	} else if end := tr.Offset(); end > src.Size {
		return nil, fmt.Errorf("%s changed while it was indexed (%d bytes when listed, members up to byte %d)", src.Label, src.Size, end)
	}
	all := string(names)
	for k := range sc.entries {
		e := &sc.entries[k]
		e.Path = all[e.at:e.end]
	}
	s.names = names
	ix.progress(1, src.Size-reported)
	return sc, nil
}

// readMember reads the data of file member m (path p) if it is wanted: all of it for its
// checksum, and the bytes of a label member for the image-folder view.
func (ix *indexer) readMember(tr *tar.Reader, m tar.Member, p []byte) (uint32, []byte, error) {
	var data []byte
	keep := ix.opt.View == view.ImageFolder && ix.opt.Labels.isLabel(string(p)) && m.Size <= maxLabelBytes
	if keep {
		data = make([]byte, 0, m.Size)
	} else if ix.opt.NoChecksums {
		return 0, nil, nil
	}
	var crc uint32
	for {
		b, err := tr.ReadBuffered()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, nil, err
		}
		crc = layout.UpdateChecksum(crc, b)
		if keep {
			data = append(data, b...)
		}
	}
	if ix.opt.NoChecksums {
		crc = 0
	}
	return crc, data, nil
}

// progress adds tars and bytes read, and reports them.
func (ix *indexer) progress(tars int, bytes int64) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.doneTars += tars
	ix.doneBytes += bytes
	if ix.opt.Progress != nil {
		ix.opt.Progress(Progress{Files: ix.doneTars, TotalFiles: len(ix.srcs), Bytes: ix.doneBytes, TotalBytes: ix.total})
	}
}

func typeName(t tar.Type, link string) string {
	switch t {
	case tar.TypeSymlink:
		return fmt.Sprintf("symlink (to %q)", link)
	case tar.TypeSparse:
		return "sparse file"
	default:
		return "device, FIFO or special member"
	}
}
