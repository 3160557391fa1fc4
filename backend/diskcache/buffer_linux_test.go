package diskcache

import (
	"os"
	"strings"
	"testing"
	"unsafe"

	"github.com/aifs/aifs/backend/backendtest"
	"github.com/aifs/aifs/internal/hugepage"
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
	lo, hi := hugepage.Whole(p, uintptr(len(b)))
	if hi <= lo {
		t.Fatalf("a 4 MiB buffer at %#x holds no whole huge page", p)
	}
	for _, a := range []uintptr{lo, hi - 1} {
		if f := backendtest.VMFlags(t, a); !strings.Contains(" "+f+" ", " hg ") {
			t.Errorf("address %#x of the buffer [%#x, %#x): VmFlags %q, want hg", a, p, p+uintptr(len(b)), f)
		}
	}
}
