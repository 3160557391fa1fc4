package backend

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports keeps the contract and the local and memory backends free of dependencies
// (docs/design.md): they import layout, backend, the standard library, the module's internal
// packages and, for the Linux system calls that package syscall lacks (statx),
// golang.org/x/sys/unix only.
func TestImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".", "./local", "./memory").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		switch dep {
		case "github.com/aifs/aifs/layout", "github.com/aifs/aifs/backend", "github.com/aifs/aifs/backend/local", "github.com/aifs/aifs/backend/memory",
			"golang.org/x/sys/unix":
		default:
			if strings.HasPrefix(dep, "github.com/aifs/aifs/internal/") {
				continue // internal's packages import the standard library only (TestInternalImports)
			}
			t.Errorf("backend, backend/local or backend/memory depends on %s", dep)
		}
	}
}

// TestSDKsStayInTheirPackages keeps minio-go inside backend/s3 and go-fuse inside fs (docs/design.md):
// no other package of aifs, the disk cache and prefetch included, depends on either.
func TestSDKsStayInTheirPackages(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}",
		"../layout/...", "../internal/...", "../plan", "../prefetch", "../bench", ".", "./local", "./memory", "./diskcache", "./faulty").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/minio/") || strings.HasPrefix(dep, "github.com/hanwen/go-fuse") ||
			dep == "github.com/aifs/aifs/backend/s3" || dep == "github.com/aifs/aifs/fs" {
			t.Errorf("layout, internal, plan, prefetch, bench or a backend other than s3 depends on %s", dep)
		}
	}
	out, err = exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "../fs").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/minio/") {
			t.Errorf("fs depends on %s", dep)
		}
	}
}

// TestInternalImports keeps the module's internal packages at the bottom of the import graph:
// they import the standard library only, so any package may use them.
func TestInternalImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "../internal/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if !strings.HasPrefix(dep, "github.com/aifs/aifs/internal/") {
			t.Errorf("a package of internal depends on %s", dep)
		}
	}
}
