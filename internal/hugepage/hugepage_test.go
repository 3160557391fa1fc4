package hugepage

import "testing"

// TestWhole: the advised range never leaves the buffer.
func TestWhole(t *testing.T) {
	const m = Size
	for _, c := range []struct{ p, n, lo, hi uintptr }{
		{10 * m, 2 * m, 10 * m, 12 * m},         // aligned: all of it
		{10*m + 8192, 4 * m, 11 * m, 14 * m},    // 8 KiB in: the 3 whole pages after
		{10*m + 8192, 2 * m, 11 * m, 12 * m},    // one whole page
		{10*m + 8192, m, 11 * m, 11 * m},        // none whole
		{10*m - 8192, m + 8192, 10 * m, 11 * m}, // ends on a boundary
		{10*m - 8192, m, 10 * m, 10 * m},        // across a boundary, none whole
	} {
		if lo, hi := Whole(c.p, c.n); lo != c.lo || hi != c.hi {
			t.Errorf("Whole(%#x, %#x) = [%#x, %#x), want [%#x, %#x)", c.p, c.n, lo, hi, c.lo, c.hi)
		}
	}
}
