// Package bitset holds sets of small integers (sample ids, chunk numbers, index groups) as one
// bit each: a set over n items costs n/8 bytes, and nothing per item is allocated.
package bitset

import (
	"math/bits"
	"sync/atomic"
)

// words returns the number of 64-bit words n bits take.
func words(n int) int { return (n + 63) / 64 }

// Bits is a set that is not safe for concurrent use: its owner's lock guards it.
type Bits []uint64

// New returns an empty Bits for the items 0 to n-1.
func New(n int) Bits { return make(Bits, words(n)) }

// Has reports whether i is in the set.
func (b Bits) Has(i uint64) bool { return b[i/64]&(1<<(i%64)) != 0 }

// Add puts i in the set.
func (b Bits) Add(i uint64) { b[i/64] |= 1 << (i % 64) }

// Remove takes i out of the set.
func (b Bits) Remove(i uint64) { b[i/64] &^= 1 << (i % 64) }

// Clear empties the set.
func (b Bits) Clear() { clear(b) }

// Each calls fn with every item in the set, in increasing order; fn may Remove the item it is
// given.
func (b Bits) Each(fn func(i uint64)) {
	for w, word := range b {
		for word != 0 {
			fn(uint64(w*64 + bits.TrailingZeros64(word)))
			word &= word - 1
		}
	}
}

// Atomic is a set safe for concurrent use without a lock.
type Atomic []atomic.Uint64

// NewAtomic returns an empty Atomic for the items 0 to n-1.
func NewAtomic(n int) Atomic { return make(Atomic, words(n)) }

// Has reports whether i is in the set.
func (a Atomic) Has(i uint64) bool { return a[i/64].Load()&(1<<(i%64)) != 0 }

// Add puts i in the set and reports whether it was not in it before.
func (a Atomic) Add(i uint64) bool {
	bit := uint64(1) << (i % 64)
	return a[i/64].Or(bit)&bit == 0
}

// Remove takes i out of the set and reports whether it was in it.
func (a Atomic) Remove(i uint64) bool {
	bit := uint64(1) << (i % 64)
	return a[i/64].And(^bit)&bit != 0
}

// Fill puts every item in the set (and the unused bits of its last word, which no item names).
func (a Atomic) Fill() {
	for i := range a {
		a[i].Store(^uint64(0))
	}
}
