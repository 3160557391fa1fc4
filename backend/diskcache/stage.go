package diskcache

import "github.com/aifs/aifs/internal/flight"

// Stage implements backend.Stager: it marks the chunks of [off, off+n) for the stager and
// queues s if it is not queued yet. A no-op without Options.StageShards. From the first call
// on, reads no longer stage whole shards (touch): the plans say what this node reads.
func (s *shard) Stage(off, n int64) {
	if s.want == nil || off < 0 || n <= 0 || off >= s.size {
		return
	}
	if !s.c.planned.Load() {
		s.c.planned.Store(true)
	}
	last := min(off+n, s.size) - 1
	for i := off / s.c.chunk; i <= last/s.c.chunk; i++ {
		s.mark(i)
	}
	s.queue()
}

// mark marks chunk i of s for the stager.
func (s *shard) mark(i int64) {
	if !s.want.Has(uint64(i)) { // a load first: most marks are of chunks marked already
		s.want.Add(uint64(i))
	}
}

// touch marks all of s for the stager on its first read, unless a plan has asked for chunks.
func (s *shard) touch() {
	if s.want == nil || s.c.planned.Load() || s.touched.Load() || s.touched.Swap(true) {
		return
	}
	s.want.Fill() // bits past the last chunk are ignored
	s.queue()
}

// queue puts s in the stager's queue unless it is there; a full queue leaves it for the next
// Stage or touch.
func (s *shard) queue() {
	if s.queued.Load() || s.queued.Swap(true) {
		return
	}
	select {
	case s.c.stageQ <- s:
	default:
		s.queued.Store(false)
	}
}

// stager stages the shards queued, one at a time in that order, until Close.
func (c *Cache) stager() {
	for {
		select {
		case <-c.ctx.Done():
			return
		case s := <-c.stageQ:
			s.queued.Store(false) // bits set from now on queue s again
			c.stageShard(s)
		}
	}
}

// taken returns whether chunk i of s was marked, and clears the mark.
func (s *shard) taken(i int64) bool {
	return s.want.Remove(uint64(i))
}

// stageShard fetches the marked chunks of s that the cache would keep and does not have, in
// order, up to stageRun bytes of adjacent chunks per inner read, one read at a time, waiting
// for room in the writers' queue and never taking more than half of it.
func (c *Cache) stageShard(s *shard) {
	runMax := max(stageRun, c.chunk)
	for i := int64(0); i < s.chunks(); {
		if c.ctx.Err() != nil || s.closed.Load() {
			return
		}
		if !s.taken(i) || !c.stageable(s, i) {
			i++
			continue
		}
		if !c.waitRoom(s.chunkLen(i)) {
			return
		}
		var idx []int64
		var fls []*flight.Flight[src]
		var bytes int64
		for j := i; j < s.chunks() && bytes < runMax; j++ {
			k, n := s.key(j), s.chunkLen(j)
			if j > i && (!s.taken(j) || !c.stageable(s, j)) {
				break
			}
			if j > i && !c.pend.reserve(n, c.pend.maxBytes/2) {
				s.mark(j) // the next round of the outer loop waits for room for it
				break
			}
			f, leader := c.flights.JoinAwait(k)
			if leader {
				if sr, ok := c.present(k); ok {
					c.flights.Resolve(k, f, sr, nil)
					leader = false
				}
			}
			if !leader {
				c.pend.release(n)
				break
			}
			idx, fls, bytes = append(idx, j), append(fls, f), bytes+n
		}
		if len(idx) == 0 {
			i++
			continue
		}
		c.staged.Add(c.fetchRuns(c.ctx, s, idx, fls))
		i = idx[len(idx)-1] + 1
	}
}

// stageable reports whether chunk i of s is worth staging: the set does not have it and would
// take it, no fetch of it is in flight, and no other process has written it (if one has, it
// is adopted).
func (c *Cache) stageable(s *shard, i int64) bool {
	k, n := s.key(i), s.chunkLen(i)
	if c.set.get(k) != nil || c.flights.Busy(k) || !c.set.wouldAdmit(k.rank(), n) {
		return false
	}
	return c.tryDisk(k, n) == nil
}

// waitRoom reserves a place in the writers' queue for a chunk of n bytes, within half of it,
// waiting for the writers if need be; false if the Cache closed first.
func (c *Cache) waitRoom(n int64) bool {
	for !c.pend.reserve(n, c.pend.maxBytes/2) {
		select {
		case <-c.room:
		case <-c.ctx.Done():
			return false
		}
	}
	return true
}
