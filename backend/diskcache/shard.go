package diskcache

import (
	"context"
	"fmt"
	"io/fs"
	"sync"
	"sync/atomic"

	"github.com/aifs/aifs/backend"
	"github.com/aifs/aifs/internal/bitset"
	"github.com/aifs/aifs/internal/flight"
)

// shard implements backend.Shard and backend.Viewer over one shard of the inner Backend.
type shard struct {
	c      *Cache
	inner  backend.Shard
	name   string
	size   int64
	nameID uint64    // chunkKey.name of its chunks
	ver    [2]uint64 // chunkKey.ver of its chunks
	closed atomic.Bool

	// Staging (stage.go): a bit per chunk to stage, set by Stage and touch, taken by the stager.
	want    bitset.Atomic
	queued  atomic.Bool // s is in the stager's queue, or being staged
	touched atomic.Bool // touch has queued all of s
}

// src is where the bytes of one chunk are for a read: data, a file, or neither (through:
// read the bytes asked for from the inner shard, not keeping them).
type src struct {
	data    []byte // the whole chunk in memory (immutable), or nil
	e       *entry // else the chunk's file, or nil
	through bool
	hit     bool // served without fetching (Stats)
}

func (s *shard) key(i int64) chunkKey { return chunkKey{name: s.nameID, ver: s.ver, idx: i} }

// chunkLen returns the length of chunk i.
func (s *shard) chunkLen(i int64) int64 { return min(s.c.chunk, s.size-i*s.c.chunk) }

func (s *shard) chunks() int64 { return (s.size + s.c.chunk - 1) / s.c.chunk }

func (s *shard) Size() int64 { return s.size }

// Close implements backend.Shard: it closes the inner shard.
func (s *shard) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	if err := s.inner.Close(); err != nil {
		return fmt.Errorf("diskcache: close %s: %w", s.name, err)
	}
	return nil
}

// check applies the range, closed and context rules of ReadAt to a read of n bytes at off.
func (s *shard) check(ctx context.Context, off int64, n int) error {
	switch {
	case s.closed.Load() || s.c.closing.Load():
		return fs.ErrClosed
	case off < 0 || n < 0 || off > s.size || int64(n) > s.size-off:
		return backend.ErrOutOfRange
	}
	return ctx.Err()
}

// ReadAt implements backend.Shard. Errors of the inner shard are wrapped as they are.
func (s *shard) ReadAt(ctx context.Context, p []byte, off int64) error {
	err := s.check(ctx, off, len(p))
	if err == nil && len(p) > 0 {
		err = s.read(ctx, p, off)
	}
	if err != nil {
		return fmt.Errorf("diskcache: read %s [%d,+%d): %w", s.name, off, len(p), err)
	}
	return nil
}

// read serves a checked, non-empty ReadAt chunk by chunk.
func (s *shard) read(ctx context.Context, p []byte, off int64) error {
	s.touch()
	cs, end := s.c.chunk, off+int64(len(p))
	first, last := off/cs, (end-1)/cs
	var stack [4]src
	srcs := stack[:0]
	if n := last - first + 1; n <= int64(len(stack)) {
		srcs = stack[:n]
	} else {
		srcs = make([]src, n)
	}
	if err := s.sources(ctx, first, srcs); err != nil {
		return err
	}
	for j := 0; j < len(srcs); {
		i := first + int64(j)
		lo := max(off, i*cs)
		if srcs[j].through { // with the chunks after it that are read through too
			k := j
			for k+1 < len(srcs) && srcs[k+1].through {
				k++
			}
			hi := min(end, (first+int64(k)+1)*cs)
			if err := s.through(ctx, p[lo-off:hi-off], lo, k-j+1); err != nil {
				return err
			}
			j = k + 1
			continue
		}
		hi := min(end, (i+1)*cs)
		if err := s.copyChunk(ctx, srcs[j], i, p[lo-off:hi-off], lo); err != nil {
			return err
		}
		j++
	}
	return nil
}

