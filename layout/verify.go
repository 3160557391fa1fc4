package layout

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync"
)

// Problem is one failure found by Verify.
type Problem struct {
	Path   string // sample path relative to the root; empty for a problem with a whole shard
	Shard  string // shard file name
	Offset uint64 // the sample's extent in the shard (zero for a whole-shard problem)
	Size   uint64
	Reason string
}

// VerifyOptions configure Verify.
type VerifyOptions struct {
	// Jobs is the number of shards checked in parallel. Default 4.
	Jobs int
	// Progress, if set, is called (from several goroutines, serialised) with bytes checked so far.
	Progress func(bytes int64)
	// Open opens a shard for reading. An error wrapping os.ErrNotExist is reported as a missing
	// shard. Default: the file named s.Name in Verify's dir.
	Open func(ctx context.Context, s Shard) (ShardFile, error)
}

// ShardFile is a shard opened for Verify: its bytes and its actual size.
type ShardFile interface {
	io.ReaderAt
	io.Closer
	Size() int64
}

// osShard is a shard file in a local directory.
type osShard struct {
	*os.File
	size int64
}

func (f osShard) Size() int64 { return f.size }

func openFile(path string) (ShardFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat: %w", err)
	}
	return osShard{f, fi.Size()}, nil
}

// VerifyResult counts what Verify checked.
type VerifyResult struct {
	Samples  int
	Bytes    int64
	Problems int
}

const verifyChunk = 1 << 20

// ErrNoChecksums is returned by Verify for a set indexed without checksums (Index.Checksums).
var ErrNoChecksums = errors.New("the shard set has no checksums to verify against (it was indexed with --no-checksums; index it again without that flag)")

// Verify re-reads every sample of the shard set in directory dir, whose index is x, and checks
// its CRC32C, and checks each shard's size and whole-file checksum. It calls report (serialised)
// once for each corrupt, unreadable or missing sample and once for each shard whose size or
// checksum disagrees with the index. It returns an error only if it could not run to the end
// (ctx cancelled); corruption is reported, not returned.
func Verify(ctx context.Context, dir string, x *Index, opt VerifyOptions, report func(Problem)) (VerifyResult, error) {
	if opt.Jobs <= 0 {
		opt.Jobs = 4
	}
	if !x.Checksums() {
		return VerifyResult{}, ErrNoChecksums
	}
	if opt.Open == nil {
		opt.Open = func(_ context.Context, s Shard) (ShardFile, error) { return openFile(ShardPath(dir, s)) }
	}
	// The index first: every block of a version 3 index, which a mount checks only as it uses it.
	if err := x.CheckAll(); err != nil {
		return VerifyResult{}, fmt.Errorf("index: %w", err)
	}
	res := VerifyResult{Samples: x.Files()}
	var mu sync.Mutex // guards res, and serialises report and opt.Progress
	v := &verifier{x: x, open: opt.Open, report: func(p Problem) {
		mu.Lock()
		defer mu.Unlock()
		res.Problems++
		report(p)
	}, progress: func(n int64) {
		mu.Lock()
		defer mu.Unlock()
		res.Bytes += n
		if opt.Progress != nil {
			opt.Progress(res.Bytes)
		}
	}}
	next := make(chan int)
	var wg sync.WaitGroup
	for range opt.Jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, verifyChunk)
			for s := range next {
				v.shard(ctx, s, buf)
			}
		}()
	}
	var err error
	for s := range x.Shards() {
		select {
		case next <- s:
			continue
		case <-ctx.Done():
			err = ctx.Err()
		}
		break
	}
	close(next)
	wg.Wait()
	if err == nil {
		err = ctx.Err()
	}
	return res, err
}

type verifier struct {
	x        *Index
	open     func(ctx context.Context, s Shard) (ShardFile, error)
	report   func(Problem)
	progress func(int64)
}

