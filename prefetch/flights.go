package prefetch

import (
	"context"

	"github.com/aifs/aifs/internal/flight"
	"github.com/aifs/aifs/layout"
)

// Shared fetches: one fetch of a sample however many readers want it at once (internal/flight,
// keyed by sample id). A flight's leader, a reader (Read) or a prefetch worker (prefetch),
// resolves it with a *Sample holding one reference per waiter, taken before they wake.

// wait waits for flight f of sample id, which counted this reader among its waiters.
func (l *Loader) wait(id layout.ID, f *flight.Flight[*Sample], cancel <-chan struct{}, end int64) (*Sample, error) {
	select {
	case <-f.Done():
	case <-cancel:
		if l.flights.Withdraw(id, f) {
			return nil, context.Canceled
		}
		<-f.Done() // landed already: a reference was taken for us
		if s, _ := f.Result(); s != nil {
			s.Release()
		}
		return nil, context.Canceled
	}
	s, err := f.Result()
	if err != nil {
		return nil, err
	}
	l.mem.consumed(s, end)
	return s, nil
}

// resolve ends flight f of sample id: it takes a reference to s for each waiter, then wakes them.
func (l *Loader) resolve(id layout.ID, f *flight.Flight[*Sample], s *Sample, err error) {
	if n := l.flights.Land(id, f); s != nil && n > 0 {
		s.blk.refs.Add(int32(n))
	}
	f.Finish(s, err)
}
