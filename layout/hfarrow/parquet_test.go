package hfarrow

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

func writeParquet(t testing.TB, schema *arrow.Schema, recs []arrow.RecordBatch, props ...parquet.WriterProperty) []byte {
	var buf bytes.Buffer
	props = append([]parquet.WriterProperty{parquet.WithMaxRowGroupLength(16), parquet.WithDataPageSize(2048)}, props...)
	w, err := pqarrow.NewFileWriter(schema, &buf, parquet.NewWriterProperties(props...), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, w, recs)
	return buf.Bytes()
}

// inPlace are the writer properties of datasets >= 4.6 for the image bytes: uncompressed,
// PLAIN; the other columns keep the defaults given (snappy, dictionaries).
var inPlace = []parquet.WriterProperty{
	parquet.WithCompression(compress.Codecs.Snappy),
	parquet.WithCompressionFor("image.bytes", compress.Codecs.Uncompressed),
	parquet.WithDictionaryFor("image.bytes", false),
	parquet.WithEncodingFor("image.bytes", parquet.Encodings.Plain),
}

func TestParquet(t *testing.T) {
	rows := testRows(100, 6)
	schema := hfSchema(false)
	recs := hfRecords(t, schema, rows, 30)
	files := map[string][]byte{
		"v1": writeParquet(t, schema, recs, inPlace...),
		"v2": writeParquet(t, schema, recs, append(inPlace, parquet.WithDataPageVersion(parquet.DataPageV2))...),
		"plain": writeParquet(t, schema, recs, parquet.WithCompression(compress.Codecs.Uncompressed), parquet.WithDictionaryDefault(false),
			parquet.WithStats(false)),
		"large": writeParquet(t, hfSchema(true), hfRecords(t, hfSchema(true), rows, 30), inPlace...),
	}
	for name, file := range files {
		for _, checksums := range []bool{false, true} {
			s, got, err := scanFile(t, file, Options{Checksums: checksums})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			checkRows(t, file, got, rows, checksums)
			checkSummary(t, s.Summary(), rows)
			if sc := s.Schema(); sc.Format != Parquet || sc.ImageColumn != "image" || sc.LabelColumn != "label" || len(sc.ClassNames) != len(classNames) {
				t.Fatalf("%s: schema %+v", name, sc)
			}
		}
	}
}

// TestParquetRefused: image bytes compressed or dictionary-encoded are refused with the hint.
func TestParquetRefused(t *testing.T) {
	rows := testRows(40, 7)
	schema := hfSchema(false)
	recs := hfRecords(t, schema, rows, 40)
	for name, props := range map[string][]parquet.WriterProperty{
		"snappy":     {parquet.WithCompression(compress.Codecs.Snappy)},
		"zstd":       {parquet.WithCompression(compress.Codecs.Zstd), parquet.WithDictionaryDefault(false)},
		"dictionary": {parquet.WithCompression(compress.Codecs.Uncompressed), parquet.WithDictionaryFor("image.bytes", true)},
		"delta": {parquet.WithCompression(compress.Codecs.Uncompressed), parquet.WithDictionaryDefault(false),
			parquet.WithEncodingFor("image.bytes", parquet.Encodings.DeltaLengthByteArray)},
	} {
		file := writeParquet(t, schema, recs, props...)
		_, got, err := scanFile(t, file, Options{})
		if name == "snappy" || name == "zstd" {
			_, err = NewScanner(bytesAt(file), int64(len(file)), "test.arrow", Options{}) // refused from the footer
		}
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "datasets >= 4.6") || len(got) != 0 {
			t.Errorf("%s: %d rows, %v; want ErrRefused with the hint", name, len(got), err)
		}
		t.Logf("%s: %v", name, err)
	}
	file := writeParquet(t, schema, recs, inPlace...)
	for _, cut := range []int{4, 100, len(file) - 1} {
		if _, _, err := scanFile(t, file[:cut], Options{}); err == nil {
			t.Errorf("cut at %d: no error", cut)
		}
	}
}
