package view

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aifs/aifs/layout"
)

// built builds the view of opt over sources given as records and returns path → "shard:offset"
// of every file, and the result.
func built(t *testing.T, srcs []Source, recs [][]Record, opt Options) (map[string]string, Result, error) {
	t.Helper()
	b := New(srcs, opt)
	for i, r := range recs {
		if err := b.Add(i, r); err != nil {
			return nil, Result{}, err
		}
	}
	shards := make([]layout.Shard, len(srcs))
	for i := range shards {
		shards[i] = layout.Shard{Name: DirName(srcs[i].Label, ".zip") + ".zip", Kind: layout.ShardTar, Size: 100}
	}
	index, res, err := b.Index(shards, true)
	if err != nil {
		return nil, res, err
	}
	x, err := layout.Parse(index)
	if err != nil {
		t.Fatalf("the index does not parse: %v", err)
	}
	out := map[string]string{}
	for id := layout.ID(1); int(id) < x.Len(); id++ {
		if e := x.Entry(id); !e.IsDir() {
			out[x.Path(id)] = string(rune('a'+e.Shard)) + ":" + string(rune('0'+e.Offset))
		}
	}
	return out, res, nil
}

func file(path, label string, off uint64) Record {
	return Record{Path: path, Label: label, Mode: 0o644, Offset: off, Size: 1}
}

func TestViews(t *testing.T) {
	srcs := []Source{{Label: "x/one.zip", Dir: DirName("x/one.zip", ".zip"), MTime: 5}, {Label: "two.zip", Dir: DirName("two.zip", ".zip"), MTime: 9}}
	recs := [][]Record{
		{file("cat/1.jpg", "cat", 0), file("dog/2.jpg", "dog", 1), file("cat/1.jpg", "cat", 2), {Path: "d", Dir: true, Mode: 0o700}},
		{file("cat/1.jpg", "cat", 3), file("flat.jpg", "", 4), file("bird/3.jpg", "bad/name", 5)},
	}
	got, res, err := built(t, srcs, recs, Options{})
	want := map[string]string{"one/cat/1.jpg": "a:2", "one/dog/2.jpg": "a:1", "two/cat/1.jpg": "b:3", "two/flat.jpg": "b:4", "two/bird/3.jpg": "b:5"}
	if err != nil || !maps.Equal(got, want) || res.Replaced != 1 || res.Files != 5 || res.Dirs != 7 {
		t.Errorf("tree: %v %+v %v, want %v", got, res, err, want)
	}
	got, res, _ = built(t, srcs, recs, Options{Kind: Merge})
	want = map[string]string{"cat/1.jpg": "b:3", "dog/2.jpg": "a:1", "flat.jpg": "b:4", "bird/3.jpg": "b:5"}
	if !maps.Equal(got, want) || res.Replaced != 2 {
		t.Errorf("merge: %v %+v, want %v", got, res, want)
	}
	var warnings []string
	got, res, _ = built(t, srcs, recs, Options{Kind: ImageFolder, Warn: func(m string) { warnings = append(warnings, m) }})
	want = map[string]string{"cat/cat/1.jpg": "b:3", "dog/dog/2.jpg": "a:1"}
	if !maps.Equal(got, want) || res.Replaced != 2 || res.Samples != 4 || res.Classes != 2 || res.NoClass != 2 || len(warnings) != 2 {
		t.Errorf("image folder: %v %+v %q, want %v", got, res, warnings, want)
	}
	if !slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, `two.zip: sample "flat.jpg" has no label`) }) {
		t.Errorf("warnings %q do not name the file without a label", warnings)
	}

	// Numeric labels are zero-padded to one width; ClassNames name them instead.
	num := [][]Record{{file("a.jpg", "7", 0), file("b.jpg", "12", 1), file("c.jpg", "007", 2)}}
	got, _, _ = built(t, srcs[:1], num, Options{Kind: ImageFolder})
	if want := map[string]string{"07/a.jpg": "a:0", "12/b.jpg": "a:1", "07/c.jpg": "a:2"}; !maps.Equal(got, want) {
		t.Errorf("numeric labels: %v, want %v", got, want)
	}
	got, _, _ = built(t, srcs[:1], num, Options{Kind: ImageFolder, NamedClasses: true})
	if want := map[string]string{"7/a.jpg": "a:0", "12/b.jpg": "a:1", "007/c.jpg": "a:2"}; !maps.Equal(got, want) {
		t.Errorf("named classes: %v, want %v", got, want)
	}
	got, res, _ = built(t, srcs[:1], num, Options{Kind: ImageFolder, ClassNames: []string{0: "zero", 7: "seven", 11: "eleven"}})
	if want := map[string]string{"seven/a.jpg": "a:0", "seven/c.jpg": "a:2"}; !maps.Equal(got, want) || res.NoClass != 1 {
		t.Errorf("class names: %v %+v, want %v", got, res, want)
	}
	if _, _, err := built(t, srcs[:1], num, Options{Kind: ImageFolder, ClassNames: make([]string, 8)}); err == nil || !strings.Contains(err.Error(), "cannot name a directory") {
		t.Errorf("an empty class name: %v", err)
	}
}

