package hfarrow

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The files these tests read are written by the Apache Arrow Go library, with the schema and
// "huggingface" metadata `datasets` writes.

// hfRow is a row as written: nil image for a null image struct, nullBytes for a struct whose
// bytes are null.
type hfRow struct {
	image     []byte
	nullBytes bool
	path      *string
	label     *int64
	caption   string
}

var classNames = []string{"tench", "goldfish", "crane", "crane", "a/b"}

const hfMeta = `{"info": {"features": {"caption": {"dtype": "string", "_type": "Value"}, "tags": {"feature": {"dtype": "int32", "_type": "Value"}, "_type": "Sequence"},
 "image": {"decode": true, "id": null, "_type": "Image"}, "label": {"names": ["tench", "goldfish", "crane", "crane", "a/b"], "id": null, "_type": "ClassLabel"}}}}`

func testRows(n int, seed uint64) []hfRow {
	r := rand.New(rand.NewPCG(seed, 9))
	rows := make([]hfRow, n)
	for i := range rows {
		img := make([]byte, r.IntN(3000))
		for j := range img {
			img[j] = byte(r.Uint32())
		}
		row := hfRow{image: img, caption: strings.Repeat("c", r.IntN(20))}
		switch i % 11 {
		case 3:
			row.image = nil
		case 5:
			row.nullBytes = true
		}
		if i%7 != 2 {
			p := fmt.Sprintf("dir%d/img_%d.jpg", i%3, i)
			if i%4 == 0 {
				p = path.Base(p)
			}
			row.path = &p
		}
		if i%13 != 6 {
			l := int64(r.IntN(len(classNames)))
			row.label = &l
		}
		rows[i] = row
	}
	return rows
}

