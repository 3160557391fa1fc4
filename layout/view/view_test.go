package view

import (
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
	nodes, res, err := b.Nodes()
	if err != nil {
		return nil, res, err
	}
	paths := map[layout.ID]string{0: ""}
	out := map[string]string{}
	for _, n := range nodes[1:] {
		p := strings.TrimPrefix(paths[n.Parent]+"/"+n.Name, "/")
		paths[n.ID] = p
		if !n.IsDir() {
			out[p] = string(rune('a'+n.Shard)) + ":" + string(rune('0'+n.Offset))
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
