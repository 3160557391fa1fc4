package diskcache

import (
	"os"
	"strings"
	"testing"
	"unsafe"

	"github.com/aifs/aifs/backend/backendtest"
)

// TestChunkBufferHuge: the whole huge pages inside a 4 MiB chunk buffer lie in a mapping
// advised for huge pages ("hg" in the VmFlags of /proc/self/smaps). It needs a kernel with
// transparent huge pages, as Debian's and CI's have; without them it fails rather than skips.
func TestChunkBufferHuge(t *testing.T) {
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage"); err != nil {
		t.Fatalf("this kernel has no transparent huge pages, so the advice cannot be seen: %v", err)
	}
	b := newChunkBuffer(4 << 20)
	p := uintptr(unsafe.Pointer(&b[0]))
	lo, hi := wholeHugePages(p, uintptr(len(b)))
	if hi <= lo {
		t.Fatalf("a 4 MiB buffer at %#x holds no whole huge page", p)
	}
	for _, a := range []uintptr{lo, hi - 1} {
		if f := backendtest.VMFlags(t, a); !strings.Contains(" "+f+" ", " hg ") {
			t.Errorf("address %#x of the buffer [%#x, %#x): VmFlags %q, want hg", a, p, p+uintptr(len(b)), f)
		}
	}
}

// TestWholeHugePages: the advised range never leaves the buffer.
func TestWholeHugePages(t *testing.T) {
	const m = hugePage
	for _, c := range []struct{ p, n, lo, hi uintptr }{
		{10 * m, 2 * m, 10 * m, 12 * m},         // aligned: all of it
		{10*m + 8192, 4 * m, 11 * m, 14 * m},    // 8 KiB in: the 3 whole pages after
		{10*m + 8192, 2 * m, 11 * m, 12 * m},    // one whole page
		{10*m + 8192, m, 11 * m, 11 * m},        // none whole
		{10*m - 8192, m + 8192, 10 * m, 11 * m}, // ends on a boundary
		{10*m - 8192, m, 10 * m, 10 * m},        // across a boundary, none whole
	} {
		if lo, hi := wholeHugePages(c.p, c.n); lo != c.lo || hi != c.hi {
			t.Errorf("wholeHugePages(%#x, %#x) = [%#x, %#x), want [%#x, %#x)", c.p, c.n, lo, hi, c.lo, c.hi)
		}
	}
}
