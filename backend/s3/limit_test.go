package s3

import (
	"context"
	"testing"
	"time"
)

// TestLimiter: the limit halves on throttling (once per burst), never below 1, grows by one
// after a limit's worth of successes, and a full limiter makes acquire wait for a release or
// its context.
func TestLimiter(t *testing.T) {
	l := newLimiter()
	ctx := context.Background()
	l.acquire(ctx)
	l.release(true)
	if _, lim := l.state(); lim != maxInFlight/2 {
		t.Fatalf("after one throttle: limit %d, want %d", lim, maxInFlight/2)
	}
	l.acquire(ctx)
	l.release(true) // the same burst: no second cut
	if _, lim := l.state(); lim != maxInFlight/2 {
		t.Fatalf("after a second throttle within %v: limit %d, want %d", cutEvery, lim, maxInFlight/2)
	}
	for range 12 {
		l.lastCut = time.Time{} // a later burst
		l.acquire(ctx)
		l.release(true)
	}
	if _, lim := l.state(); lim != 1 {
		t.Fatalf("after many throttles: limit %d, want 1", lim)
	}
	l.acquire(ctx) // the one slot
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := l.acquire(short); err == nil {
		t.Fatal("acquire past the limit did not wait")
	}
	done := make(chan error)
	go func() { done <- l.acquire(ctx) }()
	time.Sleep(10 * time.Millisecond)
	l.release(false) // a success: the waiter gets the slot
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	l.release(false)
	if n, lim := l.state(); n != 0 || lim != 2 {
		t.Fatalf("after 2 successes at limit 1: in flight %d, limit %d; want 0 and 2", n, lim)
	}
}
