package diskcache

import (
	"container/heap"
	"sync"
	"sync/atomic"
)

const (
	partBits = 6
	parts    = 1 << partBits // lock stripes of the set and of the flights
)

// States of an entry.
const (
	stateWriting int32 = iota + 1 // admitted: its bytes are in mem, queued for the writer or being written
	stateOnDisk                   // its file is complete
	stateGone                     // evicted, failed or found missing: never read from disk again
)

// entry is one chunk the Cache knows of. Readers find it in the set without a global lock and
// read it from mem or its file according to state.
type entry struct {
	key  chunkKey
	size int64  // bytes of the chunk (the last chunk of a shard is shorter)
	rank uint64 // key.rank()

	state atomic.Int32
	mem   atomic.Pointer[[]byte]   // the whole chunk while it waits for the writer; immutable
	file  atomic.Pointer[openFile] // the chunk's open file, kept by the fd cache (files.go)

	// Guarded by set.mu:
	pos  int    // index in set.heap; -1 when not in the set
	seq  uint64 // set.seq when admitted or when its file was completed
	seen uint64 // the last scan generation whose listing had its file
}

func newEntry(k chunkKey, size int64, state int32) *entry {
	e := &entry{key: k, size: size, rank: k.rank(), pos: -1}
	e.state.Store(state)
	return e
}

// set is the chunks the Cache holds or is writing, and the admission policy: the stable
// subset. Entries rank by a hash of their key; while the budget has room every chunk is
// admitted, and when it is full a chunk is admitted only by evicting chunks of higher rank.
// Whatever the order chunks come in, the set converges on the lowest-ranked chunks that fit
// (a bottom-k sample by bytes), the same subset every epoch, in every process sharing the
// directory and after every restart. The set does no I/O: it returns the entries whose files
// must go.
//
// Lock order: mu, then a part's mu. Lookups take only a part's read lock.
type set struct {
	budget int64

	mu   sync.Mutex // guards heap, seq, gen and each entry's pos, seq and seen
	heap rankHeap   // the entries in the set, highest rank first
	seq  uint64     // counts admissions and completed writes
	gen  uint64     // counts scans

	used      atomic.Int64  // bytes of the entries in the set; changed under mu
	worst     atomic.Uint64 // rank of heap[0], or 0 when empty; changed under mu
	evictions atomic.Int64

	parts [parts]part
}

type part struct {
	mu sync.RWMutex // guards m
	m  map[chunkKey]*entry
	_  [32]byte // a cache line each
}

func (s *set) init(budget int64) {
	s.budget = budget
	for i := range s.parts {
		s.parts[i].m = map[chunkKey]*entry{}
	}
}

// get returns the entry of k, or nil.
func (s *set) get(k chunkKey) *entry {
	p := &s.parts[k.part()]
	p.mu.RLock()
	e := p.m[k]
	p.mu.RUnlock()
	return e
}

// wouldAdmit predicts, without locking, whether admit would take a chunk of this rank and
// size now.
func (s *set) wouldAdmit(rank uint64, size int64) bool {
	return size <= s.budget && (s.used.Load()+size <= s.budget || rank < s.worst.Load())
}

// admit adds e to the set if the policy takes it: ok. If the set has an entry for e's key
// already, admit returns it as have and does nothing. Admitting may evict entries of higher
// rank: they leave the set and become stateGone, and those whose files were complete are
// returned as doomed, for the caller to delete (the writer deletes the others' files when it
// gets to them).
func (s *set) admit(e *entry) (doomed []*entry, have *entry, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := &s.parts[e.key.part()]
	p.mu.RLock()
	have = p.m[e.key]
	p.mu.RUnlock()
	if have != nil || e.size > s.budget {
		return nil, have, false
	}
	var victims []*entry
	for need := s.used.Load() + e.size - s.budget; need > 0; need -= victims[len(victims)-1].size {
		if len(s.heap) == 0 || s.heap[0].rank <= e.rank {
			for _, v := range victims { // not enough ranks above e's: undo
				heap.Push(&s.heap, v)
			}
			return nil, nil, false
		}
		victims = append(victims, heap.Pop(&s.heap).(*entry))
	}
	for _, v := range victims {
		vp := &s.parts[v.key.part()]
		vp.mu.Lock()
		delete(vp.m, v.key)
		vp.mu.Unlock()
		s.used.Add(-v.size)
		if v.state.Swap(stateGone) == stateOnDisk {
			doomed = append(doomed, v)
		}
	}
	s.evictions.Add(int64(len(victims)))
	s.seq++
	e.seq = s.seq
	heap.Push(&s.heap, e)
	p.mu.Lock()
	p.m[e.key] = e
	p.mu.Unlock()
	s.used.Add(e.size)
	s.setWorst()
	return doomed, nil, true
}

// remove takes e out of the set, if it is there, and reports whether it was.
func (s *set) remove(e *entry) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.pos < 0 {
		return false
	}
	s.removeLocked(e)
	s.setWorst()
	return true
}

// removeLocked takes e, which is in the set, out of the heap, the map and used; the caller
// holds mu (and no part's mu) and calls setWorst.
func (s *set) removeLocked(e *entry) {
	heap.Remove(&s.heap, e.pos)
	p := &s.parts[e.key.part()]
	p.mu.Lock()
	if p.m[e.key] == e {
		delete(p.m, e.key)
	}
	p.mu.Unlock()
	s.used.Add(-e.size)
}

// written notes that e's file is now complete (for rescans, see Cache.reconcile).
func (s *set) written(e *entry) {
	s.mu.Lock()
	s.seq++
	e.seq = s.seq
	s.mu.Unlock()
}

func (s *set) setWorst() {
	if len(s.heap) == 0 {
		s.worst.Store(0)
	} else {
		s.worst.Store(s.heap[0].rank)
	}
}

// rankHeap is a max-heap of entries by rank that keeps each entry's pos.
type rankHeap []*entry

func (h rankHeap) Len() int           { return len(h) }
func (h rankHeap) Less(i, j int) bool { return h[i].rank > h[j].rank }
func (h rankHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].pos, h[j].pos = i, j
}
func (h *rankHeap) Push(x any) {
	e := x.(*entry)
	e.pos = len(*h)
	*h = append(*h, e)
}
func (h *rankHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.pos = -1
	return e
}
