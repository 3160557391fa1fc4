// Package hugepage advises memory for transparent huge pages (THP): buffers that a read fills
// whole (a chunk fetched from S3, a slab of O_DIRECT buffers, the index) then fault in 2 MiB at
// a time instead of 4 KiB, and cost one TLB entry per 2 MiB. Where THP is off ("never") the
// advice does nothing, and where the kernel lacks THP it fails: both are ignored, the memory
// works as any other.
package hugepage

// Size is the size of a transparent huge page on the platforms aifs runs on (x86-64, arm64 with
// 4 KiB pages).
const Size = 2 << 20

// Whole returns the addresses [lo, hi) of the huge pages that lie wholly inside the n bytes at
// p; hi <= lo when there are none.
func Whole(p, n uintptr) (lo, hi uintptr) {
	return (p + Size - 1) &^ (Size - 1), (p + n) &^ (Size - 1)
}
