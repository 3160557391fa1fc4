package hfindex

import (
	"slices"
	"testing"
)

func TestSanitizeNames(t *testing.T) {
	in := []string{"tench", "crane", "a/b", "crane", "", "..", "x\x00y", "a_b"}
	want := []string{"tench", "1-crane", "2-a_b", "3-crane", "4-", "5-..", "x_y", "7-a_b"}
	if got := SanitizeNames(in); !slices.Equal(got, want) {
		t.Errorf("SanitizeNames(%q) = %q, want %q", in, got, want)
	}
	many := make([]string, 1000)
	for i := range many {
		many[i] = "c"
	}
	if got := SanitizeNames(many); got[7] != "007-c" || got[999] != "999-c" {
		t.Errorf("SanitizeNames of 1000 repeats: %q, %q", got[7], got[999])
	}
}
