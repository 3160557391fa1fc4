//go:build !linux

package local

// mapSlab returns slabBytes of the Go heap aligned to bufAlign, and false: slabs are mapped
// on Linux only (slab_linux.go).
func mapSlab() ([]byte, bool) { return alignedHeap(slabBytes), false }

// unmapPiece is never called: no slab is mapped.
func unmapPiece([]byte) {}
