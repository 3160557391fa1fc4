package bitset

import (
	"slices"
	"sync"
	"testing"
)

func TestBits(t *testing.T) {
	b := New(130)
	if len(b) != 3 {
		t.Fatalf("New(130) has %d words", len(b))
	}
	for _, i := range []uint64{0, 63, 64, 129} {
		b.Add(i)
	}
	b.Remove(63)
	var got []uint64
	b.Each(func(i uint64) { got = append(got, i) })
	if want := []uint64{0, 64, 129}; !slices.Equal(got, want) {
		t.Errorf("Each = %v, want %v", got, want)
	}
	if !b.Has(129) || b.Has(63) || b.Has(1) {
		t.Errorf("Has: 129 %v, 63 %v, 1 %v", b.Has(129), b.Has(63), b.Has(1))
	}
	b.Clear()
	if b.Has(0) || b.Has(64) {
		t.Error("Clear left items")
	}
}

// TestAtomicOnce: of many goroutines adding the same item, exactly one is told it was new.
func TestAtomicOnce(t *testing.T) {
	a := NewAtomic(1000)
	var wg sync.WaitGroup
	var mu sync.Mutex
	firsts := map[uint64]int{}
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := uint64(0); i < 1000; i++ {
				if a.Add(i) {
					mu.Lock()
					firsts[i]++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	for i := uint64(0); i < 1000; i++ {
		if firsts[i] != 1 || !a.Has(i) {
			t.Fatalf("item %d: added first %d times, Has %v", i, firsts[i], a.Has(i))
		}
	}
	if !a.Remove(5) || a.Remove(5) || a.Has(5) {
		t.Error("Remove: the first call must report the item, the second not")
	}
	b := NewAtomic(70)
	b.Fill()
	if !b.Has(0) || !b.Has(69) || b.Add(33) {
		t.Error("Fill must put every item in the set")
	}
}
