package backend

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports keeps the contract and the local backend free of dependencies (DESIGN.md): they
// import layout, backend and the standard library only.
func TestImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".", "./local").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		switch dep {
		case "github.com/aifs/aifs/layout", "github.com/aifs/aifs/backend", "github.com/aifs/aifs/backend/local":
		default:
			t.Errorf("backend or backend/local depends on %s", dep)
		}
	}
}
