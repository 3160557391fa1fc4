package plan

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// specConstants reads the constants table of docs/plan.md, the protocol's one specification:
// the value of each row by its name in the Go column (rows without one are left out).
func specConstants(t *testing.T) map[string]string {
	t.Helper()
	doc, err := os.ReadFile("../docs/plan.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "\n## Constants\n")
	if !ok {
		t.Fatal("docs/plan.md has no Constants section")
	}
	table, _, _ = strings.Cut(table, "\n## ")
	rows := map[string]string{}
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 7 || strings.HasPrefix(cells[2], "---") || strings.TrimSpace(cells[1]) == "name" {
			continue
		}
		if name := strings.Trim(strings.TrimSpace(cells[3]), "`"); name != "" {
			rows[name] = strings.Trim(strings.TrimSpace(cells[2]), "`")
		}
	}
	return rows
}

// TestSpec: every constant of the protocol has the value docs/plan.md gives it, and the table
// names no Go constant that this package lacks (python/test_plan_spec.py checks the Python side
// against the same table).
func TestSpec(t *testing.T) {
	strs := map[string]string{
		"ControlDir": ControlDir, "ControlFile": ControlFile, "KernelControlRoot": KernelControlRoot,
		"HeaderPaths": HeaderPaths, "HeaderIndices": HeaderIndices,
	}
	ints := map[string]int64{
		"PieceBytes": PieceBytes, "ArgBytes": ArgBytes, "Ioctl": Ioctl, "FlagStart": FlagStart,
		"MaxLine": MaxLine, "MaxFactor": MaxFactor,
	}
	spec := specConstants(t)
	if len(spec) != len(strs)+len(ints) {
		t.Errorf("docs/plan.md names %d Go constants (%v), the test knows %d", len(spec), spec, len(strs)+len(ints))
	}
	for name, want := range spec {
		if got, ok := strs[name]; ok {
			if got != want {
				t.Errorf("%s = %q, docs/plan.md says %q", name, got, want)
			}
			continue
		}
		got, ok := ints[name]
		if !ok {
			t.Errorf("docs/plan.md names %s, which the test does not know", name)
			continue
		}
		if w, err := strconv.ParseInt(want, 0, 64); err != nil || got != w {
			t.Errorf("%s = %#x (%d), docs/plan.md says %s", name, got, got, want)
		}
	}
}

// TestSendNotAMount: Send to a directory that is not an aifs mount root is ErrNoMount, whether
// .aifs/plan is missing or an ordinary file (ENOTTY).
func TestSendNotAMount(t *testing.T) {
	dir := t.TempDir()
	if err := Send(dir, strings.NewReader(HeaderIndices+"\n")); !errors.Is(err, ErrNoMount) {
		t.Errorf("no .aifs: %v, want ErrNoMount", err)
	}
	if err := os.Mkdir(filepath.Join(dir, ControlDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ControlDir, ControlFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Send(dir, strings.NewReader(HeaderIndices+"\n")); !errors.Is(err, ErrNoMount) {
		t.Errorf(".aifs/plan a plain file: %v, want ErrNoMount", err)
	}
}
