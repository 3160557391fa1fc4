package prefetch

import (
	"sync/atomic"

	"github.com/aifs/aifs/backend"
	"github.com/aifs/aifs/layout"
)

// Sample is one sample's bytes, held by reference: Release it exactly once when done. It is a
// backend.View.
type Sample struct {
	data []byte
	blk  *block
	id   layout.ID
	// ahead: fetched ahead (or whole for a READ that did not reach its end) and not yet read
	// to the end; counted in aheadBytes. kept: in the subset, counted in keptBytes.
	ahead, kept atomic.Bool
}

// Bytes returns the whole sample.
func (s *Sample) Bytes() []byte { return s.data }

// Release lets go of the reader's reference.
func (s *Sample) Release() { s.blk.release() }

// block is one buffer read from a shard, shared by the samples in it and freed when the last
// reference goes.
type block struct {
	refs atomic.Int32
	view backend.View // nil when the buffer is plain Go memory
}

// newSample returns sample id over data, the only sample of a new block over view (nil for
// plain memory), with no reference yet: Sample and block in one allocation.
func newSample(id layout.ID, data []byte, view backend.View) *Sample {
	o := &struct {
		s Sample
		b block
	}{}
	o.b.view = view
	o.s.data, o.s.blk, o.s.id = data, &o.b, id
	return &o.s
}

func (b *block) acquire() bool {
	for {
		n := b.refs.Load()
		if n <= 0 {
			return false
		}
		if b.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (b *block) release() {
	if b.refs.Add(-1) == 0 && b.view != nil {
		b.view.Release()
	}
}