// copyChunk copies the bytes at [off, off+len(dst)) of chunk i from sr to dst. A chunk file
// that cannot be read (deleted by another process, torn) is dropped and the bytes are read
// from the inner shard.
func (s *shard) copyChunk(ctx context.Context, sr src, i int64, dst []byte, off int64) error {
	c := s.c
	coff := off - i*c.chunk
	if sr.data != nil {
		copy(dst, sr.data[coff:])
		c.count(sr.hit, len(dst))
		return nil
	}
	err := c.readFile(ctx, sr.e, dst, coff)
	if err == nil {
		c.count(true, len(dst))
		return nil
	}
	if ctx.Err() != nil {
		return err
	}
	c.fileFailed(sr.e, err)
	return s.through(ctx, dst, off, 1)
}

// through reads [off, off+len(dst)), in chunks chunks, from the inner shard without caching.
func (s *shard) through(ctx context.Context, dst []byte, off int64, chunks int) error {
	if err := s.inner.ReadAt(ctx, dst, off); err != nil {
		return err
	}
	s.c.fetched.Add(int64(len(dst)))
	s.c.misses.Add(int64(chunks))
	return nil
}

// View implements backend.Viewer. A range within one chunk is lent without a copy: from the
// chunk in memory, or in the pooled aligned buffer of the direct read of its file. A range
// across chunks is read into a new buffer.
func (s *shard) View(ctx context.Context, off int64, n int) (backend.View, error) {
	err := s.check(ctx, off, n)
	var v backend.View
	if err == nil {
		v, err = s.view(ctx, off, n)
	}
	if err != nil {
		return nil, fmt.Errorf("diskcache: read %s [%d,+%d): %w", s.name, off, n, err)
	}
	return v, nil
}

