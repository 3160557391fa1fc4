package view

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

func TestImageExt(t *testing.T) {
	for head, want := range map[string]string{
		"\xff\xd8\xff\xe0\x00\x10JFIF": "jpg", "\x89PNG\r\n\x1a\n\x00": "png", "RIFF\x10\x00\x00\x00WEBPVP8 ": "webp",
		"RIFF\x10\x00\x00\x00WAVE": "bin", "\xff\xd8": "bin", "": "bin", "GIF89a": "bin",
	} {
		if got := ImageExt([]byte(head)); got != want {
			t.Errorf("ImageExt(%q) = %s, want %s", head, got, want)
		}
	}
}

func TestRowName(t *testing.T) {
	for _, c := range []struct {
		row, rows int64
		want      string
	}{{0, 1, "0.jpg"}, {0, 10, "0.jpg"}, {3, 11, "03.jpg"}, {10, 11, "10.jpg"}, {7, 1000, "007.jpg"}, {0, 0, "0.jpg"}} {
		if got := RowName(c.row, c.rows, "jpg"); got != c.want {
			t.Errorf("RowName(%d, %d) = %s, want %s", c.row, c.rows, got, c.want)
		}
	}
}

func TestEach(t *testing.T) {
	var calls atomic.Int32
	seen := make([]bool, 50)
	done := 0
	err := Each(context.Background(), 50, 4, func(_ context.Context, i int) error {
		calls.Add(1)
		seen[i] = true
		return nil
	}, func(int) { done++ })
	if err != nil || calls.Load() != 50 || done != 50 {
		t.Fatalf("Each: %v, %d calls, %d done", err, calls.Load(), done)
	}
	for i, s := range seen {
		if !s {
			t.Errorf("item %d not read", i)
		}
	}
	// An error is returned, not the cancellation it causes in the items after it; the first
	// in the order of the items when both ran.
	for _, fail := range [][]int{{3}, {3, 5}, {0, 999}} {
		err = Each(context.Background(), 1000, 2, func(ctx context.Context, i int) error {
			if slices.Contains(fail, i) {
				return fmt.Errorf("item %d: %w", i, errors.ErrUnsupported)
			}
			return ctx.Err()
		}, func(int) {})
		if !errors.Is(err, errors.ErrUnsupported) || len(fail) == 1 && err.Error() != "item 3: unsupported operation" {
			t.Errorf("Each failing items %v = %v", fail, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Each(ctx, 3, 2, func(ctx context.Context, i int) error { return ctx.Err() }, func(int) {}); !errors.Is(err, context.Canceled) {
		t.Errorf("Each with its context cancelled = %v", err)
	}
}

func TestEachInOrder(t *testing.T) {
	var order []int
	read := func(_ context.Context, i int) error {
		time.Sleep(time.Duration((7*i)%5) * time.Millisecond) // finish out of order
		return nil
	}
	add := func(i int) error { order = append(order, i); return nil }
	if err := EachInOrder(context.Background(), 40, 4, read, add, nil); err != nil || !slices.IsSorted(order) || len(order) != 40 || order[39] != 39 {
		t.Fatalf("EachInOrder: %v, added %v; want 0..39 in order", err, order)
	}
	// An error of add stops the adds after it and is returned before a later read's error.
	order = nil
	err := EachInOrder(context.Background(), 40, 4, func(ctx context.Context, i int) error {
		if i == 30 {
			return errors.New("read 30")
		}
		return read(ctx, i)
	}, func(i int) error {
		order = append(order, i)
		if i == 10 {
			return errors.New("add 10")
		}
		return nil
	}, nil)
	if err == nil || err.Error() != "add 10" || len(order) != 11 {
		t.Errorf("EachInOrder with add 10 failing: %v, added %v", err, order)
	}
	// A read's error stops the adds at it.
	order = nil
	err = EachInOrder(context.Background(), 40, 4, func(ctx context.Context, i int) error {
		if i == 5 {
			return errors.New("read 5")
		}
		return read(ctx, i)
	}, add, nil)
	if err == nil || err.Error() != "read 5" || len(order) != 5 {
		t.Errorf("EachInOrder with read 5 failing: %v, added %v", err, order)
	}
}
