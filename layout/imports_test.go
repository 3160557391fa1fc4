package layout

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportsOnlyStandardLibrary keeps layout at the bottom of the import graph (docs/design.md):
// everything else may import it, and it imports nothing outside the standard library.
func TestImportsOnlyStandardLibrary(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep != "github.com/aifs/aifs/layout" {
			t.Errorf("layout depends on %s; it may import only the standard library", dep)
		}
	}
}
