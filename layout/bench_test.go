package layout

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// imagenetIndex encodes an index shaped like ImageNet-1k train: 1,000 class directories of
// 1,280 files each, with ImageNet-style names, 110 KB per sample, 1 GiB shards.
func imagenetIndex(encode func([]*node, []Shard, bool) []byte) (buf []byte, samples int, nameBytes int) {
	root := &node{mode: modeDir | 0o755}
	for c := range 1000 {
		class := &node{name: fmt.Sprintf("n%08d", 1440764+c*1000), mode: modeDir | 0o755}
		root.children = append(root.children, class)
		for i := range 1280 {
			class.children = append(class.children, &node{
				name: fmt.Sprintf("%s_%d.JPEG", class.name, 10000+i*7), mode: modeRegular | 0o644, size: 112640})
		}
	}
	nodes := number(root)
	var files []*node
	for _, n := range nodes {
		nameBytes += len(n.name)
		if !n.isDir() {
			files = append(files, n)
		}
	}
	return encode(nodes, assignShards(files, 1<<30), false), len(files), nameBytes
}

// BenchmarkIndexLoad loads a 1.28 M-sample index from a file (in the page cache), in the version
// aifs writes (3: the header and small sections only) and in version 1 (read and checked whole,
// lookup table built), and reports its size per sample, names excluded.
// Run: go test ./layout -run '^$' -bench Index -benchtime 10x
func BenchmarkIndexLoad(b *testing.B) {
	realBlocks(b)
	for _, f := range formats {
		b.Run(f.name, func(b *testing.B) {
			buf, samples, nameBytes := imagenetIndex(f.encode)
			dir := b.TempDir()
			if err := os.WriteFile(filepath.Join(dir, IndexName), buf, 0o644); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				x, err := Load(dir)
				if err != nil {
					b.Fatal(err)
				}
				x.Close()
			}
			b.ReportMetric(float64(len(buf)-nameBytes)/float64(samples), "index-B/sample-excl-names")
			b.ReportMetric(float64(len(buf))/1e6, "index-MB")
		})
	}
}

// BenchmarkIndexLookup does one Lookup(class dir, file name) per op over random samples of a
// 1.28 M-sample index, as the kernel's LOOKUP does; 1e9/(ns/op) is lookups per second per core.
// For version 3 the first pass over the queries also reads and checks the blocks they touch.
func BenchmarkIndexLookup(b *testing.B) {
	realBlocks(b)
	for _, f := range formats {
		b.Run(f.name, func(b *testing.B) {
			buf, _, _ := imagenetIndex(f.encode)
			x, err := Parse(buf)
			if err != nil {
				b.Fatal(err)
			}
			type query struct {
				dir  ID
				name string
			}
			rng := rand.New(rand.NewPCG(1, 2))
			queries := make([]query, 1<<16)
			for i := range queries {
				id := ID(1001 + rng.IntN(x.Len()-1001))
				queries[i] = query{x.Entry(id).Parent, string(x.Name(id))}
			}
			i := 0
			for b.Loop() {
				q := queries[i&(len(queries)-1)]
				if _, err := x.Lookup(q.dir, q.name); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lookups/s")
		})
	}
}

// BenchmarkLookupPathBytes resolves random "class/file" paths held in bytes, as a plan's lines
// are, over a 1.28 M-sample index; it must report 0 allocs/op.
func BenchmarkLookupPathBytes(b *testing.B) {
	realBlocks(b)
	buf, _, _ := imagenetIndex(encodeIndex)
	x, err := Parse(buf)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	paths := make([][]byte, 1<<16)
	for i := range paths {
		paths[i] = []byte(x.Path(x.FileAt(rng.IntN(x.Files()))))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := x.LookupPathBytes(paths[i&(len(paths)-1)]); err != nil {
			b.Fatal("miss")
		}
		i++
	}
}

// BenchmarkPackMemory packs a tree of 100,000 files of 100 bytes (100 directories, ImageNet-style
// names of about 20 bytes) into a sink that discards the data, and reports the heap pack holds
// per file: live bytes once the last file is written (the walk's state, before the index is
// encoded), less the same for a one-file tree (the fixed buffers), per file; and the index's
// size per file, which Sink.Commit receives whole, so the peak is about the sum of the two.
// Run: go test ./layout -run '^$' -bench PackMemory -benchtime 1x
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
	_, err := PackTo(b.Context(), src, sink, PackOptions{Progress: func(p PackProgress) {
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
