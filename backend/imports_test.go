package backend

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports keeps the contract and the local and memory backends free of dependencies
// (DESIGN.md): they import layout, backend and the standard library only.
func TestImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".", "./local", "./memory").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		switch dep {
		case "github.com/aifs/aifs/layout", "github.com/aifs/aifs/backend", "github.com/aifs/aifs/backend/local", "github.com/aifs/aifs/backend/memory":
		default:
			t.Errorf("backend, backend/local or backend/memory depends on %s", dep)
		}
	}
}
