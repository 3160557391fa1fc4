package hfindex

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/aifs/aifs/integration/hfwrite"
	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/layout/view"
)

func TestSanitizeNames(t *testing.T) {
	in := []string{"tench", "crane", "a/b", "crane", "", "..", "x\x00y", "a_b"}
	want := []string{"tench", "1-crane", "2-a_b", "3-crane", "4-", "5-..", "x_y", "7-a_b"}
	if got := SanitizeNames(in); !slices.Equal(got, want) {
		t.Errorf("SanitizeNames(%q) = %q, want %q", in, got, want)
	}
	many := make([]string, 1000)
	for i := range many {
		many[i] = "c"
	}
	if got := SanitizeNames(many); got[7] != "007-c" || got[999] != "999-c" {
		t.Errorf("SanitizeNames of 1000 repeats: %q, %q", got[7], got[999])
	}
}

// arrowFile writes rows (image bytes, path, label; nil image or label for null) as an Arrow
// IPC stream with the "huggingface" metadata `datasets` writes, class names names.
func arrowFile(t *testing.T, names []string, rows ...hfRow) []byte {
	schema := hfwrite.Schema(names)
	b := array.NewRecordBuilder(memory.NewGoAllocator(), schema)
	defer b.Release()
	img, label := b.Field(0).(*array.StructBuilder), b.Field(1).(*array.Int64Builder)
	for _, r := range rows {
		if r.image == nil {
			img.AppendNull()
		} else {
			img.Append(true)
			img.FieldBuilder(0).(*array.BinaryBuilder).Append([]byte(*r.image))
			img.FieldBuilder(1).(*array.StringBuilder).Append(r.path)
		}
		if r.label == nil {
			label.AppendNull()
		} else {
			label.Append(*r.label)
		}
	}
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
	if err := w.Write(b.NewRecordBatch()); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type hfRow struct {
	image *string
	path  string
	label *int64
}

func row(image, path string, label int64) hfRow {
	r := hfRow{image: &image, path: path, label: &label}
	if label < 0 {
		r.label = nil
	}
	return r
}

type memFile struct{ *bytes.Reader }

func (memFile) Close() error { return nil }

// indexed indexes files (name → bytes) and returns path → bytes of every file of the index.
func indexed(t *testing.T, files map[string][]byte, opt Options) (map[string]string, Result, error) {
	t.Helper()
	var srcs []Source
	for _, name := range slices.Sorted(maps.Keys(files)) {
		b := files[name]
		srcs = append(srcs, Source{Name: name, Label: name, Size: int64(len(b)), MTime: 1e18, Version: "1",
			Open: func(context.Context) (File, error) { return memFile{bytes.NewReader(b)}, nil }})
	}
	b, res, err := IndexHF(context.Background(), srcs, opt)
	if err != nil {
		return nil, res, err
	}
	x, err := layout.Parse(b)
	if err != nil {
		t.Fatalf("the index does not load: %v", err)
	}
	for _, sh := range x.Shards() {
		if want := crc32.Checksum(files[sh.Name], crc32.MakeTable(crc32.Castagnoli)); x.Checksums() && sh.CRC != want || !x.Checksums() && sh.CRC != 0 {
			t.Errorf("shard %s: CRC %08x, want %08x (checksums %v)", sh.Name, sh.CRC, want, x.Checksums())
		}
	}
	out := map[string]string{}
	for id := x.NextFile(layout.Root); int(id) < x.Len(); id = x.NextFile(id) {
		e := x.Entry(id)
		data := files[x.Shards()[e.Shard].Name][e.Offset : e.Offset+e.Size]
		if x.Checksums() && crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)) != e.CRC {
			t.Errorf("%s: CRC32C mismatch", x.Path(id))
		}
		out[x.Path(id)] = string(data)
	}
	return out, res, nil
}

func TestIndexHF(t *testing.T) {
	const jpeg, png = "\xff\xd8\xff\xe0 a JPEG", "\x89PNG\r\n\x1a\n a PNG"
	names := []string{"tench", "crane", "crane", "a/b"}
	files := map[string][]byte{
		"train-00000-of-00002.arrow": arrowFile(t, names, row(jpeg, "/data/x/fish.jpg", 0), row(png, "", 3), hfRow{path: "gone.jpg"},
			row("other", "nolabel.jpg", -1)),
		"train-00001-of-00002.arrow": arrowFile(t, names, row(jpeg+"2", "bird.jpg", 1), row(jpeg+"3", "bird2.jpg", 2)),
	}
	got, res, err := indexed(t, files, Options{})
	want := map[string]string{"train-00000-of-00002/0.jpg": jpeg, "train-00000-of-00002/1.png": png, "train-00000-of-00002/3.bin": "other",
		"train-00001-of-00002/0.jpg": jpeg + "2", "train-00001-of-00002/1.jpg": jpeg + "3"}
	if err != nil || !maps.Equal(got, want) || res.Rows != 6 || res.NoImage != 1 || res.Files != 2 {
		t.Errorf("tree: %q %+v %v, want %q", got, res, err, want)
	}

	got, res, err = indexed(t, files, Options{View: view.ImageFolder, NoChecksums: true})
	want = map[string]string{"0/fish.jpg": jpeg, "3/train-00000-of-00002-1.png": png, "1/bird.jpg": jpeg + "2", "2/bird2.jpg": jpeg + "3"}
	if err != nil || !maps.Equal(got, want) || res.NoImage != 1 || res.NoLabel != 1 || res.Classes != 4 ||
		!slices.Equal(res.FirstMissing, []string{"train-00000-of-00002.arrow: row 2: no image", "train-00000-of-00002.arrow: row 3: no label"}) {
		t.Errorf("imagefolder: %q %+v %v, want %q", got, res, err, want)
	}

	got, _, err = indexed(t, files, Options{View: view.ImageFolder, SchemaClassNames: true})
	want = map[string]string{"tench/fish.jpg": jpeg, "a_b/train-00000-of-00002-1.png": png, "1-crane/bird.jpg": jpeg + "2", "2-crane/bird2.jpg": jpeg + "3"}
	if err != nil || !maps.Equal(got, want) {
		t.Errorf("schema class names: %q %v, want %q", got, err, want)
	}

	files["train-00001-of-00002.arrow"] = arrowFile(t, []string{"other", "names"}, row(jpeg, "x.jpg", 1))
	if _, _, err = indexed(t, files, Options{View: view.ImageFolder, SchemaClassNames: true}); err == nil || !strings.Contains(err.Error(), "differently") {
		t.Errorf("files naming their classes differently: %v", err)
	}
	if _, _, err = indexed(t, files, Options{View: view.Merge}); err == nil || !strings.Contains(err.Error(), "merge") {
		t.Errorf("view.Merge: %v", err)
	}
}