func TestRefusals(t *testing.T) {
	srcs := []Source{{Label: "a/s.zip", Dir: "s"}, {Label: "b/s.zip", Dir: "s"}}
	if _, _, err := built(t, srcs, [][]Record{nil, nil}, Options{}); err == nil || !strings.Contains(err.Error(), `a/s.zip and b/s.zip would both be the directory "s"`) {
		t.Errorf("two sources, one directory: %v", err)
	}
	for _, recs := range [][]Record{
		{file("p", "", 0), file("p/q", "", 1)},
		{file("p/q", "", 0), file("p", "", 1)},
	} {
		if _, _, err := built(t, srcs[:1], [][]Record{recs}, Options{Kind: Merge}); err == nil || !strings.Contains(err.Error(), `"p" is both`) {
			t.Errorf("%v: a file and a directory at one path: %v", recs, err)
		}
	}
}

func TestDirName(t *testing.T) {
	for name, want := range map[string]string{"a/b/c.zip": "c", ".zip": ".zip", "x.tar": "x.tar", "/abs/d.zip": "d"} {
		if got := DirName(name, ".zip"); got != want {
			t.Errorf("DirName(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestTreeEncodedAsAdded holds the Tree view's index, encoded a source at a time as sources are
// added, to the same tree encoded whole (layout.EncodeIndex): the same bytes, with sources
// added out of their directories' name order, empty ones, paths taken twice, a source's top
// directory given its own mode, and extents out of order.
func TestTreeEncodedAsAdded(t *testing.T) {
	names := []string{"m.zip", "b.zip", "z.zip", "a.zip", "c-1.zip", "c.zip", "empty.zip"}
	srcs := make([]Source, len(names))
	shards := make([]layout.Shard, len(names))
	recs := make([][]Record, len(names))
	for i, n := range names {
		srcs[i] = Source{Label: "dir/" + n, Dir: DirName(n, ".zip"), MTime: int64(100 + i)}
		shards[i] = layout.Shard{Name: n, Kind: layout.ShardTar, Size: 1 << 20, CRC: uint32(i)}
		if n == "empty.zip" {
			continue
		}
		for k := range 40 {
			path := fmt.Sprintf("d%d/f%02d.jpg", k%2, k%15) // 30 paths, 10 twice: the last wins
			recs[i] = append(recs[i], Record{Path: path, Mode: 0o644, MTime: int64(k), Offset: uint64(1000 * (40 - k)), Size: 10, CRC: uint32(k)})
		}
		recs[i] = append(recs[i], Record{Path: "", Dir: true, Mode: 0o700, MTime: 7}, Record{Path: "d9", Dir: true, Mode: 0o750, MTime: 8})
	}
	for _, noCRC := range []bool{false, true} {
		encode := func(whole bool) []byte {
			b := New(srcs, Options{})
			if whole {
				b.tw = nil
			} else if b.tw == nil {
				t.Fatal("the Tree view of sources with distinct directories is not encoded as they are added")
			}
			for i := range srcs {
				if err := b.Add(i, recs[i]); err != nil {
					t.Fatal(err)
				}
			}
			index, res, err := b.Index(shards, noCRC)
			if err != nil {
				t.Fatal(err)
			}
			if res.Files != 6*30 || res.Replaced != 6*10 || res.Dirs != 7+6*3 {
				t.Errorf("whole %v: %+v", whole, res)
			}
			return index
		}
		got, want := encode(false), encode(true)
		if !bytes.Equal(got, want) {
			t.Errorf("no checksums %v: the index encoded as sources are added (%d bytes) differs from the whole tree's (%d)", noCRC, len(got), len(want))
		}
		if _, err := layout.Parse(got); err != nil {
			t.Error(err)
		}
	}
}
