package view

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"sync"
)

// ImageExt returns the extension of an image by its first bytes (12 are enough): "jpg" for
// JPEG (ff d8 ff), "png" for PNG, "webp" for WebP (RIFF....WEBP), and "bin" for anything else.
// Formats whose samples have no name of their own (a TFRecord record, a Hugging Face row) name
// them ROW.EXT with it.
func ImageExt(head []byte) string {
	switch {
	case bytes.HasPrefix(head, []byte{0xff, 0xd8, 0xff}):
		return "jpg"
	case bytes.HasPrefix(head, []byte("\x89PNG\r\n\x1a\n")):
		return "png"
	case len(head) >= 12 && string(head[:4]) == "RIFF" && string(head[8:12]) == "WEBP":
		return "webp"
	}
	return "bin"
}

// RowName returns the name of row (or record) number row of a source of rows rows, in the
// Tree view: the number zero-padded to the width of the last one, so that names sort in row
// order, then "." and ext.
func RowName(row, rows int64, ext string) string {
	var buf [32]byte
	return string(appendRowName(buf[:0], row, rowWidth(rows), ext))
}

// rowWidth is the width of the row numbers of a source of rows rows.
func rowWidth(rows int64) int {
	w := 1
	for n := max(rows-1, 0); n >= 10; n /= 10 {
		w++
	}
	return w
}

// appendRowName appends row's name, its number zero-padded to width, to b.
func appendRowName(b []byte, row int64, width int, ext string) []byte {
	var num [20]byte
	digits := strconv.AppendInt(num[:0], row, 10)
	for range width - len(digits) {
		b = append(b, '0')
	}
	b = append(append(b, digits...), '.')
	return append(b, ext...)
}

// Each calls read(ctx, i) for i in [0, n), jobs at once, and done(i) (serialised, for
// progress) after each. An error stops the calls not started yet (their ctx is cancelled);
// Each returns the first error in the order of i that is not that cancellation, or ctx's.
func Each(parent context.Context, n, jobs int, read func(ctx context.Context, i int) error, done func(i int)) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	errs := make([]error, n)
	var mu sync.Mutex // serialises done
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(max(jobs, 1), n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if errs[i] = ctx.Err(); errs[i] == nil {
					errs[i] = read(ctx, i)
				}
				if errs[i] != nil {
					cancel()
				}
				mu.Lock()
				done(i)
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil && (parent.Err() != nil || !errors.Is(err, context.Canceled)) {
			return err
		}
	}
	return parent.Err()
}

// EachInOrder is Each with add(i) called for each i in the order of i, as soon as read(ctx, i)
// and every read before it have succeeded (serialised with done, from the goroutine whose read
// completed the run), so that what is done with the results in their order overlaps the reads
// of later ones. An error of add stops the reads not started yet and no later add is called;
// EachInOrder returns the first error in the order of i, of read or add.
func EachInOrder(parent context.Context, n, jobs int, read func(ctx context.Context, i int) error, add func(i int) error, done func(i int)) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	ok := make([]bool, n)    // read i succeeded: written and read by the goroutine of read i only
	ready := make([]bool, n) // ok, published under Each's serialisation of done
	next := 0
	var addErr error
	err := Each(ctx, n, jobs, func(ctx context.Context, i int) error {
		err := read(ctx, i)
		ok[i] = err == nil
		return err
	}, func(i int) {
		if done != nil {
			done(i)
		}
		ready[i] = ok[i]
		for addErr == nil && next < n && ready[next] {
			addErr = add(next)
			next++
		}
		if addErr != nil {
			cancel()
		}
	})
	if addErr != nil {
		return addErr
	}
	return err
}
