package local

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/aifs/aifs/backend"
	"github.com/aifs/aifs/backend/backendtest"
	"github.com/aifs/aifs/layout"
)

// TestSuiteTempDir runs the conformance suite on whatever filesystem holds t.TempDir(), with
// O_DIRECT or the fallback; the tests in direct_linux_test.go pin down each path.
func TestSuiteTempDir(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, files map[string][]byte) backend.Backend {
		return newBackend(t, writeFiles(t, t.TempDir(), files), func(msg string) { t.Log(msg) })
	})
}

// newBackend returns a Backend over dir that fails the test if it logs more than one notice.
func newBackend(t testing.TB, dir string, logger func(string)) *Backend {
	var notices atomic.Int32
	b, err := New(dir, Options{Logger: func(msg string) { notices.Add(1); logger(msg) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.Close()
		if n := notices.Load(); n > 1 {
			t.Errorf("Backend logged %d notices, want at most one", n)
		}
	})
	return b
}

// writeFiles writes files (name → contents) into dir and returns dir.
func writeFiles(t testing.TB, dir string, files map[string][]byte) string {
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestNewRejectsMissingDir(t *testing.T) {
	dir := t.TempDir()
	if _, err := New(filepath.Join(dir, "nope"), Options{}); err == nil {
		t.Error("New of a missing directory succeeded")
	}
	writeFiles(t, dir, map[string][]byte{"f": nil})
	if _, err := New(filepath.Join(dir, "f"), Options{}); err == nil {
		t.Error("New of a regular file succeeded")
	}
}

// BenchmarkReadAt reads random 112 KiB ranges (a typical ImageNet sample) of a 64 MiB shard in
// t.TempDir(), serially and from parallel readers. Steady state allocates nothing per read.
func BenchmarkReadAt(b *testing.B) {
	const size, n = 64 << 20, 112 << 10
	data := make([]byte, size)
	rand.NewChaCha8([32]byte{1}).Read(data)
	dir := writeFiles(b, b.TempDir(), map[string][]byte{layout.ShardName(0): data})
	bk := newBackend(b, dir, func(msg string) { b.Log(msg) })
	sh, err := bk.Open(context.Background(), layout.Shard{Name: layout.ShardName(0), Size: size})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sh.Close() })
	read := func(rng *rand.Rand, p []byte) {
		if err := sh.ReadAt(context.Background(), p, rng.Int64N(size-n)); err != nil {
			b.Error(err)
		}
	}
	b.Run("serial", func(b *testing.B) {
		rng, p := rand.New(rand.NewPCG(2, 2)), make([]byte, n)
		b.SetBytes(n)
		b.ReportAllocs()
		for b.Loop() {
			read(rng, p)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		var seed atomic.Uint64
		b.SetBytes(n)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			rng, p := rand.New(rand.NewPCG(seed.Add(1), 2)), make([]byte, n)
			for pb.Next() {
				read(rng, p)
			}
		})
	})
}