func (s *shard) view(ctx context.Context, off int64, n int) (backend.View, error) {
	c := s.c
	i := off / c.chunk
	if n == 0 || (off+int64(n)-1)/c.chunk != i {
		b := make([]byte, n)
		if n > 0 {
			if err := s.read(ctx, b, off); err != nil {
				return nil, err
			}
		}
		return lend(b), nil
	}
	s.touch()
	var one [1]src
	if err := s.sources(ctx, i, one[:]); err != nil {
		return nil, err
	}
	sr, coff := one[0], off-i*c.chunk
	switch {
	case sr.data != nil:
		c.count(sr.hit, n)
		return lend(sr.data[coff : coff+int64(n) : coff+int64(n)]), nil
	case sr.e != nil:
		v, err := c.viewFile(ctx, sr.e, coff, n)
		if err == nil {
			c.count(true, n)
			return v, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		c.fileFailed(sr.e, err)
	}
	b := make([]byte, n)
	if err := s.through(ctx, b, off, 1); err != nil {
		return nil, err
	}
	return lend(b), nil
}

// sources finds where each chunk of first, first+1, ... is, one per element of srcs: chunks
// in the set are hits; the others go through fetch.
func (s *shard) sources(ctx context.Context, first int64, srcs []src) error {
	missing := false
	for j := range srcs {
		srcs[j] = src{}
		if e := s.c.set.get(s.key(first + int64(j))); e != nil {
			if m := e.mem.Load(); m != nil {
				srcs[j] = src{data: *m, hit: true}
				continue
			}
			if e.state.Load() == stateOnDisk {
				srcs[j] = src{e: e, hit: true}
				continue
			}
		}
		missing = true
	}
	if !missing {
		return nil
	}
	return s.fetch(ctx, first, srcs)
}

// fetch fills the empty elements of srcs (missing chunks). For each: wait for a fetch in
// flight; else take the chunk's file if another process wrote it; else, if the set would take
// the chunk and the writers' queue has room for it (reserved now, for the fetch), fetch it
// (the chunks this reader leads are fetched together on a goroutine of the Cache, adjacent
// ones in one inner read); else read it through.
func (s *shard) fetch(ctx context.Context, first int64, srcs []src) error {
	c := s.c
	type wait struct {
		j int
		f *flight.Flight[src]
	}
	var waits []wait
	var lead []int64
	var leadF []*flight.Flight[src]
	for j := range srcs {
		if srcs[j].data != nil || srcs[j].e != nil {
			continue
		}
		i := first + int64(j)
		k, n := s.key(i), s.chunkLen(i)
		if f := c.flights.Wait(k); f != nil {
			waits = append(waits, wait{j, f})
			continue
		}
		if e := c.tryDisk(k, n); e != nil {
			srcs[j] = src{e: e, hit: true}
			continue
		}
		if !c.set.wouldAdmit(k.rank(), n) || !c.pend.reserve(n, c.pend.maxBytes) {
			srcs[j].through = true
			continue
		}
		f, leader := c.flights.JoinAwait(k)
		if leader {
			if sr, ok := c.present(k); ok { // admitted since our look
				c.flights.Resolve(k, f, sr, nil)
				leader = false
			} else {
				lead, leadF = append(lead, i), append(leadF, f)
			}
		}
		if !leader {
			c.pend.release(n)
		}
		waits = append(waits, wait{j, f})
	}
	if len(lead) > 0 && !c.start(func() { c.fetchRuns(c.ctx, s, lead, leadF) }) {
		for j, f := range leadF {
			c.pend.release(s.chunkLen(lead[j]))
			c.flights.Resolve(s.key(lead[j]), f, src{}, fs.ErrClosed)
		}
	}
	for _, w := range waits {
		select {
		case <-w.f.Done():
		case <-ctx.Done():
			return ctx.Err()
		}
		sr, err := w.f.Result()
		if err != nil {
			return err
		}
		srcs[w.j] = sr
	}
	return nil
}

// present returns the src of chunk k if the set has it readable.
func (c *Cache) present(k chunkKey) (src, bool) {
	if e := c.set.get(k); e != nil {
		if m := e.mem.Load(); m != nil {
			return src{data: *m, hit: true}, true
		}
		if e.state.Load() == stateOnDisk {
			return src{e: e, hit: true}, true
		}
	}
	return src{}, false
}

// fetchRuns fetches chunks idx (ascending) of s from the inner shard, each run of adjacent
// chunks in one read, offers each to the set and resolves its flight (fls, in step with idx).
// The caller has reserved each chunk's place in the writers' queue; fetchRuns hands the
// reservations on or releases them. It returns the bytes fetched.
func (c *Cache) fetchRuns(ctx context.Context, s *shard, idx []int64, fls []*flight.Flight[src]) int64 {
	var fetched int64
	for a := 0; a < len(idx); {
		b := a
		for b+1 < len(idx) && idx[b+1] == idx[b]+1 {
			b++
		}
		start := idx[a] * c.chunk
		buf := newChunkBuffer(min((idx[b]+1)*c.chunk, s.size) - start)
		err := s.inner.ReadAt(ctx, buf, start)
		if err == nil {
			fetched += int64(len(buf))
			c.fetched.Add(int64(len(buf)))
		}
		for j := a; j <= b; j++ {
			k, n := s.key(idx[j]), s.chunkLen(idx[j])
			var sr src
			if err == nil {
				lo := idx[j]*c.chunk - start
				data := buf[lo : lo+n : lo+n]
				sr.data = data
				e := newEntry(k, n, stateWriting)
				e.mem.Store(&data)
				c.offer(e)
			} else {
				c.pend.release(n)
			}
			c.flights.Resolve(k, fls[j], sr, err)
		}
		if fn := c.arrived.Load(); err == nil && fn != nil {
			(*fn)(s.name, start, buf)
		}
		a = b + 1
	}
	return fetched
}

// offer admits e (stateWriting, with mem, its place in the writers' queue reserved) to the
// set and queues it for the writers, if the policy takes it; else it releases the place.
func (c *Cache) offer(e *entry) {
	c.closeMu.RLock()
	defer c.closeMu.RUnlock()
	var doomed []*entry
	ok := false
	if !c.closed {
		doomed, _, ok = c.set.admit(e)
	}
	if !ok {
		c.pend.release(e.size)
		return
	}
	c.doom(doomed)
	c.jobs <- e // never blocks: the reservation holds a place
	if c.sinceScan.Add(e.size) >= c.opt.Size/8 {
		select {
		case c.rescanQ <- struct{}{}:
		default:
		}
	}
}

func (c *Cache) count(hit bool, n int) {
	if hit {
		c.hits.Add(1)
		c.hitBytes.Add(int64(n))
	} else {
		c.misses.Add(1)
	}
}

// sliceView lends bytes that nobody modifies (a chunk in memory, or a buffer of its own).
type sliceView struct{ b []byte }

var sliceViews = sync.Pool{New: func() any { return new(sliceView) }}

func lend(b []byte) *sliceView {
	v := sliceViews.Get().(*sliceView)
	v.b = b
	return v
}

func (v *sliceView) Bytes() []byte { return v.b }

func (v *sliceView) Release() {
	v.b = nil
	sliceViews.Put(v)
}
