// Package backendtest is the conformance suite that every backend.Backend passes: Run checks
// the contract documented in package backend against a real instance.
package backendtest

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aifs/aifs/backend"
	"github.com/aifs/aifs/layout"
)

// Run checks the backend that open returns for a shard set holding files (shard name →
// contents). Run calls open more than once; each call must return a new Backend over those
// files only. Run closes every Backend and Shard it gets.
func Run(t *testing.T, open func(t *testing.T, files map[string][]byte) backend.Backend) {
	rng := rand.New(rand.NewPCG(1, 2))
	files := map[string][]byte{
		layout.ShardName(0): random(rng, 9<<20+7), // several 4 MiB chunks, ends mid-block
		layout.ShardName(1): random(rng, 64<<10),  // a whole number of blocks
		layout.ShardName(2): random(rng, 3),       // less than one block
		layout.ShardName(3): {},                   // empty
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range files {
			yield(n)
		}
	})
	b := open(t, files)
	t.Cleanup(func() { b.Close() })
	shards := map[string]backend.Shard{}
	for _, name := range names {
		sh, err := b.Open(t.Context(), layout.Shard{Name: name, Size: uint64(len(files[name]))})
		if err != nil {
			t.Fatalf("Open(%s): %v", name, err)
		}
		t.Cleanup(func() { sh.Close() })
		if sh.Size() != int64(len(files[name])) {
			t.Errorf("%s: Size() = %d, want %d", name, sh.Size(), len(files[name]))
		}
		shards[name] = sh
	}

	// Reads return exactly the stored bytes: unaligned, empty, up to and across EOF, > 4 MiB.
	t.Run("Reads", func(t *testing.T) {
		for _, name := range names {
			for _, c := range readCases(rng, int64(len(files[name]))) {
				checkRead(t, shards[name], name, files[name], c[0], c[1])
			}
		}
	})
	// Views, where the Shard lends them, hold the same bytes as reads.
	t.Run("Views", func(t *testing.T) {
		for _, name := range names {
			v, ok := shards[name].(backend.Viewer)
			if !ok {
				continue
			}
			data := files[name]
			for _, c := range readCases(rng, int64(len(data))) {
				off, n := c[0], c[1]
				view, err := v.View(t.Context(), off, int(n))
				if err != nil {
					t.Errorf("%s: View [%d,+%d): %v", name, off, n, err)
					continue
				}
				if !bytes.Equal(view.Bytes(), data[off:off+n]) {
					t.Errorf("%s: View [%d,+%d): wrong bytes", name, off, n)
				}
				view.Release()
			}
			if _, err := v.View(t.Context(), int64(len(data)), 1); !errors.Is(err, backend.ErrOutOfRange) {
				t.Errorf("%s: View past the end: got %v, want ErrOutOfRange", name, err)
			}
		}
	})
	// Any byte outside [0, Size) is out of range, with no overflow on huge offsets.
	t.Run("OutOfRange", func(t *testing.T) {
		for _, name := range names {
			n := int64(len(files[name]))
			for _, c := range [][2]int64{{-1, 1}, {-1, 0}, {n - 1, 2}, {n, 1}, {n + 1, 0}, {n + 4096, 10}, {math.MaxInt64, 1}, {math.MinInt64, 1}} {
				err := shards[name].ReadAt(t.Context(), make([]byte, c[1]), c[0])
				if !errors.Is(err, backend.ErrOutOfRange) {
					t.Errorf("%s: ReadAt [%d,+%d) of %d bytes: got %v, want ErrOutOfRange", name, c[0], c[1], n, err)
				}
			}
		}
	})
	// Missing shards, and names that could escape the shard set, do not exist.
	t.Run("NotExist", func(t *testing.T) {
		for _, name := range []string{layout.ShardName(999999), "..", ".", "a/b", "../" + names[0], "x\x00"} {
			sh, err := b.Open(t.Context(), layout.Shard{Name: name, Size: 1})
			if !errors.Is(err, backend.ErrNotExist) || !strings.Contains(err.Error(), strings.Trim(name, "./\x00")) {
				t.Errorf("Open(%q): got %v, want ErrNotExist naming the shard", name, err)
			}
			if sh != nil {
				sh.Close()
			}
		}
	})
	t.Run("Mismatch", func(t *testing.T) {
		for _, name := range names {
			for _, size := range []int64{int64(len(files[name])) + 1, int64(len(files[name])) - 1, 1 << 40} {
				if size < 0 {
					continue
				}
				sh, err := b.Open(t.Context(), layout.Shard{Name: name, Size: uint64(size)})
				if !errors.Is(err, backend.ErrMismatch) || !strings.Contains(err.Error(), name) {
					t.Errorf("Open(%s, size %d of %d): got %v, want ErrMismatch naming the shard", name, size, len(files[name]), err)
				}
				if sh != nil {
					sh.Close()
				}
			}
		}
	})
	// 32 readers share the open shards (run it with -race).
	t.Run("Concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		for g := range 32 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(g), 3))
				for range 64 {
					name := names[rng.IntN(len(names))]
					n := int64(len(files[name]))
					off := rng.Int64N(n + 1)
					checkRead(t, shards[name], name, files[name], off, rng.Int64N(min(n-off, 256<<10)+1))
				}
			})
		}
		wg.Wait()
	})
	t.Run("Cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := shards[names[0]].ReadAt(ctx, make([]byte, 10), 0); !errors.Is(err, context.Canceled) {
			t.Errorf("ReadAt with a cancelled context: got %v, want context.Canceled", err)
		}
	})
	// Close is idempotent for both types, and closed things fail with fs.ErrClosed.
	t.Run("Close", func(t *testing.T) {
		data := random(rng, 5000)
		b := open(t, map[string][]byte{layout.ShardName(0): data})
		s := layout.Shard{Name: layout.ShardName(0), Size: uint64(len(data))}
		sh, err := b.Open(t.Context(), s)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		checkRead(t, sh, s.Name, data, 100, 200)
		if err1, err2 := sh.Close(), sh.Close(); err1 != nil || err2 != nil {
			t.Errorf("Shard.Close twice: %v, %v", err1, err2)
		}
		if err := sh.ReadAt(t.Context(), make([]byte, 10), 0); !errors.Is(err, fs.ErrClosed) {
			t.Errorf("ReadAt after Close: got %v, want fs.ErrClosed", err)
		}
		if err1, err2 := b.Close(), b.Close(); err1 != nil || err2 != nil {
			t.Errorf("Backend.Close twice: %v, %v", err1, err2)
		}
		if sh, err := b.Open(t.Context(), s); !errors.Is(err, fs.ErrClosed) {
			t.Errorf("Open after Backend.Close: got %v, want fs.ErrClosed", err)
			if sh != nil {
				sh.Close()
			}
		}
	})
}

