package subset

import "testing"

// TestRankSpread: the ranks of consecutive ids fall below a threshold of f in about f of cases,
// the property the caches' hit rates rest on.
func TestRankSpread(t *testing.T) {
	const n = 100000
	for _, f := range []float64{0.1, 0.5, 0.9} {
		th, in := Of(f), 0
		for id := uint64(0); id < n; id++ {
			if Rank(id) < th {
				in++
			}
		}
		if got := float64(in) / n; got < f-0.01 || got > f+0.01 {
			t.Errorf("fraction %.1f: %.4f of the ids rank below the threshold", f, got)
		}
	}
}

func TestThreshold(t *testing.T) {
	for _, c := range []struct {
		keep, total int64
		want        uint64
	}{
		{10, 10, All}, {11, 10, All}, {0, 10, 0}, {5, 10, 1 << 63}, {1, 4, 1 << 62},
	} {
		if got := Threshold(c.keep, c.total); got != c.want {
			t.Errorf("Threshold(%d, %d) = %#x, want %#x", c.keep, c.total, got, c.want)
		}
	}
	if Of(-1) != 0 || Of(2) != All {
		t.Errorf("Of clamps: Of(-1) = %#x, Of(2) = %#x", Of(-1), Of(2))
	}
}

// TestRankFixed pins the ranks: they choose which samples and chunks every mount keeps, so a
// change would move every cache's subset (and two builds would no longer agree).
func TestRankFixed(t *testing.T) {
	if got := Rank(0); got != 0xe220a8397b1dcdaf {
		t.Errorf("Rank(0) = %#x", got)
	}
	if got := Rank(41); got != Mix(41+Golden) {
		t.Errorf("Rank(41) = %#x", got)
	}
}