// countingFile counts the bytes read through it.
type countingFile struct {
	memFile
	read *int64
}

func (f countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.memFile.ReadAt(p, off)
	*f.read += int64(n)
	return n, err
}

// TestIndexHFReadsOnce: with checksums, each file is read once: its CRC32C (the shard's
// checksum) comes from the same reads as its images', whether the format is read in order (an
// Arrow stream) or footer first (an Arrow IPC file, Parquet).
func TestIndexHFReadsOnce(t *testing.T) {
	var rows []hfRow
	for i := range 300 {
		rows = append(rows, row("\xff\xd8\xff"+strings.Repeat(string(rune('a'+i%26)), 20000+i), "x.jpg", int64(i%3)))
	}
	stream := arrowFile(t, []string{"a", "b", "c"}, rows...)
	rdr, err := ipc.NewReader(bytes.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	var file, pq bytes.Buffer
	fw, err := ipc.NewFileWriter(&file, ipc.WithSchema(rdr.Schema()))
	if err != nil {
		t.Fatal(err)
	}
	pw, err := pqarrow.NewFileWriter(rdr.Schema(), &pq, parquet.NewWriterProperties(parquet.WithDictionaryDefault(false),
		parquet.WithMaxRowGroupLength(100)), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	for rdr.Next() {
		if err := fw.Write(rdr.RecordBatch()); err != nil {
			t.Fatal(err)
		}
		if err := pw.Write(rdr.RecordBatch()); err != nil {
			t.Fatal(err)
		}
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"stream.arrow": stream, "file.arrow": file.Bytes(), "train.parquet": pq.Bytes()} {
		var read int64
		src := Source{Name: name, Label: name, Size: int64(len(b)), Version: "1",
			Open: func(context.Context) (File, error) { return countingFile{memFile{bytes.NewReader(b)}, &read}, nil }}
		out, res, err := IndexHF(context.Background(), []Source{src}, Options{})
		if err != nil || res.Samples != 300 {
			t.Fatalf("%s: %d samples, %v", name, res.Samples, err)
		}
		x, err := layout.Parse(out)
		if err != nil {
			t.Fatal(err)
		}
		if want := crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)); x.Shards()[0].CRC != want {
			t.Errorf("%s: the shard's CRC %08x, want the file's %08x", name, x.Shards()[0].CRC, want)
		}
		if read > int64(len(b))*11/10 {
			t.Errorf("%s: read %d bytes of a %d-byte file (%.2f×), want it read once", name, read, len(b), float64(read)/float64(len(b)))
		}
	}
}

// TestIndexHFDeterministic: the index is the same bytes whatever the number of files read at
// once, though the files then share readers and row buffers in another order.
func TestIndexHFDeterministic(t *testing.T) {
	var srcs []Source
	for i := range 12 {
		var rows []hfRow
		for j := range 50 + 37*i%90 {
			k := 1000*i + j
			rows = append(rows, row("\xff\xd8\xff"+strings.Repeat("x", k%300), fmt.Sprintf("/data/%06d.jpg", k), int64(k%3)))
		}
		b := arrowFile(t, []string{"a", "b", "c"}, rows...)
		srcs = append(srcs, Source{Name: fmt.Sprintf("train-%05d.arrow", i), Label: "f", Size: int64(len(b)), Version: "1",
			Open: func(context.Context) (File, error) { return memFile{bytes.NewReader(b)}, nil }})
	}
	for _, kind := range []view.Kind{view.Tree, view.ImageFolder} {
		one, _, err := IndexHF(context.Background(), srcs, Options{View: kind, Jobs: 1})
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			many, _, err := IndexHF(context.Background(), srcs, Options{View: kind, Jobs: 5})
			if err != nil || !bytes.Equal(one, many) {
				t.Fatalf("view %v: the index with 5 jobs differs from the one with 1 (%v)", kind, err)
			}
		}
	}
}
