package fs

import (
	"context"
	"fmt"
	"io"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"go.uber.org/zap"

	"github.com/aifs/aifs/backend"
	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/prefetch"
)

// Read returns [Offset, Offset+Size) of a sample, clipped to its end, from the prefetch
// loader: the whole sample, held by reference and sent to the kernel without a copy. Samples
// too large to be fetched whole are read READ by READ from the shard (lent by a
// backend.Viewer, or into the request's buffer).
func (f *FS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	t := f.stats.start()
	r := readResults.Get().(*readResult)
	var st fuse.Status
	if f.ctl.owns(in.NodeId) {
		var n int
		n, st = f.ctl.read(in.NodeId, in.Offset, buf[:min(int(in.Size), len(buf))])
		r.data = buf[:n]
	} else {
		st = f.read(cancel, in, buf, r)
	}
	f.stats.doneRead(t, st, len(r.data))
	if st != fuse.OK {
		r.Done()
		return nil, st
	}
	return r, fuse.OK
}

func (f *FS) read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte, r *readResult) fuse.Status {
	id, e, ok := f.entry(in.NodeId)
	switch {
	case !ok:
		return fuse.Status(syscall.ESTALE)
	case e.IsDir():
		return fuse.Status(syscall.EISDIR)
	case in.Offset >= e.Size:
		return fuse.OK
	}
	n := min(e.Size-in.Offset, uint64(in.Size), uint64(len(buf)))
	end := in.Offset + n
	// The first READ of a sample larger than the READ takes all of it: the rest goes into the
	// page cache (pushTail), so the loader need not keep it for READs that will not come. (If
	// the kernel refuses the push, those READs come and fetch the sample again.)
	srv := f.srv.Load()
	push := in.Offset == 0 && n < e.Size && f.opt.KernelCache == CacheOn && srv != nil
	if push {
		end = e.Size
	}
	s, err := f.loader.Read(cancel, id, e, int64(in.Offset), int64(end))
	if err == nil {
		r.view, r.data = s, s.Bytes()[in.Offset:in.Offset+n]
		if push {
			f.pushTail(srv, id, s.Bytes()[n:], n)
		}
		return fuse.OK
	}
	if !prefetch.IsTooLarge(err) {
		return f.errno("read", id, err)
	}
	off := int64(e.Offset + in.Offset)
	// The read is not cancelled when the kernel interrupts the request: an O_DIRECT pread
	// cannot be stopped, and building a context per READ would cost an allocation.
	ctx := context.Background()
	sh := f.shards[e.Shard]
	if f.verified != nil && f.verified[id/64].Load()&(1<<(id%64)) == 0 {
		if err := f.verifyLarge(ctx, sh, id, e); err != nil {
			return f.errno("read", id, err)
		}
		f.verified[id/64].Or(1 << (id % 64))
	}
	if v, ok := sh.(backend.Viewer); ok {
		if r.view, err = v.View(ctx, off, int(n)); err == nil {
			r.data = r.view.Bytes()
			if len(r.data) != int(n) { // a backend bug: a short READ would look like the end of the file
				err = fmt.Errorf("shard %d [%d,+%d): the backend lent %d bytes: %w", e.Shard, off, n, len(r.data), io.ErrUnexpectedEOF)
			}
		}
	} else if err = sh.ReadAt(ctx, buf[:n], off); err == nil {
		r.data = buf[:n]
	}
	if err != nil {
		return f.errno("read", id, err)
	}
	return fuse.OK
}

// pushTail pushes data, sample id from offset off to its end, into the kernel's page cache
// (NOTIFY_STORE) before the READ of its first off bytes is answered: the kernel asks for a
// sample 128 KiB at a time (its read-ahead), and the reader then finds the rest cached, so a
// sample costs one READ whatever its size. It runs before the reply, while the reader waits for
// the first pages, so the kernel has not yet asked for the pages pushed; if it refuses them,
// they are read by READ as usual.
func (f *FS) pushTail(srv *fuse.Server, id layout.ID, data []byte, off uint64) {
	if st := srv.InodeNotifyStoreCache(uint64(id)+1, int64(off), data); st != fuse.OK {
		f.log.Debug("NOTIFY_STORE of a sample's tail refused", zap.Uint32("id", uint32(id)), zap.Stringer("status", st))
	}
}

// verifyLarge checks the checksum of sample id, too large for the loader, by reading it
// whole once in pieces (Prefetch.Verify): a large sample costs one more read of itself.
func (f *FS) verifyLarge(ctx context.Context, sh backend.Shard, id layout.ID, e layout.Entry) error {
	buf := make([]byte, min(e.Size, 4<<20))
	var crc uint32
	for done := uint64(0); done < e.Size; {
		n := min(e.Size-done, uint64(len(buf)))
		if err := sh.ReadAt(ctx, buf[:n], int64(e.Offset+done)); err != nil {
			return err
		}
		crc = layout.UpdateChecksum(crc, buf[:n])
		done += n
	}
	err := prefetch.CheckSample(f.x, id, e, crc)
	if err != nil {
		f.loader.CountCorrupt()
	}
	return err
}

// readResult hands READ data to go-fuse: bytes in the request's buffer, or a View (a
// prefetch.Sample or a backend's lent buffer), released when go-fuse calls Done after sending. Instances are pooled, so a READ
// allocates nothing.
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