// shard checks shard s and its samples in one pass in extent order (ByExtent: by offset, hard
// links together), computing the whole-shard checksum from the same reads. It keeps nothing per
// sample, so verify's memory is the index's whatever the sample count.
func (v *verifier) shard(ctx context.Context, s int, buf []byte) {
	sh := v.x.Shards()[s]
	first, end := v.x.ExtentPos(uint32(s), 0), v.x.ExtentPos(uint32(s)+1, 0)
	sample := func(id ID, reason string) {
		e := v.x.Entry(id)
		v.report(Problem{Path: v.x.Path(id), Shard: sh.Name, Offset: e.Offset, Size: e.Size, Reason: reason})
	}
	f, err := v.open(ctx, sh)
	if err != nil {
		reason := fmt.Sprintf("shard unreadable: %v", err)
		if errors.Is(err, os.ErrNotExist) {
			reason = "shard missing"
		}
		v.report(Problem{Shard: sh.Name, Reason: reason})
		for k := first; k < end; k++ {
			sample(v.x.ByExtent(k), reason)
		}
		return
	}
	defer f.Close()
	size := uint64(f.Size())
	var (
		pos      uint64 // bytes of the shard folded into shardCRC so far
		shardCRC uint32
		inOrder  = true // extents did not overlap, so shardCRC covers every byte once
		prev     Entry  // the sample before: a hard link in a tar has the same extent
		// A shard whose files hold CRC-32/IEEE has no checksum of its own: only its files' bytes
		// are read.
		whole = sh.Checksum == CRC32C
	)
	for k := first; k < end; k++ {
		if ctx.Err() != nil {
			return
		}
		id := v.x.ByExtent(k)
		e := v.x.Entry(id)
		if e.Offset+e.Size > size {
			sample(id, fmt.Sprintf("extends past the end of the shard (%d bytes; truncated?)", size))
			inOrder = false
			continue
		}
		if e.Offset < pos {
			inOrder = inOrder && e.Offset == prev.Offset && e.Size == prev.Size
		} else if e.Offset > pos && whole {
			if err := crcRange(f, pos, e.Offset-pos, buf, CRC32C, &shardCRC, nil); err != nil {
				v.report(Problem{Shard: sh.Name, Reason: err.Error()})
				inOrder = false
			}
			pos = e.Offset
		}
		var got uint32
		shardPart := &shardCRC
		if e.Offset != pos || !whole {
			shardPart = nil
		}
		if err := crcRange(f, e.Offset, e.Size, buf, sh.Checksum, shardPart, &got); err != nil {
			sample(id, err.Error())
		} else if got != e.CRC {
			sample(id, fmt.Sprintf("content checksum mismatch (%s %08x, index says %08x)", sh.Checksum, got, e.CRC))
		}
		if shardPart != nil || !whole && e.Offset >= pos {
			pos = e.Offset + e.Size
		}
		prev = e
		v.progress(int64(e.Size))
	}
	if pos < size && whole {
		if err := crcRange(f, pos, size-pos, buf, CRC32C, &shardCRC, nil); err != nil {
			v.report(Problem{Shard: sh.Name, Reason: err.Error()})
		}
	}
	switch {
	case size != sh.Size:
		v.report(Problem{Shard: sh.Name, Reason: fmt.Sprintf("shard is %d bytes, index says %d", size, sh.Size)})
	case whole && inOrder && shardCRC != sh.CRC:
		v.report(Problem{Shard: sh.Name, Reason: fmt.Sprintf("shard checksum mismatch (crc32c %08x, index says %08x)", shardCRC, sh.CRC)})
	}
}

// crcRange reads [off, off+n) of f in chunks of len(buf), folding the bytes into shard's CRC32C
// and sample's checksum of kind k, each if not nil.
func crcRange(f io.ReaderAt, off, n uint64, buf []byte, k ChecksumKind, shard, sample *uint32) error {
	for n > 0 {
		chunk := buf[:min(n, uint64(len(buf)))]
		if _, err := f.ReadAt(chunk, int64(off)); err != nil {
			return fmt.Errorf("read [%d,+%d): %w", off, len(chunk), err)
		}
		if shard != nil {
			*shard = crc32.Update(*shard, castagnoli, chunk)
		}
		if sample != nil {
			*sample = k.Update(*sample, chunk)
		}
		off += uint64(len(chunk))
		n -= uint64(len(chunk))
	}
	return nil
}
