package prefetch

import (
	"bytes"
	"sync/atomic"

	"github.com/dgraph-io/ristretto/v2"

	"github.com/aifs/aifs/internal/subset"
	"github.com/aifs/aifs/layout"
)

// memCache is the Loader's memory cache (ristretto; values immutable) and its budget. Every
// sample the Loader holds is counted, before it is fetched or kept, in aheadBytes (read ahead,
// not yet read to its end; at most aheadBudget) or keptBytes (the stable subset; at most
// keepBudget). splitMemory splits CacheBytes so that keepBudget + aheadBudget = CacheBytes, and
// take never lets a part pass its budget, so the bytes held, keptBytes + aheadBytes, never
// exceed CacheBytes, not even for a moment (the stats file and the tests read them while
// readers run). Its methods are safe for concurrent use and take no lock of their own: the
// counters are atomic, and ristretto locks inside.
type memCache struct {
	cache                   *ristretto.Cache[uint32, *Sample]
	keepBudget, aheadBudget int64
	keepFraction            uint64 // a sample is in the subset iff its rank < keepFraction (of 2^64)
	keepRead                bool   // Options.KeepRead
	keptBytes, aheadBytes   atomic.Int64
	stats                   *loaderStats // aheadUsed, aheadWasted
}

// splitMemory splits the memory budget, cacheBytes, between the stable subset (keep; a
// sample is in it iff its rank is below fraction) and read-ahead (ahead), for a set of data
// bytes. Without keepRead all of it is read-ahead's. When the set fits, all of it is kept and
// read-ahead gets what is left over. Otherwise read-ahead, which needs little (a plan's depth,
// a sequential window), gets 1/aheadShare of the budget (at most maxAheadBytes) and the
// subset, which sets the next epoch's hit rate, the rest.
func splitMemory(cacheBytes, data int64, keepRead bool) (keep, ahead int64, fraction uint64) {
	if !keepRead {
		return 0, cacheBytes, 0
	}
	if data <= cacheBytes {
		return data, cacheBytes - data, subset.All
	}
	ahead = min(cacheBytes/aheadShare, maxAheadBytes)
	keep = cacheBytes - ahead
	return keep, ahead, subset.Threshold(keep, data)
}

// onExit runs when the cache lets go of a sample (deleted, evicted, rejected or replaced).
func (m *memCache) onExit(s *Sample) {
	if s == nil {
		return
	}
	size := int64(len(s.data))
	if s.ahead.Swap(false) {
		m.aheadBytes.Add(-size)
		m.stats.aheadWasted.Add(uint64(size))
	}
	if s.kept.Swap(false) {
		m.keptBytes.Add(-size)
	}
	s.blk.release()
}

// consumed notes that a reader read s up to end: a sample fetched ahead that is now read to
// its end leaves the read-ahead budget, and the cache unless it is in the subset.
func (m *memCache) consumed(s *Sample, end int64) {
	if end < int64(len(s.data)) || !s.ahead.Load() {
		return
	}
	if !s.ahead.Swap(false) {
		return
	}
	size := int64(len(s.data))
	m.aheadBytes.Add(-size)
	m.stats.aheadUsed.Add(uint64(size))
	if !m.reserveKeep(s.id, size) {
		m.cache.Del(uint32(s.id))
		return
	}
	// Into the subset, as a copy of its own (the cache lets go of s, and s's buffer goes with
	// its last reader).
	m.cacheCopy(s, true)
}

// cacheCopy puts into the cache, in s's place, an exact-size copy of s, as kept (its keptBytes
// already counted) or as read ahead (its aheadBytes, counted for s, pass to the copy). A
// sample that lives in the cache for epochs (kept) or may wait there for a READ that never
// comes (detach) must not pin a pooled read buffer of the next size class (a 130 KB sample in
// a 1 MiB buffer) or the neighbours it was read ahead with, which the budget, counting sample
// bytes, would not see.
func (m *memCache) cacheCopy(s *Sample, kept bool) {
	own := newSample(s.id, bytes.Clone(s.data), nil)
	own.blk.refs.Store(1) // the cache's
	if kept {
		own.kept.Store(true)
	} else {
		own.ahead.Store(true)
	}
	if !m.cache.Set(uint32(s.id), own, int64(len(s.data))) {
		m.onExit(own)
	}
}

// admit offers s, fetched for a reader who holds a reference, to the cache: as read-ahead
// (already reserved; it may join the subset once read, see consumed) or, with KeepRead, to
// the subset if it belongs there and fits.
func (m *memCache) admit(s *Sample, ahead bool) {
	size := int64(len(s.data))
	if !ahead {
		if m.reserveKeep(s.id, size) {
			m.cacheCopy(s, true)
		}
		return
	}
	s.ahead.Store(true)
	s.blk.refs.Add(1) // the cache's
	if !m.cache.Set(uint32(s.id), s, size) {
		m.onExit(s)
	}
}

// reserveAhead counts n bytes of read-ahead against the budget, or reports that they do not fit.
func (m *memCache) reserveAhead(n int64) bool { return take(&m.aheadBytes, m.aheadBudget, n) }

// reserveKeep counts sample id of n bytes into the subset if it belongs there and fits.
func (m *memCache) reserveKeep(id layout.ID, n int64) bool {
	if !m.keepRead || subset.Rank(uint64(id)) >= m.keepFraction {
		return false
	}
	return take(&m.keptBytes, m.keepBudget, n)
}

// take counts n bytes into part (aheadBytes or keptBytes), which never holds more than limit,
// or reports that they do not fit. Return them with part.Add(-n).
func take(part *atomic.Int64, limit, n int64) bool {
	for {
		h := part.Load()
		if h+n > limit {
			return false
		}
		if part.CompareAndSwap(h, h+n) {
			return true
		}
	}
}
