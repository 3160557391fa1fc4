package main

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/aifs/aifs/layout"
)

// TestClassNamesSorted checks that class names ascend up to maxDirs, as the index requires of a
// directory's children.
func TestClassNamesSorted(t *testing.T) {
	for c := 1; c < maxDirs; c++ {
		if a, b := className(c-1), className(c); a >= b || len(b) != 9 {
			t.Fatalf("className(%d) = %q, className(%d) = %q: not ascending 9-byte names", c-1, a, c, b)
		}
	}
}

func TestZeroExtend(t *testing.T) {
	head := []byte("some bytes before the zeros")
	for _, n := range []uint64{0, 1, 7, 8, 255, 4096, 1<<20 + 3} {
		want := layout.Checksum(append(append([]byte(nil), head...), make([]byte, n)...))
		if got := zeroExtend(layout.Checksum(head), n); got != want {
			t.Errorf("zeroExtend(crc, %d) = %08x, want %08x", n, got, want)
		}
	}
}

// TestGenerate writes a small set and checks it as aifs would: the index loads and passes every
// check, aifs verify's checks find no problem (every sample's and shard's checksum, the zeros
// included), and each real sample's bytes are its pattern with the checksum real.txt gives.
func TestGenerate(t *testing.T) {
	dir := t.TempDir()
	c := config{samples: 1003, dirs: 7, real: 10, size: 104, shardSize: 1000}
	out, err := generate(dir, c)
	if err != nil {
		t.Fatal(err)
	}
	x, err := layout.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if err := x.CheckAll(); err != nil {
		t.Fatal(err)
	}
	if x.Files() != c.samples || x.Len() != out["entries"].(int) || x.Len() != 1+c.dirs+c.samples {
		t.Fatalf("%d files, %d entries; want %d and %d", x.Files(), x.Len(), c.samples, 1+c.dirs+c.samples)
	}
	var problems []string
	if _, err := layout.Verify(context.Background(), dir, x, layout.VerifyOptions{}, func(p layout.Problem) {
		problems = append(problems, p.Path+" "+p.Shard+": "+p.Reason)
	}); err != nil || len(problems) > 0 {
		t.Fatalf("verify: %v %v", err, problems)
	}
	f, err := os.Open(filepath.Join(dir, "real.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines := 0
	for sc := bufio.NewScanner(f); sc.Scan(); lines++ {
		path, sum, _ := strings.Cut(sc.Text(), "\t")
		id, err := x.LookupPath(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		e := x.Entry(id)
		crc, _ := strconv.ParseUint(sum, 16, 32)
		b := make([]byte, e.Size)
		sh, _ := os.ReadFile(filepath.Join(dir, x.Shards()[e.Shard].Name))
		copy(b, sh[e.Offset:])
		if uint32(crc) != e.CRC || layout.Checksum(b) != e.CRC || layout.Checksum(b) == layout.Checksum(make([]byte, e.Size)) {
			t.Errorf("%s: checksum %08x, index %08x, real.txt %s: want the same, and not zeros'", path, layout.Checksum(b), e.CRC, sum)
		}
	}
	if lines != c.real {
		t.Errorf("real.txt lists %d samples, want %d", lines, c.real)
	}
}
