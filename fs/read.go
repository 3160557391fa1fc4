package fs

import (
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/aifs/aifs/backend"
)

// Read returns [Offset, Offset+Size) of a sample, clipped to its end, from the prefetch
// loader (Loader.ReadRange), which lends the bytes (a whole sample, or a backend's buffer)
// or reads them into the request's buffer; lent bytes go to the kernel without a copy.
func (f *FS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	t := f.stats.start()
	r := readResults.Get().(*readResult)
	var st fuse.Status
	if f.ctl.owns(in.NodeId) {
		var n int
		n, st = f.ctl.read(in.NodeId, in.Offset, buf[:min(int(in.Size), len(buf))])
		r.data = buf[:n]
	} else {
		st = f.read(cancel, in, buf, r, t)
	}
	f.stats.doneRead(t, st, in.Pid, len(r.data), f.ctl.owns(in.NodeId))
	if st != fuse.OK {
		r.Done()
		return nil, st
	}
	return r, fuse.OK
}

func (f *FS) read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte, r *readResult, t time.Time) fuse.Status {
	id, e, st := f.entry(in.NodeId)
	switch {
	case st != fuse.OK:
		return st
	case e.IsDir():
		return fuse.Status(syscall.EISDIR)
	case in.Offset >= e.Size:
		return fuse.OK
	}
	n := min(e.Size-in.Offset, uint64(in.Size), uint64(len(buf)))
	f.lastRead.Store(t.UnixNano())
	var err error
	if r.data, r.view, err = f.loader.ReadRange(cancel, in.Pid, id, e, int64(in.Offset), buf[:n]); err != nil {
		return f.errno("read", id, err)
	}
	return fuse.OK
}

// readResult hands READ data to go-fuse: bytes in the request's buffer, or a View (a
// prefetch.Sample or a backend's lent buffer), released when go-fuse calls Done after
// sending. Instances are pooled, so a READ allocates nothing.
type readResult struct {
	data []byte
	view backend.View // nil unless data is lent
	vec  [1][]byte    // for Slices
}

var readResults = sync.Pool{New: func() any { return new(readResult) }}

func (r *readResult) Bytes([]byte) ([]byte, fuse.Status) { return r.data, fuse.OK }

// Slices makes go-fuse write the data with writev and call Done only after that write. With
// splice disabled, go-fuse calls Bytes and then Done at once for a result without Slices,
// before the bytes are written: a lent buffer would go back to the pool while the kernel
// still had to copy it, and another READ's data could be sent in its place.
func (r *readResult) Slices() ([][]byte, fuse.Status) {
	r.vec[0] = r.data
	return r.vec[:], fuse.OK
}
func (r *readResult) Size() int { return len(r.data) }
func (r *readResult) Done() {
	if r.view != nil {
		r.view.Release()
	}
	*r = readResult{}
	readResults.Put(r)
}
