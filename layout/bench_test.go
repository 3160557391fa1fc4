package layout

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// imagenetIndex encodes an index shaped like ImageNet-1k train: 1,000 class directories of
// 1,280 files each, with ImageNet-style names, 110 KB per sample, 1 GiB shards.
func imagenetIndex(encode func([]*Node, []Shard, bool) []byte) (buf []byte, samples int, nameBytes int) {
	root := &Node{Mode: ModeDir | 0o755}
	for c := range 1000 {
		class := &Node{Name: fmt.Sprintf("n%08d", 1440764+c*1000), Mode: ModeDir | 0o755}
		root.Children = append(root.Children, class)
		for i := range 1280 {
			class.Children = append(class.Children, &Node{
				Name: fmt.Sprintf("%s_%d.JPEG", class.Name, 10000+i*7), Mode: ModeRegular | 0o644, Size: 112640})
		}
	}
	nodes := Number(root)
	var files []*Node
	for _, n := range nodes {
		nameBytes += len(n.Name)
		if !n.IsDir() {
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
	buf, _, _ := imagenetIndex(EncodeIndex)
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
