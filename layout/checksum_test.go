package layout

import (
	"context"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestChecksumKindCRC32IEEE writes a set whose one shard, a file indexed in place, holds its
// files' CRC-32/IEEE (as a ZIP's central directory gives them) and no checksum of its own, and
// checks that the kind survives the index, that Verify checks the files by it (and not the
// bytes between them), and that a changed byte of a file is reported with the kind's name.
func TestChecksumKindCRC32IEEE(t *testing.T) {
	dir := t.TempDir()
	data := []byte("HEADER1-alpha-HEADER2-bravo!-TRAILER")
	files := map[string][2]int{"a": {8, 13}, "b": {22, 28}}
	root := &Node{Mode: ModeDir | 0o755}
	for name, r := range files {
		root.Children = append(root.Children, &Node{Name: name, Mode: ModeRegular | 0o644, Offset: uint64(r[0]),
			Size: uint64(r[1] - r[0]), CRC: crc32.ChecksumIEEE(data[r[0]:r[1]])})
	}
	shards := []Shard{{Name: "z.zip", Kind: ShardTar, Size: uint64(len(data)), Checksum: CRC32IEEE, Version: "1"}}
	buf := EncodeIndex(Number(root), shards, false)
	x, err := Parse(buf)
	if err != nil {
		t.Fatal(err)
	}
	if got := x.Shards()[0]; got.Checksum != CRC32IEEE || got.CRC != 0 || !x.Checksums() {
		t.Fatalf("shard %+v, checksums %v: want CRC32IEEE and checksums", got, x.Checksums())
	}
	shardPath := filepath.Join(dir, "z.zip")
	verify := func() []Problem {
		var problems []Problem
		if _, err := Verify(context.Background(), dir, x, VerifyOptions{}, func(p Problem) { problems = append(problems, p) }); err != nil {
			t.Fatal(err)
		}
		return problems
	}
	// Bytes outside the files change freely: the shard has no checksum of its own.
	os.WriteFile(shardPath, []byte(strings.Replace(string(data), "TRAILER", "trailer", 1)), 0o644)
	if p := verify(); len(p) != 0 {
		t.Errorf("a CRC-32 shard with its files intact: %+v", p)
	}
	bad := []byte(string(data))
	bad[24] ^= 1 // in "bravo"
	os.WriteFile(shardPath, bad, 0o644)
	if p := verify(); len(p) != 1 || p[0].Path != "b" || !strings.Contains(p[0].Reason, "crc32 ") {
		t.Errorf("a changed byte of b: %+v, want one problem naming b and crc32", p)
	}

	// The kind is refused where it cannot be: on a packed shard, beside a whole-shard checksum,
	// or unknown.
	kindAt := sectionAt(buf, secShards) + 28
	rejects(t, buf, []rejectCase{
		{"unknown kind", "checksum kind 2", func(b []byte) { b[kindAt] = 2 }},
		{"kind with a shard checksum", "checksum kind 1", func(b []byte) { le.PutUint32(b[kindAt-4:], 7) }},
		{"kind on a packed shard", "checksum kind 1", func(b []byte) { le.PutUint16(b[kindAt-18:], uint16(ShardData)) }},
		{"reserved bytes after the kind", "nonzero reserved", func(b []byte) { b[kindAt+1] = 1 }},
	})
}
