package hfindex

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/aifs/aifs/integration/hfwrite"
)

// BenchmarkIndexHF indexes 10 files of 12,800 rows of images of 512 to 1535 bytes (1 KiB on
// average), in record batches or row groups of 100 rows, as integration/bench/formats.sh writes
// them: Arrow IPC streams and uncompressed PLAIN Parquet, in memory, with checksums and without.
// The cost of reading the rows and building the tree, without I/O.
func BenchmarkIndexHF(b *testing.B) {
	for _, format := range []string{"arrow", "parquet"} {
		var srcs []Source
		var total int64
		for i := range 10 {
			f := hfBenchFile(b, format, i, 12800)
			srcs = append(srcs, Source{Name: fmt.Sprintf("train-%05d.%s", i, format), Label: "f", Size: int64(len(f)), Version: "1",
				Open: func(context.Context) (File, error) { return memFile{bytes.NewReader(f)}, nil }})
			total += int64(len(f))
		}
		for _, noSums := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/no-checksums=%v", format, noSums), func(b *testing.B) {
				b.SetBytes(total)
				for range b.N {
					if _, _, err := IndexHF(context.Background(), srcs, Options{NoChecksums: noSums}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// hfBenchFile writes file i of the benchmark's set, rows rows, as format (arrow or parquet).
func hfBenchFile(b *testing.B, format string, i, rows int) []byte {
	schema := hfwrite.Schema([]string{"a", "b", "c"})
	rb := array.NewRecordBuilder(memory.NewGoAllocator(), schema)
	defer rb.Release()
	var buf bytes.Buffer
	var write func(arrow.RecordBatch) error
	var closeFile func() error
	if format == "arrow" {
		w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
		write, closeFile = w.Write, w.Close
	} else {
		props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Uncompressed),
			parquet.WithDictionaryDefault(false), parquet.WithMaxRowGroupLength(100))
		w, err := pqarrow.NewFileWriter(schema, &buf, props, pqarrow.DefaultWriterProps())
		if err != nil {
			b.Fatal(err)
		}
		write, closeFile = w.Write, w.Close
	}
	img := rb.Field(0).(*array.StructBuilder)
	for j := range rows {
		k := i*rows + j
		img.Append(true)
		img.FieldBuilder(0).(*array.BinaryBuilder).Append([]byte("\xff\xd8\xff" + strings.Repeat("x", 509+k*7919%1024)))
		img.FieldBuilder(1).(*array.StringBuilder).Append(fmt.Sprintf("%09d.jpg", k))
		rb.Field(1).(*array.Int64Builder).Append(int64(k % 3))
		if img.Len() == 100 || j == rows-1 {
			rec := rb.NewRecordBatch()
			err := write(rec)
			rec.Release()
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := closeFile(); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}
