package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// classTree writes n small files in two class directories under a new temporary directory,
// file i holding "sample i" with the changed files' contents prefixed by "X", and returns it.
// (The bench package's own tests read trees of every shape; these test the command.)
func classTree(t *testing.T, n int, changed ...int) string {
	t.Helper()
	root := t.TempDir()
	for i := range n {
		dir := filepath.Join(root, fmt.Sprintf("class-%d", i%2))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		content := fmt.Sprintf("sample %d", i)
		if slices.Contains(changed, i) {
			content = "X" + content
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("img-%03d.JPEG", i)), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestBenchJSON(t *testing.T) {
	a, b := classTree(t, 20), classTree(t, 20)
	var out bytes.Buffer
	if code := benchMain(t.Context(), []string{"--json", "--epochs", "3", "-j", "2", "--limit", "5", a, b}, &out); code != exitOK {
		t.Fatalf("exit status %d:\n%s", code, out.String())
	}
	if n := strings.Count(out.String(), "\n"); n != 1 {
		t.Errorf("--json printed %d lines, want one object on one line", n)
	}
	var rep struct {
		CPUs   int `json:"cpus"`
		Jobs   int `json:"jobs"`
		Limit  int `json:"limit"`
		Passes []map[string]any
		Dirs   []map[string]any
		Errors []string `json:"digest_mismatches"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v in %s", err, out.String())
	}
	if rep.CPUs != runtime.NumCPU() {
		t.Errorf("cpus %d, want %d", rep.CPUs, runtime.NumCPU())
	}
	if rep.Jobs != 2 || rep.Limit != 5 || len(rep.Passes) != 6 || len(rep.Dirs) != 2 || len(rep.Errors) != 0 {
		t.Fatalf("unexpected report %s", out.String())
	}
	for _, p := range rep.Passes {
		for _, k := range []string{"dir", "epoch", "files", "bytes", "seconds", "files_per_s", "mb_per_s", "p50_us", "p99_us", "p999_us", "cpu_us_per_file", "digest"} {
			if _, ok := p[k]; !ok {
				t.Errorf("pass has no %q: %v", k, p)
			}
		}
		if p["files"] != 5.0 {
			t.Errorf("pass read %v files, want --limit 5", p["files"])
		}
		if d, _ := p["digest"].(string); !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(d) {
			t.Errorf("digest %q is not 16 hex digits", d)
		}
	}
	for _, d := range rep.Dirs {
		if _, ok := d["list_seconds"]; !ok || d["files"] != 20.0 {
			t.Errorf("dir report %v lacks list_seconds or has the wrong file count", d)
		}
	}
	// With --limit each epoch reads another 5 files, so epochs differ but dirs agree.
	if rep.Passes[0]["digest"] != rep.Passes[1]["digest"] || rep.Passes[0]["digest"] == rep.Passes[2]["digest"] {
		t.Errorf("digests of epochs 1 and 2: %v %v | %v %v", rep.Passes[0]["digest"], rep.Passes[1]["digest"], rep.Passes[2]["digest"], rep.Passes[3]["digest"])
	}
}

// TestBenchExitStatus: the exit status says what happened: digests differ (1), interrupted (130),
// a bad flag (2).
func TestBenchExitStatus(t *testing.T) {
	a, c := classTree(t, 12), classTree(t, 12, 11)
	if code := benchMain(t.Context(), []string{a, c}, io.Discard); code != exitFailure {
		t.Errorf("exit status %d with differing digests, want %d", code, exitFailure)
	}
	if code := benchMain(t.Context(), []string{a, a}, io.Discard); code != exitOK {
		t.Errorf("exit status %d with the same tree twice, want %d", code, exitOK)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if code := benchMain(ctx, []string{a}, io.Discard); code != exitInterrupt {
		t.Errorf("exit status %d after Ctrl-C, want %d", code, exitInterrupt)
	}
	for _, bad := range []string{"-0.1", "1.5", "NaN"} {
		if code := benchMain(t.Context(), []string{"--keep-fraction", bad, a}, io.Discard); code != exitUsage {
			t.Errorf("--keep-fraction %s: exit status %d, want %d", bad, code, exitUsage)
		}
	}
}
