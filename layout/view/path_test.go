package view

import (
	"strings"
	"testing"
)

func TestCleanPath(t *testing.T) {
	for name, want := range map[string]string{
		"a/b.jpg": "a/b.jpg", "./a//b/": "a/b", "/abs/./x": "abs/x", "./": "", "a/../b": "error", "..": "error",
		"a/\x00b": "error", strings.Repeat("n", 255): strings.Repeat("n", 255), "d/" + strings.Repeat("n", 256): "error",
	} {
		got, err := CleanPath(name)
		if (err == nil && got == name) != isClean(name) {
			t.Errorf("isClean(%q) = %v, but CleanPath gives %q, %v", name, isClean(name), got, err)
		}
		if err != nil {
			got = "error"
		}
		if got != want {
			t.Errorf("CleanPath(%q) = %q (%v), want %q", name, got, err, want)
		}
	}
}

func TestSplitKey(t *testing.T) {
	for p, want := range map[string][2]string{
		"a/b.c.jpg": {"a/b", "c.jpg"}, "k.JPG": {"k", "JPG"}, "x.": {"x", ""}, "d.e/f.cls": {"d.e/f", "cls"},
		".hidden": {"", ""}, "noext": {"", ""}, "dir/.x": {"", ""},
	} {
		key, ext, ok := SplitKey(p)
		if ok != (want[0] != "") || key != want[0] || ext != want[1] {
			t.Errorf("SplitKey(%q) = %q, %q, %v; want %q, %q", p, key, ext, ok, want[0], want[1])
		}
	}
}
