package flight

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

func newGroup() *Group[int, string] {
	g := &Group[int, string]{}
	g.Init(func(k int) uint { return uint(k) })
	return g
}

// TestJoin: the first caller of a key leads, the others wait for its result and are counted;
// a landed flight takes no more waiters and the next caller leads a new one.
func TestJoin(t *testing.T) {
	g := newGroup()
	f, leader := g.Join(1)
	if !leader || !g.Busy(1) || g.Busy(2) {
		t.Fatalf("first Join: leader %v, busy %v %v", leader, g.Busy(1), g.Busy(2))
	}
	if g.Start(1) != nil {
		t.Error("Start of a key in flight started another")
	}
	w1, l1 := g.Join(1)
	w2 := g.Wait(1)
	if l1 || w1 != f || w2 != f || g.Wait(2) != nil {
		t.Fatalf("Join and Wait of a key in flight: leader %v, same flight %v %v", l1, w1 == f, w2 == f)
	}
	if !g.Withdraw(1, w2) {
		t.Error("Withdraw from a flight in progress failed")
	}
	boom := errors.New("boom")
	if n := g.Land(1, f); n != 1 {
		t.Errorf("Land: %d waiters, want 1 (two came, one withdrew)", n)
	}
	if g.Withdraw(1, f) || g.Busy(1) {
		t.Error("a landed flight is still in the group")
	}
	f.Finish("v", boom)
	<-w1.Done()
	if v, err := w1.Result(); v != "v" || err != boom {
		t.Errorf("Result: %q, %v", v, err)
	}
	if f2, leader := g.Join(1); !leader || f2 == f {
		t.Error("Join after the flight landed did not lead a new one")
	}
	// A flight nobody waited for is Done once finished, and JoinAwait's leader may wait too.
	f3, _ := g.JoinAwait(3)
	g.Resolve(3, f3, "x", nil)
	<-f3.Done()
	f4 := g.Start(4)
	g.Resolve(4, f4, "y", nil)
	<-f4.Done()
}

// TestConcurrent: many callers of a few keys at once; every waiter gets its leader's result,
// and the waiters counted at Land are those that waited.
func TestConcurrent(t *testing.T) {
	g := newGroup()
	var wg sync.WaitGroup
	var waited, counted atomic.Int64
	for i := range 64 {
		wg.Go(func() {
			for j := range 2000 {
				k := (i + j) % 5
				f, leader := g.Join(k)
				if leader {
					counted.Add(int64(g.Land(k, f)))
					f.Finish(string(rune('a'+k)), nil)
					continue
				}
				<-f.Done()
				waited.Add(1)
				if v, err := f.Result(); err != nil || v != string(rune('a'+k)) {
					t.Errorf("key %d: %q, %v", k, v, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if waited.Load() != counted.Load() {
		t.Errorf("%d waited, %d counted by Land", waited.Load(), counted.Load())
	}
}