// readCases returns {offset, length} pairs inside a shard of n bytes: edge cases around
// alignment, chunk boundaries and the end of the shard, then random ones.
func readCases(rng *rand.Rand, n int64) [][2]int64 {
	var cases [][2]int64
	for _, c := range [][2]int64{
		{0, 0}, {n, 0}, {0, n}, {0, 1}, {1, 4095}, {511, 513}, {4095, 2}, {4097, 8191}, {n - 1, 1},
		{n - 1000, 1000}, {n - 4096 - 17, 4096 + 17}, {n - 5000, 4990}, {n - 3, 2},
		{4<<20 - 1, 2}, {4<<20 - 100, 4<<20 + 200}, {1, n - 2},
	} {
		if c[0] >= 0 && c[1] >= 0 && c[0]+c[1] <= n {
			cases = append(cases, c)
		}
	}
	for i := range 200 {
		off := rng.Int64N(n + 1)
		limit := min(n-off, 300<<10)
		if i%20 == 0 {
			limit = n - off
		}
		cases = append(cases, [2]int64{off, rng.Int64N(limit + 1)})
	}
	return cases
}

// checkRead reads [off, off+l) of sh into the middle of a larger buffer and checks the bytes
// read and that the bytes around them are untouched.
func checkRead(t *testing.T, sh backend.Shard, name string, data []byte, off, l int64) {
	const guard = 64
	buf := bytes.Repeat([]byte{0xA5}, int(l)+2*guard)
	p := buf[guard : guard+l]
	for i := range p {
		p[i] = ^data[off+int64(i)] // differs from the expected byte everywhere
	}
	if err := sh.ReadAt(context.Background(), p, off); err != nil {
		t.Errorf("%s: ReadAt [%d,+%d): %v", name, off, l, err)
		return
	}
	if !bytes.Equal(p, data[off:off+l]) {
		t.Errorf("%s: ReadAt [%d,+%d) returned wrong bytes", name, off, l)
	}
	if bytes.Count(buf[:guard], []byte{0xA5}) != guard || bytes.Count(buf[guard+l:], []byte{0xA5}) != guard {
		t.Errorf("%s: ReadAt [%d,+%d) wrote outside p", name, off, l)
	}
}

func random(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}
