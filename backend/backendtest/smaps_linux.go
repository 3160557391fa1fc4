package backendtest

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
)

// VMFlags returns the VmFlags of the mapping in /proc/self/smaps that contains address a ("hg":
// advised for transparent huge pages), failing t if none does.
func VMFlags(t testing.TB, a uintptr) string {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		var start, end uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x ", &start, &end); n == 2 {
			in = start <= a && a < end
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return strings.TrimSpace(strings.TrimPrefix(line, "VmFlags:"))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Fatalf("no mapping in /proc/self/smaps holds %#x", a)
	return ""
}
