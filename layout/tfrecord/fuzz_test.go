package tfrecord

import (
	"bytes"
	"hash/crc32"
	"reflect"
	"testing"
)

// FuzzScanner feeds arbitrary bytes to a Scanner, both as a file and framed as the data of one
// record (so that the Example parser sees them past the length CRC). It must not panic and
// must end; each record lies after the last, and its image inside its data. The seeds
// (testdata/fuzz/FuzzScanner: Examples as the ImageNet scripts and TFDS write them, and a file
// of two records) run as a normal test.
func FuzzScanner(f *testing.F) {
	f.Add([]byte{})
	f.Add(imagenetExample(sample{image: []byte("\xff\xd8\xff"), label: 3, filename: "a.JPEG", synset: "n01"}))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, file := range [][]byte{data, appendRecord(nil, data)} {
			for _, checksums := range []bool{false, true} {
				s := newScanner(bytes.NewReader(file), "fuzz", Options{Checksums: checksums}, 16<<(len(file)%5))
				end := int64(0)
				for i := 0; ; i++ {
					rec, err := s.Next()
					if err != nil {
						break
					}
					if i > len(file)/(headerSize+footerSize) {
						t.Fatalf("record %d from %d bytes", i, len(file))
					}
					dataEnd := rec.Offset + headerSize + rec.DataSize
					if rec.Offset != end || dataEnd+footerSize > int64(len(file)) {
						t.Fatalf("record %d: %+v after byte %d of %d", i, rec, end, len(file))
					}
					if rec.HasImage && (rec.ImageOff < rec.Offset+headerSize || rec.ImageSize < 0 || rec.ImageOff+rec.ImageSize > dataEnd) {
						t.Fatalf("record %d: image [%d,+%d) outside its data [%d,%d)", i, rec.ImageOff, rec.ImageSize, rec.Offset+headerSize, dataEnd)
					}
					if checksums && rec.HasImage && rec.ImageCRC != crc32.Checksum(file[rec.ImageOff:rec.ImageOff+rec.ImageSize], castagnoli) {
						t.Fatalf("record %d: ImageCRC %08x is not its image's", i, rec.ImageCRC)
					}
					end = dataEnd + footerSize
				}
			}
		}
	})
}

// FuzzParseExample holds parseExample to the reference parser (refexample_test.go): for any
// bytes, the same record fields or both an error (the same one). Its seeds run as a normal test.
func FuzzParseExample(f *testing.F) {
	f.Add([]byte{})
	f.Add(imagenetExample(sample{image: []byte("\xff\xd8\xff"), label: 3, filename: "a.JPEG", synset: "n01"}))
	f.Add(tfdsExample(sample{image: []byte("\x89PNG"), label: 7, filename: "b.png"}))
	f.Fuzz(func(t *testing.T, data []byte) {
		var got, want Record
		err := parseExample(data, &got, 100)
		wantErr := refParseExample(data, &want, 100)
		if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
			t.Fatalf("error %v, the reference's %v", err, wantErr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("record %+v, the reference's %+v", got, want)
		}
	})
}
