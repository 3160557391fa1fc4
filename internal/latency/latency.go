// Package latency holds Histogram, durations counted without a lock: the FUSE requests' latency
// in the stats file (fs) and the kernel plane's waits for chunks filled from S3 (kernel).
package latency

import (
	"math/bits"
	"sync/atomic"
)

// Histogram counts durations (or any values) in buckets of 1/8 of a power of two (12.5% wide):
// values below 8 are exact, values from 2^40 (18 minutes in ns) on share the last bucket. Add
// is one atomic add; the zero value is ready to use.
type Histogram struct{ b [nBuckets]atomic.Uint64 }

const (
	subBits  = 3
	maxBits  = 40
	nBuckets = (maxBits-subBits+1)<<subBits + 1<<subBits
)

func bucketOf(v uint64) int {
	v = min(v, 1<<maxBits-1)
	if v < 1<<subBits {
		return int(v)
	}
	l := bits.Len64(v) // ≥ subBits+1
	return (l-subBits)<<subBits + int(v>>(l-subBits-1))&(1<<subBits-1)
}

// bucketMid is the middle of bucket i's range, in the histogram's unit.
func bucketMid(i int) float64 {
	if i < 1<<subBits {
		return float64(i)
	}
	l, m := i>>subBits+subBits, uint64(i&(1<<subBits-1))
	width := uint64(1) << (l - subBits - 1)
	return float64((1<<subBits+m)*width) + float64(width)/2
}

// Add records v.
func (h *Histogram) Add(v uint64) { h.b[bucketOf(v)].Add(1) }

// Quantiles returns the values below which fractions qs of the recorded values lie (bucket
// midpoints), or zeros if nothing was recorded.
func (h *Histogram) Quantiles(qs ...float64) []float64 {
	var counts [nBuckets]uint64
	var total uint64
	for i := range counts {
		counts[i] = h.b[i].Load()
		total += counts[i]
	}
	out := make([]float64, len(qs))
	if total == 0 {
		return out
	}
	for j, q := range qs {
		rank := uint64(q*float64(total-1)) + 1 // 1-based rank of the quantile
		var seen uint64
		for i, c := range counts {
			if seen += c; seen >= rank {
				out[j] = bucketMid(i)
				break
			}
		}
	}
	return out
}
