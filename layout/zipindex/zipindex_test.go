package zipindex

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/layout/view"
	lzip "github.com/aifs/aifs/layout/zip"
)

type zmem struct {
	name, data string
	method     uint16
}

func writeZip(t testing.TB, members ...zmem) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, m := range members {
		fw, err := w.CreateHeader(&zip.FileHeader{Name: m.name, Method: m.method, Modified: time.Unix(1700000000, 0)})
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(fw, m.data)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type memFile struct{ *bytes.Reader }

func (memFile) Close() error { return nil }

func memZip(name string, b []byte) Source {
	return Source{Name: name, Label: name, Size: int64(len(b)), MTime: 1e18, Version: "7",
		Open: func(context.Context) (File, error) { return memFile{bytes.NewReader(b)}, nil }}
}

// indexed indexes srcs and returns path → bytes of every file (read from the ZIPs by shard
// name, each checked against the index's CRC-32), and the result.
func indexed(t *testing.T, zips map[string][]byte, srcs []Source, opt Options) (map[string]string, *layout.Index, Result) {
	t.Helper()
	b, res, err := IndexZips(context.Background(), srcs, opt)
	if err != nil {
		t.Fatal(err)
	}
	x, err := layout.Parse(b)
	if err != nil {
		t.Fatalf("the index IndexZips wrote does not load: %v", err)
	}
	out := map[string]string{}
	for id := x.NextFile(layout.Root); int(id) < x.Len(); id = x.NextFile(id) {
		e := x.Entry(id)
		s := x.Shards()[e.Shard]
		data := zips[s.Name][e.Offset : e.Offset+e.Size]
		if x.Checksums() && crc32.ChecksumIEEE(data) != e.CRC {
			t.Errorf("%s: CRC-32 %08x, index says %08x", x.Path(id), crc32.ChecksumIEEE(data), e.CRC)
		}
		out[x.Path(id)] = string(data)
	}
	return out, x, res
}

func TestIndexZips(t *testing.T) {
	a := writeZip(t, zmem{"cat/1.jpg", "cat one", zip.Store}, zmem{"dog/", "", zip.Store}, zmem{"dog/2.JPG", "dog two", zip.Store},
		zmem{"dog/packed.jpg", strings.Repeat("p", 500), zip.Deflate}, zmem{"cat/notes.txt", "not an image", zip.Store},
		zmem{"/top.jpg", "at the top", zip.Store}, zmem{"./cat/1.jpg", "cat one again", zip.Store})
	b := writeZip(t, zmem{"cat/3.jpg", "cat three", zip.Store})
	zips := map[string][]byte{"../z/a.zip": a, "b.zip": b}
	srcs := []Source{memZip("../z/a.zip", a), memZip("b.zip", b)}
	var warnings []string
	opt := Options{Warn: func(m string) { warnings = append(warnings, m) }}

	got, x, res := indexed(t, zips, srcs, opt)
	want := map[string]string{"a/cat/1.jpg": "cat one again", "a/dog/2.JPG": "dog two", "a/cat/notes.txt": "not an image",
		"a/top.jpg": "at the top", "b/cat/3.jpg": "cat three"}
	if !maps.Equal(got, want) {
		t.Errorf("tree view: %v, want %v", got, want)
	}
	if res.Refused != 1 || res.Replaced != 1 || res.Members != 8 || res.Zips != 2 || len(res.FirstRefused) != 1 ||
		!strings.Contains(res.FirstRefused[0], "dog/packed.jpg (deflated)") {
		t.Errorf("result %+v", res)
	}
	if !slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, "dog/packed.jpg (deflated)") }) {
		t.Errorf("warnings %q do not name the deflated member", warnings)
	}
	for i, s := range x.Shards() {
		if s.Kind != layout.ShardTar || s.Checksum != layout.CRC32IEEE || s.CRC != 0 || s.Name != srcs[i].Name || s.Version != "7" {
			t.Errorf("shard %d: %+v", i, s)
		}
	}

	opt.View = view.ImageFolder
	got, _, res = indexed(t, zips, srcs, opt)
	want = map[string]string{"cat/1.jpg": "cat one again", "dog/2.JPG": "dog two", "cat/3.jpg": "cat three"}
	if !maps.Equal(got, want) || res.Classes != 2 || res.Samples != 4 || res.NoImage != 1 || res.NoLabel != 1 || res.Replaced != 1 {
		t.Errorf("image folder: %v %+v, want %v", got, res, want)
	}

	// A flat ZIP, classes from a labels file by key.
	flat := writeZip(t, zmem{"img1.jpg", "one", zip.Store}, zmem{"img2.jpg", "two", zip.Store}, zmem{"img3.jpg", "three", zip.Store})
	opt.ByKey = map[string]string{"img1": "3", "img2": "12"}
	got, _, res = indexed(t, map[string][]byte{"f.zip": flat}, []Source{memZip("f.zip", flat)}, opt)
	if want := map[string]string{"03/img1.jpg": "one", "12/img2.jpg": "two"}; !maps.Equal(got, want) || res.NoLabel != 1 {
		t.Errorf("labels by key: %v %+v, want %v", got, res, want)
	}

	// Without checksums: flagged, CRCs zero. The same input gives the same bytes.
	_, x, _ = indexed(t, zips, srcs, Options{NoChecksums: true})
	if x.Checksums() {
		t.Error("an index without checksums says it has them")
	}
	one, _, _ := IndexZips(context.Background(), srcs, Options{})
	two, _, _ := IndexZips(context.Background(), srcs, Options{Jobs: 1})
	if !bytes.Equal(one, two) {
		t.Error("two runs over the same ZIPs wrote different indexes")
	}
}

