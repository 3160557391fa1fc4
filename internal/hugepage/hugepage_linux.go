package hugepage

import (
	"syscall"
	"unsafe"
)

// Advise advises the whole huge pages inside b for THP (MADV_HUGEPAGE), never a neighbour's
// page: b need not be aligned. The advice stays on the address range after b is freed.
func Advise(b []byte) {
	if len(b) < Size {
		return
	}
	p := uintptr(unsafe.Pointer(&b[0]))
	if lo, hi := Whole(p, uintptr(len(b))); hi > lo {
		syscall.Madvise(b[lo-p:hi-p], syscall.MADV_HUGEPAGE) // advice: an error changes nothing
	}
}
