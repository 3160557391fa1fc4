package hfarrow

import (
	"hash/crc32"
	"testing"
)

// FuzzScanner feeds arbitrary bytes to a Scanner, as an Arrow stream, Arrow file or Parquet
// file by their first bytes. It must not panic and must end; each row's image lies inside the
// file, and with checksums its CRC is that of those bytes. The seeds (testdata/fuzz/FuzzScanner:
// small files written by the Apache Arrow Go library, as the tests write them) run as a normal
// test.
func FuzzScanner(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("ARROW1\x00\x00"))
	f.Add([]byte("PAR1\x00\x00\x00\x00PAR1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, opt := range []Options{{Checksums: true}, {ImageColumn: "image", LabelColumn: "label"}} {
			s, err := NewScanner(bytesAt(data), int64(len(data)), "fuzz", opt)
			if err != nil {
				continue
			}
			for i := 0; ; i++ {
				row, err := s.Next()
				if err != nil {
					break
				}
				if i > 2*len(data)+10 || row.Index != int64(i) {
					t.Fatalf("row %d (index %d) from %d bytes", i, row.Index, len(data))
				}
				if !row.HasImage {
					continue
				}
				if row.ImageOff < 0 || row.ImageSize < 0 || row.ImageOff+row.ImageSize > int64(len(data)) {
					t.Fatalf("row %d: image [%d,+%d) outside the file's %d bytes", i, row.ImageOff, row.ImageSize, len(data))
				}
				if opt.Checksums && row.ImageCRC != crc32.Checksum(data[row.ImageOff:row.ImageOff+row.ImageSize], castagnoli) {
					t.Fatalf("row %d: ImageCRC %08x is not its image's", i, row.ImageCRC)
				}
			}
		}
	})
}
