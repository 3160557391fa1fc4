// Package subset defines the stable subset, the one keeping policy of aifs: a shuffled epoch
// reads each item once, so a cache that can hold a fraction f of the items keeps the same
// items every epoch — those whose Rank is below Threshold — and hits f of the next epoch's
// reads, where LRU hits about f²/2 (docs/design.md, "Why it is built this way").
//
// The memory cache and the page-cache policy (prefetch) rank samples by id, the disk cache
// (backend/diskcache) ranks chunks by shard version and index, and `aifs bench --keep-fraction`
// ranks files by path; all put their key through Mix, so a rank is the same in every process
// and every run, and two mounts of one set converge on the same subset.
package subset

// Golden is 2^64 divided by the golden ratio: splitmix64's increment, which spreads
// consecutive keys over the uint64s before Mix.
const Golden = 0x9e3779b97f4a7c15

// Mix is splitmix64's finalizer: a bijection of the uint64s that mixes every bit into every
// other.
func Mix(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// Rank places item key (a sample id, say) in [0, 2^64): splitmix64 of the key.
func Rank(key uint64) uint64 { return Mix(key + Golden) }

// All is the threshold of a subset that holds every item.
const All = ^uint64(0)

// Threshold returns the rank below which items are kept when keep bytes of total can be:
// All when keep ≥ total, else keep/total of 2^64.
func Threshold(keep, total int64) uint64 {
	if keep >= total {
		return All
	}
	return Of(float64(keep) / float64(total))
}

// Of returns the threshold of a subset of fraction f of the items (0 ≤ f ≤ 1): All at 1 or more.
func Of(f float64) uint64 {
	if f >= 1 {
		return All // f × 2^64 does not fit a uint64 at 1; below 1 it rounds to at most 2^64 - 2^11
	}
	return uint64(max(f, 0) * 0x1p64)
}
