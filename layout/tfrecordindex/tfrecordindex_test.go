package tfrecordindex

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"strings"
	"testing"

	"github.com/aifs/aifs/internal/tfwrite"
	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/layout/tfrecord"
	"github.com/aifs/aifs/layout/view"
)

var (
	jpeg = "\xff\xd8\xff\xe0 a JPEG"
	png  = "\x89PNG\r\n\x1a\n a PNG"
)

// imagenet is an ImageNet-script record; label 0 leaves the label out, "" the others.
func imagenet(image, synset, filename string, label int64) []byte {
	var e [][]byte
	if image != "" {
		e = append(e, tfwrite.Bytes("image/encoded", []byte(image)))
	}
	if label > 0 {
		e = append(e, tfwrite.Int("image/class/label", label))
	}
	if synset != "" {
		e = append(e, tfwrite.Bytes("image/class/synset", []byte(synset)))
	}
	if filename != "" {
		e = append(e, tfwrite.Bytes("image/filename", []byte(filename)))
	}
	return tfwrite.Example(e...)
}

func file(records ...[]byte) []byte {
	var f []byte
	for _, r := range records {
		f = tfwrite.AppendRecord(f, r)
	}
	return f
}

func memSource(name string, b []byte) Source {
	return Source{Name: name, Label: name, Size: int64(len(b)), MTime: 1e18, Version: "7",
		Open: func(context.Context) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }}
}

// indexed indexes files and returns path → bytes of every file of the index (checked against
// its CRC32C when it has them).
func indexed(t *testing.T, files map[string][]byte, opt Options) (map[string]string, Result) {
	t.Helper()
	var srcs []Source
	for _, name := range []string{"a.tfrecord", "b.tfrecord"} {
		srcs = append(srcs, memSource(name, files[name]))
	}
	b, res, err := IndexTFRecords(context.Background(), srcs, opt)
	if err != nil {
		t.Fatal(err)
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
		if x.Checksums() != !opt.NoChecksums {
			t.Errorf("index checksums %v, NoChecksums %v", x.Checksums(), opt.NoChecksums)
		}
		if x.Checksums() && crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)) != e.CRC {
			t.Errorf("%s: CRC32C mismatch", x.Path(id))
		}
		out[x.Path(id)] = string(data)
	}
	return out, res
}

func TestIndexTFRecords(t *testing.T) {
	files := map[string][]byte{
		"a.tfrecord": file(imagenet(jpeg, "n02", "/x/n02_1.JPEG", 2), imagenet(png, "n01", "", 1), imagenet("", "n01", "gone.JPEG", 1),
			imagenet("other bytes", "", "nolabel.JPEG", 0)),
		"b.tfrecord": file(imagenet(jpeg+"2", "n01", "n01_9.JPEG", 1), imagenet(jpeg+"3", "", "n03_1.JPEG", 3)),
	}
	got, res := indexed(t, files, Options{})
	want := map[string]string{"a/0.jpg": jpeg, "a/1.png": png, "a/3.bin": "other bytes", "b/0.jpg": jpeg + "2", "b/1.jpg": jpeg + "3"}
	if !maps.Equal(got, want) || res.Records != 6 || res.NoImage != 1 || res.Files != 2 {
		t.Errorf("tree: %q %+v, want %q", got, res, want)
	}

	got, res = indexed(t, files, Options{View: view.ImageFolder, NoChecksums: true})
	want = map[string]string{"n02/n02_1.JPEG": jpeg, "n01/a-1.png": png, "n01/n01_9.JPEG": jpeg + "2", "3/n03_1.JPEG": jpeg + "3"}
	if !maps.Equal(got, want) || res.NoImage != 1 || res.NoLabel != 1 || res.Classes != 3 || len(res.FirstMissing) != 2 ||
		res.FirstMissing[0] != "a.tfrecord: record 2: no image" || res.FirstMissing[1] != "a.tfrecord: record 3: no label" {
		t.Errorf("imagefolder: %q %+v, want %q", got, res, want)
	}

	// Labels alone: 1-based labels as stored, zero-padded; ClassNames names them instead.
	files["a.tfrecord"] = file(imagenet(jpeg, "", "a.JPEG", 1), imagenet(jpeg, "", "b.JPEG", 10))
	files["b.tfrecord"] = file(imagenet(jpeg, "", "c.JPEG", 2))
	got, _ = indexed(t, files, Options{View: view.ImageFolder})
	want = map[string]string{"01/a.JPEG": jpeg, "10/b.JPEG": jpeg, "02/c.JPEG": jpeg}
	if !maps.Equal(got, want) {
		t.Errorf("labels: %q, want %q", got, want)
	}
	names := make([]string, 11)
	for i := range names {
		names[i] = "class" + string(rune('a'+i))
	}
	got, _ = indexed(t, files, Options{View: view.ImageFolder, ClassNames: names})
	want = map[string]string{"classb/a.JPEG": jpeg, "classk/b.JPEG": jpeg, "classc/c.JPEG": jpeg}
	if !maps.Equal(got, want) {
		t.Errorf("class names: %q, want %q", got, want)
	}
}

func TestIndexTFRecordsRefused(t *testing.T) {
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write(file(imagenet(jpeg, "n01", "a.JPEG", 1)))
	w.Close()
	_, _, err := IndexTFRecords(context.Background(), []Source{memSource("z.tfrecord", gz.Bytes())}, Options{})
	if !errors.Is(err, tfrecord.ErrCompressed) || !strings.Contains(err.Error(), "z.tfrecord") {
		t.Errorf("a GZIP file: %v", err)
	}
	_, _, err = IndexTFRecords(context.Background(), []Source{memSource("a.tfrecord", file())}, Options{View: view.Merge})
	if err == nil || !strings.Contains(err.Error(), "merge") {
		t.Errorf("view.Merge: %v", err)
	}
	f := file(imagenet(jpeg, "n01", "a.JPEG", 1))
	s := memSource("short.tfrecord", f)
	s.Size++
	if _, _, err = IndexTFRecords(context.Background(), []Source{s}, Options{}); err == nil || !strings.Contains(err.Error(), "changed") {
		t.Errorf("a file shorter than listed: %v", err)
	}
}

// TestIndexTFRecordsDeterministic: the index is the same bytes whatever the number of files
// read at once, though the files then share readers and row buffers in another order.
func TestIndexTFRecordsDeterministic(t *testing.T) {
	var srcs []Source
	for i := range 12 {
		var recs [][]byte
		for j := range 50 + 37*i%90 {
			k := 1000*i + j
			recs = append(recs, imagenet(jpeg+strings.Repeat("x", k%300), fmt.Sprintf("n%08d", k%7), fmt.Sprintf("d/%06d.JPEG", k), int64(k%7+1)))
		}
		srcs = append(srcs, memSource(fmt.Sprintf("train-%05d.tfrecord", i), file(recs...)))
	}
	for _, kind := range []view.Kind{view.Tree, view.ImageFolder} {
		one, _, err := IndexTFRecords(context.Background(), srcs, Options{View: kind, Jobs: 1})
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			many, _, err := IndexTFRecords(context.Background(), srcs, Options{View: kind, Jobs: 5})
			if err != nil || !bytes.Equal(one, many) {
				t.Fatalf("view %v: the index with 5 jobs differs from the one with 1 (%v)", kind, err)
			}
		}
	}
}
