// Package flight shares one fetch among the callers that want the same thing at once (a
// singleflight): the first caller of a key leads the fetch and resolves its Flight; the others
// wait for that result instead of fetching again. The prefetch loader shares sample fetches
// through it, the disk cache chunk fetches. It imports the standard library only.
package flight

import "sync"

// stripes is the number of lock stripes of a Group.
const stripes = 64

// Group is the set of flights in progress, by key, in lock stripes. Init it before use. All
// methods are safe for concurrent use; each takes one stripe lock, held for a map operation
// and never while calling out, so a caller may hold its own locks around them (lock order:
// the caller's locks, then a stripe's).
type Group[K comparable, V any] struct {
	hash  func(K) uint // picks a key's stripe (modulo stripes); spreads the keys in use
	parts [stripes]part[K, V]
}

// part is one lock stripe of a Group.
type part[K comparable, V any] struct {
	mu sync.Mutex // guards m and the waiters and done of its flights
	m  map[K]*Flight[V]
	_  [40]byte // a cache line each
}

// Flight is one fetch in progress. Its result, set by Finish, may be read (Result) once Done is
// closed.
type Flight[V any] struct {
	done    chan struct{} // made when the first waiter comes: a flight nobody waits for allocates none
	waiters int           // callers counted by Join and Wait, less those that withdrew
	val     V
	err     error
}

// closed is the Done of a flight finished with no waiter.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Init prepares g, whose keys are spread over its lock stripes by hash.
func (g *Group[K, V]) Init(hash func(K) uint) {
	g.hash = hash
	for i := range g.parts {
		g.parts[i].m = map[K]*Flight[V]{}
	}
}

func (g *Group[K, V]) part(k K) *part[K, V] { return &g.parts[g.hash(k)%stripes] }

// Busy reports whether a flight of k is in progress.
func (g *Group[K, V]) Busy(k K) bool {
	p := g.part(k)
	p.mu.Lock()
	_, ok := p.m[k]
	p.mu.Unlock()
	return ok
}

// Join returns the flight of k, starting one if there is none: leader says the caller started
// it and must Resolve it (or Land and Finish it); any other caller is counted among its waiters.
// The leader is not a waiter: it must not use Done (see JoinAwait).
func (g *Group[K, V]) Join(k K) (f *Flight[V], leader bool) { return g.join(k, false) }

// JoinAwait is Join for a leader that hands the fetch to another goroutine and waits on Done
// like the others (it costs a channel even if nobody else comes).
func (g *Group[K, V]) JoinAwait(k K) (f *Flight[V], leader bool) { return g.join(k, true) }

func (g *Group[K, V]) join(k K, leaderWaits bool) (f *Flight[V], leader bool) {
	p := g.part(k)
	p.mu.Lock()
	if f = p.m[k]; f != nil {
		f.wait()
		p.mu.Unlock()
		return f, false
	}
	f = &Flight[V]{}
	if leaderWaits {
		f.done = make(chan struct{})
	}
	p.m[k] = f
	p.mu.Unlock()
	return f, true
}

// Start starts a flight of k and returns it for the caller to Resolve, or returns nil if one is
// in progress.
func (g *Group[K, V]) Start(k K) *Flight[V] {
	p := g.part(k)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m[k] != nil {
		return nil
	}
	f := &Flight[V]{}
	p.m[k] = f
	return f
}

// Wait returns the flight of k, counting the caller among its waiters, or nil if there is none.
func (g *Group[K, V]) Wait(k K) *Flight[V] {
	p := g.part(k)
	p.mu.Lock()
	f := p.m[k]
	if f != nil {
		f.wait()
	}
	p.mu.Unlock()
	return f
}

// wait counts a waiter; the caller holds the stripe lock.
func (f *Flight[V]) wait() {
	f.waiters++
	if f.done == nil {
		f.done = make(chan struct{})
	}
}

// Withdraw uncounts a waiter of flight f of k that stops waiting, and reports true, if f is
// still in progress; false says f has landed already and counted the caller in Land's result.
func (g *Group[K, V]) Withdraw(k K, f *Flight[V]) bool {
	p := g.part(k)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m[k] != f {
		return false
	}
	f.waiters--
	return true
}

// Land removes flight f of k from g and returns its waiters, final from now on: no caller joins
// it or withdraws from it any more. The leader then hands each waiter its share of the result
// (a reference, say) and calls Finish.
func (g *Group[K, V]) Land(k K, f *Flight[V]) (waiters int) {
	p := g.part(k)
	p.mu.Lock()
	if p.m[k] == f {
		delete(p.m, k)
	}
	waiters = f.waiters
	if f.done == nil {
		f.done = closed // nobody waits: nothing to close
	}
	p.mu.Unlock()
	return waiters
}

// Finish sets the result of flight f, which has landed, and wakes its waiters.
func (f *Flight[V]) Finish(v V, err error) {
	f.val, f.err = v, err
	if f.done != closed {
		close(f.done)
	}
}

// Resolve ends flight f of k with its result: Land, then Finish.
func (g *Group[K, V]) Resolve(k K, f *Flight[V], v V, err error) {
	g.Land(k, f)
	f.Finish(v, err)
}

// Done is closed when f's result is set. Only a caller counted among the waiters may use it.
func (f *Flight[V]) Done() <-chan struct{} { return f.done }

// Result returns what f's leader fetched; call it after Done is closed.
func (f *Flight[V]) Result() (V, error) { return f.val, f.err }
