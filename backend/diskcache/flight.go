package diskcache

import "sync"

// flight is one fetch of a chunk from the inner Backend in progress. Readers of the chunk wait
// for done and then read src or err, which are set before done is closed. A reader that stops
// waiting (its context ended) does not cancel the fetch: the fetch belongs to the Cache.
type flight struct {
	done chan struct{}
	src  src
	err  error
}

// flights is the set of flights, by chunk, in lock stripes.
type flights struct {
	parts [parts]struct {
		mu sync.Mutex // guards m
		m  map[chunkKey]*flight
		_  [48]byte
	}
}

func (fl *flights) init() {
	for i := range fl.parts {
		fl.parts[i].m = map[chunkKey]*flight{}
	}
}

// get returns the flight of k, or nil.
func (fl *flights) get(k chunkKey) *flight {
	p := &fl.parts[k.part()]
	p.mu.Lock()
	f := p.m[k]
	p.mu.Unlock()
	return f
}

// join returns the flight of k, creating it if there is none: leader says the caller created
// it and must resolve it.
func (fl *flights) join(k chunkKey) (f *flight, leader bool) {
	p := &fl.parts[k.part()]
	p.mu.Lock()
	defer p.mu.Unlock()
	if f = p.m[k]; f != nil {
		return f, false
	}
	f = &flight{done: make(chan struct{})}
	p.m[k] = f
	return f, true
}

// resolve ends flight f of k with its result and wakes its readers.
func (fl *flights) resolve(k chunkKey, f *flight, s src, err error) {
	p := &fl.parts[k.part()]
	p.mu.Lock()
	if p.m[k] == f {
		delete(p.m, k)
	}
	p.mu.Unlock()
	f.src, f.err = s, err
	close(f.done)
}
