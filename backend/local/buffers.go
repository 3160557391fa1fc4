package local

import (
	"sync"
	"unsafe"
)

const (
	bufAlign = 4096    // address alignment of pooled buffers; a file needing more is read buffered
	maxChunk = 4 << 20 // bytes per direct pread, which bounds pooled buffers
)

// Buffers for reads, shared by the direct and buffered paths: aligned so O_DIRECT can use them,
// pooled so a READ allocates nothing.

// Pooled buffers come in size classes, so that a 112 KiB sample does not pin a 4 MiB buffer.
// Each starts at a bufAlign-aligned address and is returned to the pool of its class. (Classes
// of 256 and 512 KiB as well were tried, for samples held in a memory cgroup: the daemon's
// settled heap in the soak test grew by up to 1 MB more, and the page cache's policy now lets
// go of read-ahead it cannot push rather than hold it.)
var (
	classes = [...]int{128 << 10, 1 << 20, maxChunk}
	pools   [len(classes)]sync.Pool // of *buffer
)

type buffer struct {
	b      []byte // len = cap = classes[class]
	class  int    // -1: not pooled
	lo, hi int    // the window lent by View: b[lo:hi]
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
	raw := make([]byte, classes[c]+bufAlign)
	skip := int(-uintptr(unsafe.Pointer(&raw[0])) & (bufAlign - 1))
	return &buffer{b: raw[skip : skip+classes[c] : skip+classes[c]], class: c}
}

func putBuffer(b *buffer) { pools[b.class].Put(b) }
