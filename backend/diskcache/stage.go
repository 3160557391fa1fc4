package diskcache

import "github.com/aifs/aifs/backend/flight"

// stager stages the shards queued by their first reads, one at a time in that order, until
// Close.
func (c *Cache) stager() {
	for {
		select {
		case <-c.ctx.Done():
			return
		case s := <-c.stageQ:
			c.stageShard(s)
		}
	}
}

// stageShard fetches the chunks of s that the cache would keep and does not have, in order,
// up to stageRun bytes of adjacent chunks per inner read, one read at a time, waiting for
// room in the writers' queue and never taking more than half of it.
func (c *Cache) stageShard(s *shard) {
	runMax := max(stageRun, c.chunk)
	for i := int64(0); i < s.chunks(); {
		if c.ctx.Err() != nil || s.closed.Load() {
			return
		}
		if !c.stageable(s, i) {
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
			if j > i && (!c.stageable(s, j) || !c.pend.reserve(n, c.pend.maxBytes/2)) {
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
