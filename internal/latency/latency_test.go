package latency

import (
	"math"
	"testing"
)

// TestQuantiles records known values and checks that each quantile lands within a bucket's
// width (12.5%) of the true value.
func TestQuantiles(t *testing.T) {
	var h Histogram
	if q := h.Quantiles(0.5); q[0] != 0 {
		t.Fatalf("empty histogram: p50 %v, want 0", q[0])
	}
	for v := uint64(1); v <= 1000; v++ {
		h.Add(v * 1000) // 1 µs .. 1 ms in ns
	}
	for _, c := range []struct{ q, want float64 }{{0.5, 500e3}, {0.99, 990e3}, {0.01, 10e3}} {
		got := h.Quantiles(c.q)[0]
		if math.Abs(got-c.want)/c.want > 0.125 {
			t.Errorf("q%.2f = %.0f, want %.0f ± 12.5%%", c.q, got, c.want)
		}
	}
	for v := range uint64(8) {
		if b := bucketOf(v); b != int(v) || bucketMid(b) != float64(v) {
			t.Errorf("value %d: bucket %d mid %v, want exact", v, b, bucketMid(b))
		}
	}
	if bucketOf(math.MaxUint64) != bucketOf(1<<40) || bucketOf(1<<40) == bucketOf(1<<39) {
		t.Errorf("values from 2^40 on do not share one bucket of their own")
	}
}
