package prefetch

import (
	"github.com/aifs/aifs/backend"
	"github.com/aifs/aifs/layout"
)

// Samples over MaxWhole are never fetched whole nor cached nor read ahead: each ReadRange
// reads its range from the shard, lent by a backend.Viewer or into the caller's buffer. With
// Options.Verify such a sample is read whole once more, in pieces, and checked on its first
// ReadRange; one that matched is marked in verified and not checked again.

// verifyPiece is the size of the reads that verify a large sample: the largest a Viewer lends
// without allocating.
const verifyPiece = backend.MaxView

// readLarge is ReadRange for sample id over MaxWhole.
func (l *Loader) readLarge(id layout.ID, e layout.Entry, off int64, p []byte) ([]byte, backend.View, error) {
	if l.verified != nil && !l.verified.Has(uint64(id)) {
		if err := l.verifyLarge(id, e); err != nil {
			return nil, nil, err
		}
		l.verified.Add(uint64(id))
	}
	view, data, err := l.readShard(e.Shard, int64(e.Offset)+off, p, int64(len(p)))
	return data, view, err
}

// verifyLarge reads sample id whole, in pieces, and checks its checksum.
func (l *Loader) verifyLarge(id layout.ID, e layout.Entry) error {
	var buf []byte // the first piece's, reused, from a shard that lends nothing
	var crc uint32
	for done := uint64(0); done < e.Size; {
		n := min(e.Size-done, verifyPiece)
		var p []byte
		if buf != nil {
			p = buf[:n]
		}
		view, data, err := l.readShard(e.Shard, int64(e.Offset+done), p, int64(n))
		if err != nil {
			return err
		}
		crc = l.x.Shards()[e.Shard].Checksum.Update(crc, data)
		if view != nil {
			view.Release()
		} else {
			buf = data
		}
		done += n
	}
	return l.check(id, e, crc)
}
