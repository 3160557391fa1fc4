package zipindex

import (
	"archive/zip"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aifs/aifs/layout/view"
)

// BenchmarkIndexZips indexes 10 ZIPs of 12,800 stored members of 1 KB each, in memory: the cost
// of reading the central directories and local headers and building the tree, without I/O.
func BenchmarkIndexZips(b *testing.B) {
	var srcs []Source
	var total int64
	for i := range 10 {
		var m []zmem
		for j := range 12800 {
			m = append(m, zmem{fmt.Sprintf("%09d.bin", i*12800+j), strings.Repeat("x", 1024), zip.Store})
		}
		z := writeZip(b, m...)
		srcs = append(srcs, memZip(fmt.Sprintf("z%04d.zip", i), z))
		total += int64(len(z))
	}
	b.SetBytes(total)
	b.ResetTimer()
	for range b.N {
		if _, _, err := IndexZips(context.Background(), srcs, Options{View: view.Merge}); err != nil {
			b.Fatal(err)
		}
	}
}
