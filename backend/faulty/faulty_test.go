package faulty

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/aifs/aifs/backend"
	"github.com/aifs/aifs/backend/backendtest"
	"github.com/aifs/aifs/backend/memory"
	"github.com/aifs/aifs/layout"
)

// TestSuite: with no rules the decorator is a conforming backend.
func TestSuite(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, files map[string][]byte) backend.Backend {
		return New(memory.New(files))
	})
}

// TestRules: each kind of fault applies to the calls, shards and number of calls its rule names.
func TestRules(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 100)
	a, z := layout.Shard{Name: layout.ShardName(0), Size: 1000}, layout.Shard{Name: layout.ShardName(1), Size: 1000}
	b := New(memory.New(map[string][]byte{a.Name: data, z.Name: data}))
	defer b.Close()
	boom := errors.New("boom")
	ctx := t.Context()

	b.Set(Rule{Op: Open, Shard: z.Name, Err: boom, Times: 1})
	if _, err := b.Open(ctx, z); !errors.Is(err, boom) {
		t.Errorf("Open with an error rule: %v", err)
	}
	sa, err := b.Open(ctx, a)
	if err != nil {
		t.Fatalf("Open of another shard: %v", err)
	}
	sz, err := b.Open(ctx, z)
	if err != nil {
		t.Fatalf("Open after the rule was spent: %v", err)
	}

	b.Set(Rule{Op: Read, Shard: a.Name, Err: boom, Times: 2})
	p := make([]byte, 100)
	for i := range 3 {
		err := sa.ReadAt(ctx, p, 10)
		if i < 2 && !errors.Is(err, boom) || i == 2 && (err != nil || !bytes.Equal(p, data[10:110])) {
			t.Errorf("read %d of a shard with a 2-time error rule: %v", i, err)
		}
	}
	if err := sz.ReadAt(ctx, p, 0); err != nil {
		t.Errorf("read of a shard the rule does not name: %v", err)
	}

	b.Set(Rule{Op: Read, Short: true})
	clear(p)
	if err := sa.ReadAt(ctx, p, 0); !errors.Is(err, io.ErrUnexpectedEOF) || !bytes.Equal(p[:50], data[:50]) {
		t.Errorf("short ReadAt: %v, first half %q", err, p[:50])
	}
	v, err := sa.(backend.Viewer).View(ctx, 0, 100)
	if err != nil || len(v.Bytes()) != 50 {
		t.Errorf("short View: %v, want 50 bytes and no error", err)
	} else {
		v.Release()
	}

	b.Set(Rule{Op: Read, Delay: time.Hour})
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := sa.ReadAt(cctx, p, 0); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 10*time.Second {
		t.Errorf("a delayed read under a 20 ms deadline: %v after %v", err, time.Since(start))
	}
	b.Set(Rule{Op: Read, Delay: 30 * time.Millisecond})
	start = time.Now()
	if err := sa.ReadAt(ctx, p, 0); err != nil || time.Since(start) < 30*time.Millisecond {
		t.Errorf("a read delayed 30 ms: %v after %v", err, time.Since(start))
	}
	b.Set()
	if calls, faults := b.Calls(); calls != 11 || faults != 7 {
		t.Errorf("Calls() = %d, %d; want 11 calls (3 opens, 8 reads), 7 faults", calls, faults)
	}
	sa.Close()
	sz.Close()
}
