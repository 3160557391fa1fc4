package layout

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestImports keeps layout at the bottom of the import graph (doc.go, docs/design.md): layout
// and its subpackages import the standard library, the module's internal packages of plain
// data structures (internal/bitset), and, downwards only, each other; erofsmeta also imports
// go-erofs, the EROFS format's library.
func TestImports(t *testing.T) {
	const mod = "github.com/aifs/aifs/layout"
	const bitset = "github.com/aifs/aifs/internal/bitset"
	const goerofs = "github.com/erofs/go-erofs"
	allowed := map[string][]string{
		".":               {bitset},
		"./tar":           nil,
		"./tfrecord":      nil,
		"./hfarrow":       nil,
		"./pack":          {mod, bitset},
		"./view":          {mod, bitset},
		"./tarindex":      {mod, mod + "/tar", mod + "/view", bitset},
		"./zip":           nil,
		"./zipindex":      {mod, mod + "/zip", mod + "/view", bitset},
		"./tfrecordindex": {mod, mod + "/tfrecord", mod + "/view", bitset},
		"./hfindex":       {mod, mod + "/hfarrow", mod + "/view", bitset},
		"./erofsmeta":     {mod, bitset, goerofs, goerofs + "/internal/builder", goerofs + "/internal/disk"},
	}
	for dir, may := range allowed {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", dir).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", dir, err)
		}
		deps := strings.Fields(string(out))
		self := deps[len(deps)-1] // go list -deps lists the package itself last
		for _, dep := range deps[:len(deps)-1] {
			if !slices.Contains(may, dep) {
				t.Errorf("%s depends on %s; it may import only the standard library and %q", self, dep, may)
			}
		}
	}
	out, err := exec.Command("go", "list", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if _, ok := allowed["."+strings.TrimPrefix(pkg, mod)]; !ok {
			t.Errorf("%s has no import rule here: add it to allowed (and to doc.go's map)", pkg)
		}
	}
}
