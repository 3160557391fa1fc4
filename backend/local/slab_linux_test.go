package local

import (
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/aifs/aifs/backend/backendtest"
	"github.com/aifs/aifs/internal/hugepage"
)

// TestSlabBuffers: the buffers of every class up to a slab, over two slabs' worth each, are cut
// from memory advised for huge pages ("hg" in /proc/self/smaps) whose slabs start at a
// huge-page boundary; those of a larger class come from the Go heap (no "hg": Go does not advise
// its heap). Each is aligned for O_DIRECT, as long as its class, and shares no byte with
// another. It needs a kernel with transparent huge pages, as Debian's and CI's have; without
// them it fails rather than skips.
func TestSlabBuffers(t *testing.T) {
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage"); err != nil {
		t.Fatalf("this kernel has no transparent huge pages, so the advice cannot be seen: %v", err)
	}
	type span struct{ lo, hi uintptr }
	var spans []span
	var bufs []*buffer
	for c, size := range classes {
		for i := range max(2*slabBytes/size, 1) + 1 {
			b := newBuffer(c) // not getBuffer: the pools may hold buffers other tests returned
			p := uintptr(unsafe.Pointer(unsafe.SliceData(b.b)))
			if len(b.b) != size || cap(b.b) != size || b.class != c {
				t.Fatalf("class %d, buffer %d: len %d cap %d class %d, want %d, %d, %d", c, i, len(b.b), cap(b.b), b.class, size, size, c)
			}
			if p%bufAlign != 0 || size <= slabBytes && p%inSlabAlign(size) != 0 {
				t.Errorf("class %d, buffer %d at %#x: not aligned to its size in its slab", c, i, p)
			}
			for _, a := range []uintptr{p, p + uintptr(size) - 1} {
				f := backendtest.VMFlags(t, a)
				if hg := strings.Contains(" "+f+" ", " hg "); hg != (size <= slabBytes) {
					t.Errorf("class %d (%d bytes), buffer %d, address %#x: VmFlags %q, want hg only up to %d bytes", c, size, i, a, f, slabBytes)
				}
			}
			b.b[0], b.b[size-1] = byte(c), byte(i) // usable memory
			spans = append(spans, span{p, p + uintptr(size)})
			bufs = append(bufs, b)
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return int(a.lo>>12) - int(b.lo>>12) })
	for i := 1; i < len(spans); i++ {
		if spans[i].lo < spans[i-1].hi {
			t.Fatalf("buffers [%#x, %#x) and [%#x, %#x) overlap", spans[i-1].lo, spans[i-1].hi, spans[i].lo, spans[i].hi)
		}
	}
	runtime.KeepAlive(bufs)
}

// inSlabAlign returns the alignment of a buffer of size up to slabBytes: its slab starts at a
// huge page, and its buffers at multiples of their size (every such class divides slabBytes).
func inSlabAlign(size int) uintptr { return uintptr(min(size, hugepage.Size)) }

// TestSlabBufferUnmapped: a buffer that nothing references any more (the pools let it go) has
// its memory unmapped once the GC collects it, so that the daemon's memory falls after a burst
// of reads; mincore then finds no mapping there (ENOMEM).
func TestSlabBufferUnmapped(t *testing.T) {
	b := newBuffer(1)
	p, n := unsafe.Pointer(unsafe.SliceData(b.b)), len(b.b)
	b.b[0] = 1
	b = nil
	vec := make([]byte, n/os.Getpagesize())
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(p), uintptr(n), uintptr(unsafe.Pointer(&vec[0])))
		if errno == unix.ENOMEM {
			return
		}
		if errno != 0 {
			t.Fatalf("mincore: %v", errno)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the memory of a collected buffer [%p, +%d) is still mapped after 10 s", p, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
