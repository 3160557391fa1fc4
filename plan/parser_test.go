package plan

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/layout/pack"
)

// testIndex packs a.txt, d/b.txt and d/c.txt (pack order) and loads the index.
func testIndex(t *testing.T) *layout.Index {
	t.Helper()
	src := t.TempDir()
	for _, rel := range []string{"a.txt", "d/b.txt", "d/c.txt"} {
		if err := os.MkdirAll(filepath.Join(src, filepath.Dir(rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, rel), []byte(rel), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dst := filepath.Join(t.TempDir(), "set")
	if _, err := pack.Pack(t.Context(), src, dst, pack.Options{ShardSize: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	x, err := layout.Load(dst)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(x.Close)
	return x
}

// parseIn parses plan cut into pieces of n bytes with one Parser.
func parseIn(x *layout.Index, plan string, n int) ([]layout.ID, error) {
	var pp Parser
	var ids []layout.ID
	for len(plan) > 0 {
		piece := plan[:min(n, len(plan))]
		plan = plan[len(piece):]
		var err error
		if ids, err = pp.Parse(x, []byte(piece), ids); err != nil {
			return ids, err
		}
	}
	return ids, nil
}

// TestParser: both headers, lines cut anywhere between pieces, and every refusal of
// docs/plan.md wrapping ErrBad with the samples before the bad line kept.
func TestParser(t *testing.T) {
	x := testIndex(t)
	a, b, c := x.FileAt(0), x.FileAt(1), x.FileAt(2)
	for _, n := range []int{1, 3, 7, 1 << 20} {
		ids, err := parseIn(x, HeaderPaths+"\nd/c.txt\na.txt\nd/b.txt\na.txt\n", n)
		if err != nil || len(ids) != 4 || ids[0] != c || ids[1] != a || ids[2] != b || ids[3] != a {
			t.Errorf("paths in pieces of %d: %v, %v", n, ids, err)
		}
		ids, err = parseIn(x, HeaderIndices+"\n2\n0\n", n)
		if err != nil || len(ids) != 2 || ids[0] != c || ids[1] != a {
			t.Errorf("indices in pieces of %d: %v, %v", n, ids, err)
		}
	}
	if ids, err := parseIn(x, HeaderPaths+"\na.txt\nd/b.txt", 4); err != nil || len(ids) != 1 {
		t.Errorf("an unfinished last line: %v, %v; want a.txt alone, no error", ids, err)
	}
	bad := map[string]string{
		"header":         "aifs-plan 2 paths\na.txt\n",
		"no header":      "a.txt\n",
		"missing path":   HeaderPaths + "\na.txt\nd/x.txt\n",
		"directory":      HeaderPaths + "\na.txt\nd\n",
		"index too big":  HeaderIndices + "\n0\n3\n",
		"not a number":   HeaderIndices + "\n0\n-1\n",
		"long line":      HeaderPaths + "\na.txt\n" + strings.Repeat("a", MaxLine+1) + "\n",
		"long last line": HeaderPaths + "\na.txt\n" + strings.Repeat("a", MaxLine+1),
		"too many":       HeaderIndices + "\n" + strings.Repeat("0\n", MaxFactor*x.Len()+1),
	}
	for name, plan := range bad {
		ids, err := parseIn(x, plan, 5000)
		want := 1
		switch name {
		case "header", "no header":
			want = 0
		case "too many":
			want = MaxFactor * x.Len()
		}
		if !errors.Is(err, ErrBad) || len(ids) != want {
			t.Errorf("%s: %d samples, %v; want %d and ErrBad", name, len(ids), err, want)
		}
	}
}
