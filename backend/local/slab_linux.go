package local

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/aifs/aifs/internal/hugepage"
)

// mapSlab returns slabBytes of zeroed memory for pooled buffers, mapped at a huge-page
// boundary and advised for transparent huge pages, and true; or, where the kernel refuses the
// mapping, memory of the Go heap aligned to bufAlign, and false. Where THP is off ("never")
// the advice does nothing and the slab has 4 KiB pages, as the heap would.
func mapSlab() ([]byte, bool) {
	// Map a huge page more than needed, and unmap what lies outside the aligned slab.
	p, err := unix.MmapPtr(-1, 0, nil, slabBytes+hugepage.Size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return alignedHeap(slabBytes), false
	}
	skip := -uintptr(p) & (hugepage.Size - 1) // bytes before the first huge-page boundary
	if skip > 0 {
		unix.MunmapPtr(p, skip)
	}
	slab := unsafe.Slice((*byte)(unsafe.Add(p, skip)), slabBytes)
	if tail := hugepage.Size - skip; tail > 0 {
		unix.MunmapPtr(unsafe.Add(p, skip+slabBytes), tail)
	}
	unix.Madvise(slab, unix.MADV_HUGEPAGE) // advice: an error changes nothing
	return slab, true
}

// unmapPiece unmaps the memory of a collected buffer, a piece of a mapped slab.
func unmapPiece(mem []byte) { unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(mem)), uintptr(len(mem))) }
