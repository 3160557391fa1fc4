package tfrecordindex

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// BenchmarkIndexTFRecords indexes 10 files of 12,800 ImageNet-script records of images of 512
// to 1535 bytes (1 KiB on average, as integration/bench/formats.sh writes them), in memory, with
// checksums and without: the cost of reading the records and building the tree, without I/O.
func BenchmarkIndexTFRecords(b *testing.B) {
	var srcs []Source
	var total int64
	for i := range 10 {
		var recs [][]byte
		for j := range 12800 {
			k := i*12800 + j
			recs = append(recs, imagenet("\xff\xd8\xff"+strings.Repeat("x", 509+k*7919%1024), fmt.Sprintf("n%08d", k%1000), fmt.Sprintf("%09d.JPEG", k), int64(k%1000+1)))
		}
		f := file(recs...)
		srcs = append(srcs, memSource(fmt.Sprintf("train-%05d.tfrecord", i), f))
		total += int64(len(f))
	}
	for _, noSums := range []bool{false, true} {
		b.Run(fmt.Sprintf("no-checksums=%v", noSums), func(b *testing.B) {
			b.SetBytes(total)
			for range b.N {
				if _, _, err := IndexTFRecords(context.Background(), srcs, Options{NoChecksums: noSums}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
