package tarindex

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/layout/view"
)

// tarMem is one member of a tar written by makeTar: a file with data, a directory (name ending
// in "/"), a hard link (link set, type tar.TypeLink) or a symlink (type tar.TypeSymlink).
type tarMem struct {
	name, data, link string
	typ              byte
}

func makeTar(t testing.TB, members ...tarMem) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	for _, m := range members {
		h := &tar.Header{Name: m.name, Mode: 0o644, Size: int64(len(m.data)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		switch {
		case m.typ != 0:
			h.Typeflag, h.Linkname, h.Size = m.typ, m.link, 0
		case strings.HasSuffix(m.name, "/"):
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		}
		if err := w.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			w.Write([]byte(m.data))
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// memTar is a Source over bytes.
func memTar(name string, b []byte) Source {
	return Source{Name: name, Label: name, Size: int64(len(b)), MTime: 1e18, Version: "7",
		Open: func(context.Context) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }}
}

// indexed indexes srcs and returns the loaded index, failing the test on an error.
func indexed(t *testing.T, srcs []Source, opt Options) (*layout.Index, Result) {
	t.Helper()
	b, res, err := IndexTars(context.Background(), srcs, opt)
	if err != nil {
		t.Fatal(err)
	}
	x, err := layout.Parse(b)
	if err != nil {
		t.Fatalf("the index IndexTars wrote does not load: %v", err)
	}
	return x, res
}

// contents returns every file of x as path → its bytes read from the tars (by shard name).
func contents(t *testing.T, x *layout.Index, tars map[string][]byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	for id := x.NextFile(layout.Root); int(id) < x.Len(); id = x.NextFile(id) {
		e := x.Entry(id)
		s := x.Shards()[e.Shard]
		data := tars[s.Name][e.Offset : e.Offset+e.Size]
		if x.Checksums() && layout.Checksum(data) != e.CRC {
			t.Errorf("%s: checksum %08x, index says %08x", x.Path(id), layout.Checksum(data), e.CRC)
		}
		out[x.Path(id)] = string(data)
	}
	return out
}

func TestIndexTarsTreeViews(t *testing.T) {
	a := makeTar(t,
		tarMem{name: "./d/"},
		tarMem{name: "./d/x.jpg", data: "xx"},
		tarMem{name: "/abs/y", data: "yyy"},
		tarMem{name: "d/empty", data: ""},
		tarMem{name: "d/link", link: "d/x.jpg", typ: tar.TypeLink},
		tarMem{name: "d/sym", link: "x.jpg", typ: tar.TypeSymlink},
		tarMem{name: "d/x.jpg", data: "second"}, // a later member of one path wins
	)
	b := makeTar(t, tarMem{name: "d/x.jpg", data: "from b"}, tarMem{name: "implied/dir/z", data: "z"})
	tars := map[string][]byte{"../t/a.tar": a, "/abs/b.tar": b}
	srcs := []Source{memTar("../t/a.tar", a), memTar("/abs/b.tar", b)}
	var warnings []string
	opt := Options{Warn: func(m string) { warnings = append(warnings, m) }}

	x, res := indexed(t, srcs, opt)
	want := map[string]string{
		"a/d/x.jpg": "second", "a/abs/y": "yyy", "a/d/empty": "", "a/d/link": "xx",
		"b/d/x.jpg": "from b", "b/implied/dir/z": "z",
	}
	if got := contents(t, x, tars); !equalMaps(got, want) {
		t.Errorf("tree view: %v, want %v", got, want)
	}
	if res.Files != 6 || res.Links != 1 || res.Skipped != 1 || res.Replaced != 1 || res.Members != 9 || res.Tars != 2 {
		t.Errorf("result %+v", res)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], `symlink (to "x.jpg") "d/sym"`) {
		t.Errorf("warnings %q, want one naming the symlink", warnings)
	}
	for i, s := range x.Shards() {
		if s.Kind != layout.ShardTar || s.Name != srcs[i].Name || s.Size != uint64(srcs[i].Size) || s.Version != "7" || s.CRC != layout.Checksum(tars[s.Name]) {
			t.Errorf("shard %d: %+v", i, s)
		}
	}
	if id, err := x.LookupPath("a/d"); err != nil || x.Entry(id).Mode != layout.ModeDir|0o755 {
		t.Errorf("a/d: the directory member's mode is not kept")
	}

	opt.View = view.Merge
	x, res = indexed(t, srcs, opt)
	want = map[string]string{"d/x.jpg": "from b", "abs/y": "yyy", "d/empty": "", "d/link": "xx", "implied/dir/z": "z"}
	if got := contents(t, x, tars); !equalMaps(got, want) || res.Replaced != 2 {
		t.Errorf("merged view: %v (%d replaced), want %v (2 replaced)", got, res.Replaced, want)
	}

	// The same input gives the same bytes.
	one, _, _ := IndexTars(context.Background(), srcs, opt)
	opt.Jobs = 1
	two, _, _ := IndexTars(context.Background(), srcs, opt)
	if !bytes.Equal(one, two) {
		t.Error("two runs over the same tars wrote different indexes")
	}
}

func TestIndexTarsNoChecksums(t *testing.T) {
	a := makeTar(t, tarMem{name: "f", data: strings.Repeat("x", 3<<20)}, tarMem{name: "g", data: "g"})
	x, _ := indexed(t, []Source{memTar("a.tar", a)}, Options{NoChecksums: true})
	if x.Checksums() || x.Shards()[0].CRC != 0 {
		t.Error("an index without checksums says it has them")
	}
	if got := contents(t, x, map[string][]byte{"a.tar": a}); got["a/g"] != "g" || len(got["a/f"]) != 3<<20 {
		t.Errorf("extents without checksums are wrong")
	}
	if _, err := layout.Verify(context.Background(), "", x, layout.VerifyOptions{}, func(layout.Problem) {}); !errors.Is(err, layout.ErrNoChecksums) {
		t.Errorf("Verify of a set without checksums = %v, want layout.ErrNoChecksums", err)
	}
}

func TestIndexTarsRefuses(t *testing.T) {
	good := makeTar(t, tarMem{name: "f", data: "data"})
	gz := append([]byte{0x1f, 0x8b, 8, 0}, make([]byte, 600)...)
	for _, c := range []struct {
		name string
		srcs []Source
		want string
	}{
		{"dot-dot", []Source{memTar("a.tar", makeTar(t, tarMem{name: "../etc/passwd", data: "x"}))}, `".." component`},
		{"long component", []Source{memTar("a.tar", makeTar(t, tarMem{name: strings.Repeat("n", 256), data: "x"}))}, "longer than 255"},
		{"file and directory", []Source{memTar("a.tar", makeTar(t, tarMem{name: "p", data: "x"}, tarMem{name: "p/q", data: "y"}))}, "both a file and a directory"},
		{"directory and file", []Source{memTar("a.tar", makeTar(t, tarMem{name: "p/q", data: "x"}, tarMem{name: "p", data: "y"}))}, "both a directory and a file"},
		{"same directory name", []Source{memTar("x/a.tar", good), memTar("y/a.tar", good)}, "would both be the directory"},
		{"truncated", []Source{memTar("a.tar", good[:700])}, "truncated"},
		{"compressed", []Source{memTar("a.tar", gz)}, "gzip"},
		{"size changed", []Source{func() Source { s := memTar("a.tar", good); s.Size++; return s }()}, "changed while it was indexed"},
		{"no tars", nil, "no tars"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := IndexTars(context.Background(), c.srcs, Options{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("IndexTars = %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func TestIndexTarsImageFolder(t *testing.T) {
	a := makeTar(t,
		tarMem{name: "s1.jpg", data: "img:s1"}, tarMem{name: "s1.cls", data: "3"},
		tarMem{name: "s2.PNG", data: "img:s2"}, tarMem{name: "s2.json", data: `{"y": 10}`}, tarMem{name: "s2.cls", data: "10"},
		// "c.jpg" is not "jpg": the webp member is the image; the label's blanks are trimmed.
		tarMem{name: "dir/s3.c.jpg", data: "c"}, tarMem{name: "dir/s3.webp", data: "img:s3"}, tarMem{name: "dir/s3.cls", data: " 0\n"},
		tarMem{name: "nolabel.jpg", data: "x"},
		tarMem{name: "noimage.txt", data: "x"}, tarMem{name: "noimage.cls", data: "1"},
		tarMem{name: "__meta__", data: "not a sample"},
	)
	b := makeTar(t,
		tarMem{name: "s4.jpeg", data: "img:s4 jpeg"}, tarMem{name: "s4.jpg", data: "img:s4"}, tarMem{name: "s4.cls", data: "3"},
		tarMem{name: "s1.jpg", data: "dup"}, tarMem{name: "s1.cls", data: "3"}, // the same key again: the last wins
		tarMem{name: "nodot", data: "x"},
	)
	tars := map[string][]byte{"a.tar": a, "b.tar": b}
	srcs := []Source{memTar("a.tar", a), memTar("b.tar", b)}
	var warnings []string
	opt := Options{View: view.ImageFolder, Warn: func(m string) { warnings = append(warnings, m) }}

	x, res := indexed(t, srcs, opt)
	want := map[string]string{"03/s1.jpg": "dup", "10/s2.PNG": "img:s2", "00/dir/s3.webp": "img:s3", "03/s4.jpg": "img:s4"}
	if got := contents(t, x, tars); !equalMaps(got, want) {
		t.Errorf("image-folder view: %v, want %v", got, want)
	}
	if res.Samples != 5 || res.Replaced != 1 || res.Classes != 3 || res.NoLabel != 1 || res.NoImage != 1 || res.NoKey != 1 {
		t.Errorf("result %+v", res)
	}
	if !slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, `"nolabel" has no label`) }) {
		t.Errorf("warnings %q name no sample without a label", warnings)
	}

	opt.Labels = LabelOptions{JSONKey: "y", ClassNames: append(make([]string, 10), "ten"), ImageExts: []string{"png"}}
	x, res = indexed(t, srcs, opt)
	if got := contents(t, x, tars); !equalMaps(got, map[string]string{"ten/s2.PNG": "img:s2"}) || res.NoImage != 6 {
		t.Errorf("json labels and class names: %v (%+v)", got, res)
	}

	opt.Labels = LabelOptions{ByKey: map[string]string{"s1": "cat", "s4": "dog", "dir/s3": "bad/name"}}
	x, res = indexed(t, srcs, opt)
	if got := contents(t, x, tars); !equalMaps(got, map[string]string{"cat/s1.jpg": "dup", "dog/s4.jpg": "img:s4"}) || res.NoLabel != 3 {
		t.Errorf("labels by key: %v (%+v)", got, res)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// BenchmarkIndexTars indexes 100 tars of 1,280 members of 1 KB each, in memory, with
// checksums: the cost of parsing and building the tree, without I/O.
func BenchmarkIndexTars(b *testing.B) {
	var srcs []Source
	var total int64
	for i := range 100 {
		var m []tarMem
		for j := range 1280 {
			m = append(m, tarMem{name: fmt.Sprintf("k%07d.jpg", i*1280+j), data: strings.Repeat("x", 1024)})
		}
		t := makeTar(b, m...)
		srcs = append(srcs, memTar(fmt.Sprintf("t%04d.tar", i), t))
		total += int64(len(t))
	}
	b.SetBytes(total)
	b.ResetTimer()
	for range b.N {
		if _, _, err := IndexTars(context.Background(), srcs, Options{View: view.Merge}); err != nil {
			b.Fatal(err)
		}
	}
}
