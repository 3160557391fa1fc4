package main

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestExpandBraces(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"plain.tar", []string{"plain.tar"}},
		{"t-{000000..000002}.tar", []string{"t-000000.tar", "t-000001.tar", "t-000002.tar"}},
		{"t-{8..11}.tar", []string{"t-8.tar", "t-9.tar", "t-10.tar", "t-11.tar"}},
		{"t-{08..10}.tar", []string{"t-08.tar", "t-09.tar", "t-10.tar"}},
		{"{a,b}/{0..1}", []string{"a/0", "a/1", "b/0", "b/1"}},
		{"x{a,{b,c}}y", []string{"xay", "xby", "xcy"}},
		{"s3://b/p/shard-{00..01}.tar", []string{"s3://b/p/shard-00.tar", "s3://b/p/shard-01.tar"}},
	} {
		got, err := expandBraces(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("expandBraces(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"t-{0..2.tar", "t-}.tar", "t-{3..1}.tar", "t-{only}.tar", "t-{0..99999999}.tar"} {
		if got, err := expandBraces(bad); err == nil {
			t.Errorf("expandBraces(%q) = %q, want an error", bad, got)
		}
	}
}

func TestLabelFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	m, err := readLabels(write("labels", "# key class\nk1 3\n\nsub/k 2 \nkey with space\tcat\n"))
	if err != nil || len(m) != 3 || m["k1"] != "3" || m["sub/k"] != "2" || m["key with space"] != "cat" {
		t.Errorf("readLabels = %v, %v", m, err)
	}
	for text, want := range map[string]string{"k1 3\nk1 4\n": "given twice", "lonely\n": "want 'KEY CLASS'"} {
		if _, err := readLabels(write("bad", text)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("readLabels(%q) = %v, want an error containing %q", text, err, want)
		}
	}
	names, err := readClassNames(write("names", "n01440764\nn01443537\n\n"))
	if err != nil || !slices.Equal(names, []string{"n01440764", "n01443537"}) {
		t.Errorf("readClassNames = %q, %v", names, err)
	}
	for text, want := range map[string]string{"a\n\nb\n": "blank line", "a/b\n": "cannot name a directory"} {
		if _, err := readClassNames(write("bad", text)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("readClassNames(%q) = %v, want an error containing %q", text, err, want)
		}
	}
}

func TestDetectFormat(t *testing.T) {
	for head, want := range map[string]format{
		"PK\x03\x04rest": formatZip, "PK\x05\x06": formatZip, "PK\x07\x08PK": formatZip,
		"ustar\x00": formatTar, "\x1f\x8b\x08": formatTar, "": formatTar, "PK": formatTar,
		"PAR1\x15\x04": formatHF, "ARROW1\x00\x00": formatHF, "\xff\xff\xff\xff\x10\x01": formatHF,
		// a TFRecord's first length (7) and its masked CRC32C; a wrong CRC is not one
		"\x07\x00\x00\x00\x00\x00\x00\x00" + string(binary.LittleEndian.AppendUint32(nil, maskedCRC32C([]byte("\x07\x00\x00\x00\x00\x00\x00\x00")))): formatTFRecord,
		"\x07\x00\x00\x00\x00\x00\x00\x00\x01\x02\x03\x04": formatTar,
	} {
		if got := detectFormat([]byte(head)); got != want {
			t.Errorf("detectFormat(%q) = %s, want %s", head, got, want)
		}
	}
}

// countingFile is a view.File over bytes that counts its reads.
type countingFile struct {
	b     []byte
	reads int
}

func (c *countingFile) ReadAt(p []byte, off int64) (int, error) {
	c.reads++
	if off < 0 || off+int64(len(p)) > int64(len(c.b)) {
		return 0, io.EOF
	}
	return copy(p, c.b[off:]), nil
}

func (c *countingFile) Close() error { return nil }

// TestBlockFile: an object read in windows of 1 MiB, in order, costs a GET per 8 MiB block, and
// reads anywhere (across blocks, at the end, larger than a block) get the object's bytes.
func TestBlockFile(t *testing.T) {
	data := make([]byte, 3*objectBlock+12345)
	for i := range data {
		data[i] = byte(i * 7 / 5)
	}
	inner := &countingFile{b: data}
	f := &blockFile{f: inner, size: int64(len(data))}
	buf := make([]byte, 1<<20)
	for off := int64(0); off < int64(len(data)); off += int64(len(buf)) {
		p := buf[:min(int64(len(buf)), int64(len(data))-off)]
		if n, err := f.ReadAt(p, off); err != nil || n != len(p) || !bytes.Equal(p, data[off:off+int64(n)]) {
			t.Fatalf("read at %d: %d, %v", off, n, err)
		}
	}
	if want := 4; inner.reads != want {
		t.Errorf("%d reads of the object for %d bytes read in order, want %d (one a block)", inner.reads, len(data), want)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		n := rng.IntN(2*objectBlock) + 1
		off := rng.Int64N(int64(len(data) - n + 1))
		p := make([]byte, n)
		if got, err := f.ReadAt(p, off); err != nil || got != n || !bytes.Equal(p, data[off:off+int64(n)]) {
			t.Fatalf("read of %d at %d: %d, %v", n, off, got, err)
		}
	}
	if _, err := f.ReadAt(make([]byte, 10), int64(len(data))-5); err == nil {
		t.Errorf("a read past the end succeeded")
	}
}
