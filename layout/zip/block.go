package zip

import (
	"fmt"
	"io"
)

// blockReader reads r in aligned blocks of BlockSize, keeping the last two: archive/zip reads
// the central directory in small pieces and each local header apart, which would be a request
// apiece to an object store. The first error of r is kept in err, so that Members reports it
// rather than archive/zip's view of it.
type blockReader struct {
	r    io.ReaderAt
	size int64
	err  error
	blk  [2]block // the most recent first
}

type block struct {
	off  int64 // -1: empty
	data []byte
}

func (b *blockReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("zip: read at offset %d", off)
	}
	n := 0
	for n < len(p) {
		if off >= b.size {
			return n, io.EOF
		}
		data, err := b.block(off / BlockSize * BlockSize)
		if err != nil {
			return n, err
		}
		c := copy(p[n:], data[off%BlockSize:])
		n += c
		off += int64(c)
	}
	return n, nil
}

// block returns the block at off, reading it if it is not held.
func (b *blockReader) block(off int64) ([]byte, error) {
	for i, k := range b.blk {
		if k.data != nil && k.off == off {
			b.blk[0], b.blk[i] = b.blk[i], b.blk[0]
			return k.data, nil
		}
	}
	if b.err != nil {
		return nil, b.err
	}
	old := b.blk[1]
	buf := old.data[:0]
	n := min(BlockSize, b.size-off)
	if int64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := b.r.ReadAt(buf, off); err != nil {
		b.err = fmt.Errorf("read [%d,+%d): %w", off, n, err)
		return nil, b.err
	}
	b.blk[1], b.blk[0] = b.blk[0], block{off: off, data: buf}
	return buf, nil
}
