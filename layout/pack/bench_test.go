package pack

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// BenchmarkPackMemory packs a tree of 100,000 files of 100 bytes (100 directories, ImageNet-style
// names of about 20 bytes) into a sink that discards the data, and reports the heap pack holds
// per file: live bytes once the last file is written (the walk's state, before the index is
// encoded), less the same for a one-file tree (the fixed buffers), per file; and the index's
// size per file, which Sink.Commit receives whole, so the peak is about the sum of the two.
// Run: go test ./layout/pack -run '^$' -bench PackMemory -benchtime 1x
func BenchmarkPackMemory(b *testing.B) {
	const dirs, perDir = 100, 1000
	one, src := b.TempDir(), b.TempDir()
	smallFilesTree(b, one, 1, 1)
	nameBytes := smallFilesTree(b, src, dirs, perDir)
	var fixed, full packHeap
	for b.Loop() {
		fixed, full = packHeapOf(b, one), packHeapOf(b, src)
	}
	files := float64(dirs * perDir)
	b.ReportMetric(float64(full.live-fixed.live)/(files-1), "heap-B/file")
	b.ReportMetric(float64(full.index)/files, "index-B/file")
	b.ReportMetric(float64(nameBytes)/files, "name-B/file")
}

// smallFilesTree creates dirs directories of perDir 100-byte files under root and returns the
// bytes of the names it created.
func smallFilesTree(b *testing.B, root string, dirs, perDir int) (nameBytes int) {
	content := make([]byte, 100)
	for d := range dirs {
		class := fmt.Sprintf("n%08d", 1440764+d*1000)
		if err := os.Mkdir(filepath.Join(root, class), 0o755); err != nil {
			b.Fatal(err)
		}
		nameBytes += len(class)
		for i := range perDir {
			name := fmt.Sprintf("%s_%d.JPEG", class, 10000+i*7)
			if err := os.WriteFile(filepath.Join(root, class, name), content, 0o644); err != nil {
				b.Fatal(err)
			}
			nameBytes += len(name)
		}
	}
	return nameBytes
}

type packHeap struct {
	live  int64 // live heap bytes when the last file has been written, above the start's
	index int   // bytes of the index committed
}

// packHeapOf packs src into a discarding sink and measures its heap.
func packHeapOf(b *testing.B, src string) packHeap {
	var h packHeap
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := int64(ms.HeapAlloc)
	sink := &discardSink{}
	_, err := PackTo(b.Context(), src, sink, Options{Progress: func(p Progress) {
		if p.Files == p.TotalFiles {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			h.live = int64(ms.HeapAlloc) - base
		}
	}})
	if err != nil {
		b.Fatal(err)
	}
	h.index = sink.index
	return h
}

// discardSink is a Sink that keeps nothing but the index's size.
type discardSink struct {
	shards, index int
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

func (s *discardSink) CreateShard(context.Context, string, int64) (io.WriteCloser, error) {
	s.shards++
	return nopCloser{io.Discard}, nil
}

func (s *discardSink) Finish(context.Context) ([]string, error) { return make([]string, s.shards), nil }

func (s *discardSink) Commit(_ context.Context, index []byte) error {
	s.index = len(index)
	return nil
}

func (s *discardSink) Abort() {}
