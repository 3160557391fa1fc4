package local

import (
	"runtime"
	"sync"
	"unsafe"

	"github.com/aifs/aifs/backend"
)

const (
	bufAlign = 4096            // address alignment of pooled buffers; a file needing more is read buffered
	maxChunk = backend.MaxView // bytes per direct pread, which bounds pooled buffers
)

// Buffers for reads, shared by the direct and buffered paths: aligned so O_DIRECT can use them,
// pooled so a READ allocates nothing.

// Pooled buffers come in size classes, so that a 112 KiB sample does not pin a 4 MiB buffer.
// Each starts at a bufAlign-aligned address and is returned to the pool of its class.
//
// The memory of the classes up to slabBytes comes from slabs of slabBytes (slab_linux.go): on
// Linux mapped outside the Go heap, aligned to huge pages and advised for transparent huge
// pages (MADV_HUGEPAGE), each cut into buffers of one class. Every byte a read lends is pinned
// twice by the kernel: by the O_DIRECT read that fills it, and by the FUSE write (a READ's
// reply, a push into the page cache) that copies it out, which pins the source one 4 KiB page
// per call; in huge pages the page walk stops a level up and the copies miss the TLB less.
// A buffer the pool lets go (sync.Pool drops what a GC cycle found unused) is unmapped when the
// GC collects it, so the daemon's memory still falls after a burst of reads, as the Go heap's
// would.
//
// A slab is one huge page, resident whole once a buffer in it is touched, so each class costs
// 2 MiB at least; the 4 MiB class, for samples over 1 MiB (chunk reads are 1 MiB), comes from
// the Go heap, as larger slabs cost too much memory in a small cgroup. The measurements behind
// the classes and the slabs: docs/bench/edges-notes.md, "Pooled buffers".
var (
	classes = [...]int{128 << 10, 1 << 20, maxChunk}
	pools   [len(classes)]sync.Pool // of *buffer
	cut     [len(classes)]pieces    // of each class, cut from a slab and not handed out yet
)

// slabBytes is the memory mapped at a time for pooled buffers of the classes up to it: one
// huge page.
const slabBytes = 2 << 20

type buffer struct {
	b      []byte // len = cap = classes[class]
	class  int    // -1: not pooled
	lo, hi int    // the window lent by View: b[lo:hi]
}

// pieces is the memory of buffers not yet made, cut from slabs.
type pieces struct {
	mu     sync.Mutex
	free   [][]byte
	mapped bool // the free pieces are mapped (mapSlab), so unmapped when their buffer is collected
}

// Bytes and Release make a buffer the backend.View of a shard (local.go).
func (b *buffer) Bytes() []byte { return b.b[b.lo:b.hi] }
func (b *buffer) Release() {
	if b.class >= 0 {
		putBuffer(b)
	}
}

// getBuffer returns a buffer of at least n bytes; beyond maxChunk it is a new, unpooled one.
func getBuffer(n int) *buffer {
	if n > maxChunk {
		return &buffer{b: make([]byte, n), class: -1}
	}
	c := 0
	for classes[c] < n {
		c++
	}
	if b, ok := pools[c].Get().(*buffer); ok {
		return b
	}
	return newBuffer(c)
}

func putBuffer(b *buffer) { pools[b.class].Put(b) }

// newBuffer makes a buffer of class c (its pool had none): from a piece of a slab, mapping a
// new slab when the last is used up, or from the Go heap for a class larger than a slab.
func newBuffer(c int) *buffer {
	if classes[c] > slabBytes {
		return &buffer{b: alignedHeap(classes[c]), class: c}
	}
	p := &cut[c]
	p.mu.Lock()
	if len(p.free) == 0 {
		slab, mapped := mapSlab()
		for off := 0; off < len(slab); off += classes[c] {
			p.free = append(p.free, slab[off:off+classes[c]:off+classes[c]])
		}
		p.mapped = mapped
	}
	mem, mapped := p.free[len(p.free)-1], p.mapped
	p.free = p.free[:len(p.free)-1]
	p.mu.Unlock()
	b := &buffer{b: mem, class: c}
	if mapped {
		runtime.AddCleanup(b, unmapPiece, mem)
	}
	return b
}

// alignedHeap returns n bytes of the Go heap starting at a bufAlign-aligned address.
func alignedHeap(n int) []byte {
	raw := make([]byte, n+bufAlign)
	skip := int(-uintptr(unsafe.Pointer(&raw[0])) & (bufAlign - 1))
	return raw[skip : skip+n : skip+n]
}
