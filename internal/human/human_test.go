package human

import "testing"

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 999: "999 B", 1000: "1.0 kB", 314572800: "314.6 MB", 3e15: "3000.0 TB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestName(t *testing.T) {
	for s, want := range map[string]string{"a/b.jpg": "a/b.jpg", "a\nb": `"a\nb"`, "\xff": `"\xff"`, `"q"`: `"\"q\""`, "é": "é"} {
		if got := Name(s); got != want {
			t.Errorf("Name(%q) = %q, want %q", s, got, want)
		}
	}
}