func TestIndexZipsRefuses(t *testing.T) {
	good := writeZip(t, zmem{"f", "data", zip.Store})
	for _, c := range []struct {
		name string
		srcs []Source
		want string
	}{
		{"dot-dot", []Source{memZip("a.zip", writeZip(t, zmem{"../etc/passwd", "x", zip.Store}))}, `".." component`},
		{"file and directory", []Source{memZip("a.zip", writeZip(t, zmem{"p", "x", zip.Store}, zmem{"p/q", "y", zip.Store}))}, "both a file and a directory"},
		{"same directory name", []Source{memZip("x/a.zip", good), memZip("y/a.zip", good)}, "would both be the directory"},
		{"not a zip", []Source{memZip("a.zip", []byte("plain text, no end record"))}, lzip.ErrNotZip.Error()},
		{"truncated", []Source{memZip("a.zip", good[:len(good)-30])}, "a.zip"},
		{"no zips", nil, "no ZIP files"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := IndexZips(context.Background(), c.srcs, Options{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("IndexZips = %v, want an error containing %q", err, c.want)
			}
		})
	}
	boom := errors.New("boom")
	src := memZip("a.zip", good)
	src.Open = func(context.Context) (File, error) { return nil, boom }
	if _, _, err := IndexZips(context.Background(), []Source{src}, Options{}); !errors.Is(err, boom) {
		t.Errorf("an open error: %v", err)
	}
}

// TestIndexZipsFirstError: when one ZIP fails while an earlier one is still being opened, the
// index fails with that ZIP's error, not with the cancellation it caused in the earlier one.
func TestIndexZipsFirstError(t *testing.T) {
	broken := errors.New("the disk is on fire")
	slow := memZip("a.zip", writeZip(t, zmem{"x.jpg", "x", zip.Store}))
	slow.Open = func(ctx context.Context) (File, error) {
		<-ctx.Done() // opened until the other ZIP's error cancels it
		return nil, ctx.Err()
	}
	bad := memZip("b.zip", nil)
	bad.Open = func(context.Context) (File, error) { return nil, broken }
	_, _, err := IndexZips(context.Background(), []Source{slow, bad}, Options{Jobs: 2})
	if !errors.Is(err, broken) {
		t.Fatalf("IndexZips: %v; want b.zip's error", err)
	}
}
