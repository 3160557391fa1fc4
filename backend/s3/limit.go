package s3

import (
	"context"
	"sync"
	"time"
)

// limiter bounds the requests in flight to the endpoint, adapting the bound to throttling
// (docs/s3.md, "Throttling"): the limit halves when the server throttles (503 SlowDown, 429),
// at most once per cutEvery so that one burst of throttled answers counts once, and grows by
// one after each limit's worth of requests answered without throttling (additive increase,
// multiplicative decrease, as TCP does with its window). A throttling storm so slows the
// requests down instead of failing them. Taking a slot allocates nothing unless it must wait.
type limiter struct {
	mu        sync.Mutex
	limit     int
	inFlight  int
	successes int             // answered without throttling since the last change of limit
	lastCut   time.Time       // when limit last halved
	waiters   []chan struct{} // closed on release: each waiter tries again
}

const (
	maxInFlight = 256 // the limit's ceiling, and where it starts
	cutEvery    = 100 * time.Millisecond
)

func newLimiter() *limiter { return &limiter{limit: maxInFlight} }

// acquire waits for a slot, or until ctx is done.
func (l *limiter) acquire(ctx context.Context) error {
	l.mu.Lock()
	for l.inFlight >= l.limit {
		ch := make(chan struct{})
		l.waiters = append(l.waiters, ch)
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		l.mu.Lock()
	}
	l.inFlight++
	l.mu.Unlock()
	return nil
}

// release gives the slot back and adapts the limit to how the request went.
func (l *limiter) release(throttled bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inFlight--
	switch {
	case throttled:
		l.successes = 0
		if now := time.Now(); now.Sub(l.lastCut) >= cutEvery {
			l.limit, l.lastCut = max(1, l.limit/2), now
		}
	case l.limit < maxInFlight:
		if l.successes++; l.successes >= l.limit {
			l.limit, l.successes = l.limit+1, 0
		}
	}
	for _, ch := range l.waiters {
		close(ch)
	}
	l.waiters = l.waiters[:0]
}

// state returns the requests in flight and the limit.
func (l *limiter) state() (inFlight, limit int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inFlight, l.limit
}