// hfSchema is the schema of the test files: columns before and after the image, a dictionary
// column and a list, so that the buffers of several kinds come before the image's.
func hfSchema(large bool) *arrow.Schema {
	bin := arrow.DataType(arrow.BinaryTypes.Binary)
	if large {
		bin = arrow.BinaryTypes.LargeBinary
	}
	return arrow.NewSchema([]arrow.Field{
		{Name: "caption", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "tags", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
		{Name: "split", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}, Nullable: true},
		{Name: "image", Type: arrow.StructOf(
			arrow.Field{Name: "bytes", Type: bin, Nullable: true},
			arrow.Field{Name: "path", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true},
		{Name: "label", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, func() *arrow.Metadata { m := arrow.NewMetadata([]string{"huggingface"}, []string{hfMeta}); return &m }())
}

// hfRecords builds record batches of rows, batch rows at a time.
func hfRecords(t testing.TB, schema *arrow.Schema, rows []hfRow, batch int) []arrow.RecordBatch {
	mem := memory.NewGoAllocator()
	var recs []arrow.RecordBatch
	for lo := 0; lo < len(rows); lo += batch {
		b := array.NewRecordBuilder(mem, schema)
		for i, row := range rows[lo:min(lo+batch, len(rows))] {
			b.Field(0).(*array.StringBuilder).Append(row.caption)
			tags := b.Field(1).(*array.ListBuilder)
			tags.Append(true)
			for k := range i % 3 {
				tags.ValueBuilder().(*array.Int32Builder).Append(int32(k))
			}
			if err := b.Field(2).(*array.BinaryDictionaryBuilder).AppendString([]string{"train", "test"}[i%2]); err != nil {
				t.Fatal(err)
			}
			img := b.Field(3).(*array.StructBuilder)
			if row.image == nil {
				img.AppendNull()
			} else {
				img.Append(true)
				switch bb := img.FieldBuilder(0).(type) {
				case *array.BinaryBuilder:
					if row.nullBytes {
						bb.AppendNull()
					} else {
						bb.Append(row.image)
					}
				}
				pb := img.FieldBuilder(1).(*array.StringBuilder)
				if row.path == nil {
					pb.AppendNull()
				} else {
					pb.Append(*row.path)
				}
			}
			if row.label == nil {
				b.Field(4).(*array.Int64Builder).AppendNull()
			} else {
				b.Field(4).(*array.Int64Builder).Append(*row.label)
			}
		}
		recs = append(recs, b.NewRecordBatch())
		b.Release()
	}
	return recs
}

func writeArrow(t testing.TB, file bool, schema *arrow.Schema, recs []arrow.RecordBatch, opts ...ipc.Option) []byte {
	var buf bytes.Buffer
	opts = append(opts, ipc.WithSchema(schema))
	var w recordWriter
	if file {
		fw, err := ipc.NewFileWriter(&buf, opts...)
		if err != nil {
			t.Fatal(err)
		}
		w = fw
	} else {
		w = ipc.NewWriter(&buf, opts...)
	}
	writeAll(t, w, recs)
	return buf.Bytes()
}

// recordWriter is what Arrow's IPC writers and pqarrow's file writer have in common.
type recordWriter interface {
	Write(arrow.RecordBatch) error
	Close() error
}

func writeAll(t testing.TB, w recordWriter, recs []arrow.RecordBatch) {
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// legacyStream rewrites an encapsulated stream in the format before Arrow 0.15: each message's
// length without the 0xFFFFFFFF continuation marker before it.
func legacyStream(t *testing.T, b []byte) []byte {
	var out []byte
	for pos := 0; pos+8 <= len(b); {
		if binary.LittleEndian.Uint32(b[pos:]) != 0xFFFFFFFF {
			t.Fatalf("no continuation marker at %d", pos)
		}
		n := int(binary.LittleEndian.Uint32(b[pos+4:]))
		if n == 0 {
			return append(out, 0, 0, 0, 0)
		}
		meta := b[pos+8 : pos+8+n]
		// The body length is the Message table's field 3; find it by reading the message with
		// arrow-go's own flatbuffers instead of ours.
		msg, err := ipc.NewMessageReader(bytes.NewReader(b[pos:])).Message()
		if err != nil {
			t.Fatal(err)
		}
		body := int(msg.BodyLen())
		out = binary.LittleEndian.AppendUint32(out, uint32(n))
		out = append(out, meta...)
		out = append(out, b[pos+8+n:pos+8+n+body]...)
		pos += 8 + n + body
	}
	t.Fatal("no end-of-stream marker")
	return nil
}

type bytesAt []byte

func (b bytesAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > int64(len(b)) {
		return 0, io.EOF
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func scanFile(t *testing.T, file []byte, opt Options) (*Scanner, []Row, error) {
	t.Helper()
	s, err := NewScanner(bytesAt(file), int64(len(file)), "test.arrow", opt)
	if err != nil {
		return nil, nil, err
	}
	var got []Row
	for {
		row, err := s.Next()
		if err == io.EOF {
			return s, got, nil
		}
		if err != nil {
			return s, got, err
		}
		row.Path = bytes.Clone(row.Path) // valid until the next Next
		got = append(got, row)
	}
}

// checkRows checks that rows are want, their images exactly the bytes written.
func checkRows(t *testing.T, file []byte, got []Row, want []hfRow, checksums bool) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
	for i, row := range got {
		w := want[i]
		hasImage := w.image != nil && !w.nullBytes
		if row.Index != int64(i) || row.HasImage != hasImage || row.HasLabel != (w.label != nil) {
			t.Fatalf("row %d: %+v, want %+v", i, row, w)
		}
		if hasImage {
			if row.ImageOff < 0 || row.ImageOff+row.ImageSize > int64(len(file)) || !bytes.Equal(file[row.ImageOff:row.ImageOff+row.ImageSize], w.image) {
				t.Fatalf("row %d: image [%d,+%d) is not the bytes written", i, row.ImageOff, row.ImageSize)
			}
			wantPath := ""
			if w.path != nil {
				wantPath = path.Base(*w.path)
			}
			if string(row.Path) != wantPath {
				t.Fatalf("row %d: path %q, want %q", i, row.Path, wantPath)
			}
			if crc := crc32.Checksum(w.image, castagnoli); checksums && row.ImageCRC != crc || !checksums && row.ImageCRC != 0 {
				t.Fatalf("row %d (checksums %v): ImageCRC %08x, image's %08x", i, checksums, row.ImageCRC, crc)
			}
			var head [12]byte
			copy(head[:], w.image)
			if row.HasHead && row.ImageHead != head || checksums && !row.HasHead {
				t.Fatalf("row %d (checksums %v): head %x (%v), want %x", i, checksums, row.ImageHead, row.HasHead, head)
			}
		}
		if w.label != nil && row.Label != *w.label {
			t.Fatalf("row %d: label %d, want %d", i, row.Label, *w.label)
		}
	}
}

func checkSummary(t *testing.T, sum Summary, rows []hfRow) {
	t.Helper()
	var want Summary
	for i, r := range rows {
		want.Rows++
		if r.image == nil || r.nullBytes {
			want.NullImage++
			want.NullImageFirst = append(want.NullImageFirst, int64(i))
		}
		if r.label == nil {
			want.NullLabel++
			want.NullLabelFirst = append(want.NullLabelFirst, int64(i))
		}
	}
	if fmt.Sprint(sum) != fmt.Sprint(want) {
		t.Fatalf("summary %+v, want %+v", sum, want)
	}
}

func TestArrow(t *testing.T) {
	rows := testRows(90, 1)
	schema := hfSchema(false)
	recs := hfRecords(t, schema, rows, 7)
	stream := writeArrow(t, false, schema, recs)
	files := map[string][]byte{
		"stream": stream,
		"file":   writeArrow(t, true, schema, recs),
		"legacy": legacyStream(t, stream),
		"one":    writeArrow(t, false, schema, hfRecords(t, schema, rows, len(rows))),
	}
	for name, file := range files {
		for _, checksums := range []bool{false, true} {
			s, got, err := scanFile(t, file, Options{Checksums: checksums})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			checkRows(t, file, got, rows, checksums)
			checkSummary(t, s.Summary(), rows)
			sc := s.Schema()
			wantFormat := map[string]Format{"file": ArrowFile}[name]
			if sc.Format != wantFormat || sc.ImageColumn != "image" || sc.LabelColumn != "label" || fmt.Sprint(sc.ClassNames) != fmt.Sprint(classNames) {
				t.Fatalf("%s: schema %+v", name, sc)
			}
		}
	}
}

func TestArrowColumns(t *testing.T) {
	rows := testRows(20, 2)
	schema := hfSchema(false)
	file := writeArrow(t, false, schema, hfRecords(t, schema, rows, 6))
	// No metadata: the image column must be named; the label column then is absent unless named.
	bare := arrow.NewSchema(schema.Fields(), nil)
	noMeta := writeArrow(t, false, bare, hfRecords(t, bare, rows, 6))
	if _, _, err := scanFile(t, noMeta, Options{}); err == nil || !strings.Contains(err.Error(), "ImageColumn") {
		t.Errorf("no metadata, no ImageColumn: %v", err)
	}
	s, got, err := scanFile(t, noMeta, Options{ImageColumn: "image"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Schema().LabelColumn != "" || s.Summary().NullLabel != 0 || got[0].HasLabel {
		t.Errorf("no label column: schema %+v, summary %+v, row 0 %+v", s.Schema(), s.Summary(), got[0])
	}
	s, got, err = scanFile(t, noMeta, Options{ImageColumn: "image", LabelColumn: "label"})
	if err != nil {
		t.Fatal(err)
	}
	checkRows(t, noMeta, got, rows, false)
	if s.Schema().ClassNames != nil {
		t.Errorf("class names %q without metadata", s.Schema().ClassNames)
	}
	for _, tc := range []struct {
		opt  Options
		want string
	}{
		{Options{ImageColumn: "caption"}, `column "caption" is string, not an Image`},
		{Options{ImageColumn: "split"}, `column "split" is dictionary-encoded`},
		{Options{ImageColumn: "nope"}, `no column "nope"`},
		{Options{LabelColumn: "caption"}, `column "caption" is string, not an integer`},
		{Options{LabelColumn: "image"}, `both the image and the label`},
	} {
		if _, _, err := scanFile(t, file, tc.opt); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.opt, err, tc.want)
		}
	}
}

// TestArrowRefused: compressed bodies are refused, truncated files are errors.
func TestArrowRefused(t *testing.T) {
	rows := testRows(30, 3)
	schema := hfSchema(false)
	recs := hfRecords(t, schema, rows, 10)
	for name, opt := range map[string]ipc.Option{"lz4": ipc.WithLZ4(), "zstd": ipc.WithZstd()} {
		for _, asFile := range []bool{false, true} {
			file := writeArrow(t, asFile, schema, recs, opt)
			_, _, err := scanFile(t, file, Options{})
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "test.arrow") {
				t.Errorf("%s (file %v): %v, want ErrRefused naming the file", name, asFile, err)
			}
		}
	}
	stream := writeArrow(t, false, schema, recs)
	for _, cut := range []int{0, 3, 100, len(stream) / 2, len(stream) - 9} {
		s, got, err := scanFile(t, stream[:cut], Options{})
		if err == nil && cut != len(stream)-9 {
			t.Errorf("cut at %d: %d rows, no error", cut, len(got))
		}
		_ = s
	}
	file := writeArrow(t, true, schema, recs)
	if _, _, err := scanFile(t, file[:len(file)-1], Options{}); err == nil {
		t.Error("a truncated Arrow file: no error")
	}
}

// TestArrowViews: an image struct whose bytes are a binary_view is refused by name, and view
// columns before the image shift its buffers by their variadic counts.
func TestArrowViews(t *testing.T) {
	rows := testRows(10, 10)
	for i := range rows {
		rows[i].nullBytes = false
	}
	mem := memory.NewGoAllocator()
	viewImage := arrow.NewSchema([]arrow.Field{{Name: "image", Type: arrow.StructOf(
		arrow.Field{Name: "bytes", Type: arrow.BinaryTypes.BinaryView, Nullable: true},
		arrow.Field{Name: "path", Type: arrow.BinaryTypes.String, Nullable: true})}}, nil)
	b := array.NewRecordBuilder(mem, viewImage)
	b.Field(0).(*array.StructBuilder).AppendNull()
	file := writeArrow(t, false, viewImage, []arrow.RecordBatch{b.NewRecordBatch()})
	if _, _, err := scanFile(t, file, Options{ImageColumn: "image"}); err == nil || !strings.Contains(err.Error(), "struct{bytes: binary_view, path: string}") {
		t.Errorf("binary_view image: %v", err)
	}
	fields := append([]arrow.Field{{Name: "note", Type: arrow.BinaryTypes.StringView, Nullable: true}}, hfSchema(false).Fields()...)
	meta := hfSchema(false).Metadata()
	withView := arrow.NewSchema(fields, &meta)
	var recs []arrow.RecordBatch
	for _, rec := range hfRecords(t, hfSchema(false), rows, 4) {
		sb := array.NewStringViewBuilder(mem)
		for i := range rec.NumRows() {
			sb.Append(strings.Repeat("a long note past the inline limit ", int(i%3))) // 0 to 2 data buffers' worth
		}
		recs = append(recs, array.NewRecordBatch(withView, append([]arrow.Array{sb.NewArray()}, rec.Columns()...), rec.NumRows()))
	}
	file = writeArrow(t, false, withView, recs)
	_, got, err := scanFile(t, file, Options{Checksums: true})
	if err != nil {
		t.Fatal(err)
	}
	checkRows(t, file, got, rows, true)
}

func TestArrowLargeBinary(t *testing.T) {
	rows := testRows(25, 4)
	for i := range rows {
		rows[i].nullBytes = false
	}
	schema := hfSchema(true)
	// The builder of a large binary is a BinaryBuilder too.
	file := writeArrow(t, false, schema, hfRecords(t, schema, rows, 8))
	_, got, err := scanFile(t, file, Options{Checksums: true})
	if err != nil {
		t.Fatal(err)
	}
	checkRows(t, file, got, rows, true)
}

// BenchmarkArrow scans an Arrow stream file of 20,000 rows in batches of 100 (as datasets
// writes image sets), with and without checksums; ns/op is per file, rows/s is reported.
func BenchmarkArrow(b *testing.B) {
	rows := testRows(20000, 8)
	schema := hfSchema(false)
	path := filepath.Join(b.TempDir(), "data-00000-of-00001.arrow")
	if err := os.WriteFile(path, writeArrow(b, false, schema, hfRecords(b, schema, rows, 100)), 0o644); err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	for _, checksums := range []bool{false, true} {
		b.Run(map[bool]string{false: "scan", true: "scan+checksums"}[checksums], func(b *testing.B) {
			for b.Loop() {
				s, err := NewScanner(f, fi.Size(), path, Options{Checksums: checksums})
				if err != nil {
					b.Fatal(err)
				}
				for {
					if _, err := s.Next(); err != nil {
						break
					}
				}
			}
			b.ReportMetric(float64(len(rows)*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
