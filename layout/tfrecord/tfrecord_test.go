package tfrecord

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/iotest"
)

// The writer below follows the framing and the tf.train.Example schema as documented
// (tensorflow/core/lib/io/record_writer.cc, tensorflow/core/example/feature.proto), sharing no
// code with the reader.

func pbVarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

func pbBytes(b []byte, num int, v []byte) []byte {
	b = pbVarint(b, uint64(num)<<3|2)
	b = pbVarint(b, uint64(len(v)))
	return append(b, v...)
}

// feature is one entry of an Example: bytes values, int64 values (packed unless unpacked) or
// float values.
type feature struct {
	key      string
	bytes    [][]byte
	ints     []int64
	floats   []float32
	unpacked bool
}

func (f feature) encode() []byte {
	var list []byte
	num := 1
	switch {
	case f.ints != nil:
		num = 3
		if f.unpacked {
			for _, v := range f.ints {
				list = pbVarint(pbVarint(list, 1<<3), uint64(v))
			}
		} else {
			var packed []byte
			for _, v := range f.ints {
				packed = pbVarint(packed, uint64(v))
			}
			list = pbBytes(list, 1, packed)
		}
	case f.floats != nil:
		num = 2
		var packed []byte
		for _, v := range f.floats {
			packed = binary.LittleEndian.AppendUint32(packed, math.Float32bits(v))
		}
		list = pbBytes(list, 1, packed)
	default:
		for _, v := range f.bytes {
			list = pbBytes(list, 1, v)
		}
	}
	return pbBytes(nil, num, list)
}

func encodeExample(fs ...feature) []byte {
	var features []byte
	for _, f := range fs {
		entry := pbBytes(nil, 1, []byte(f.key))
		entry = pbBytes(entry, 2, f.encode())
		features = pbBytes(features, 1, entry)
	}
	return pbBytes(nil, 1, features)
}

func testMask(data []byte) uint32 {
	c := crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))
	return (c>>15 | c<<17) + 0xa282ead8
}

func appendRecord(file, data []byte) []byte {
	n := binary.LittleEndian.AppendUint64(nil, uint64(len(data)))
	file = append(file, n...)
	file = binary.LittleEndian.AppendUint32(file, testMask(n))
	file = append(file, data...)
	return binary.LittleEndian.AppendUint32(file, testMask(data))
}

type sample struct {
	image    []byte
	label    int64
	filename string
	synset   string
}

func randomSamples(r *rand.Rand, n int) []sample {
	s := make([]sample, n)
	for i := range s {
		img := make([]byte, r.IntN(70000))
		for j := range img {
			img[j] = byte(r.Uint32())
		}
		s[i] = sample{image: img, label: int64(1 + r.IntN(1000)), filename: "n0144_" + string(rune('a'+i%26)) + ".JPEG", synset: "n0144"}
	}
	return s
}

// imagenetExample is a record as the tensorflow/models ImageNet script writes it.
func imagenetExample(s sample) []byte {
	return encodeExample(
		feature{key: "image/height", ints: []int64{375}},
		feature{key: "image/colorspace", bytes: [][]byte{[]byte("RGB")}},
		feature{key: "image/class/label", ints: []int64{s.label}},
		feature{key: "image/class/synset", bytes: [][]byte{[]byte(s.synset)}},
		feature{key: "image/class/text", bytes: [][]byte{[]byte("tench, Tinca tinca")}},
		feature{key: "image/format", bytes: [][]byte{[]byte("JPEG")}},
		feature{key: "image/filename", bytes: [][]byte{[]byte(s.filename)}},
		feature{key: "image/encoded", bytes: [][]byte{s.image}},
	)
}

// tfdsExample is a record as TFDS writes imagenet2012: image, label, file_name.
func tfdsExample(s sample) []byte {
	return encodeExample(
		feature{key: "file_name", bytes: [][]byte{[]byte(s.filename)}},
		feature{key: "image", bytes: [][]byte{s.image}},
		feature{key: "label", ints: []int64{s.label}, unpacked: true},
		feature{key: "score", floats: []float32{0.5}},
	)
}

func scanAll(t *testing.T, file []byte, r io.Reader, opt Options) ([]Record, Summary) {
	t.Helper()
	s := NewScanner(r, "test.tfrecord", opt)
	var recs []Record
	for {
		rec, err := s.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		rec.Filename, rec.Synset = bytes.Clone(rec.Filename), bytes.Clone(rec.Synset) // valid until the next Next
		recs = append(recs, rec)
	}
	if s.Offset() != int64(len(file)) {
		t.Errorf("Offset %d at the end, file of %d bytes", s.Offset(), len(file))
	}
	return recs, s.Summary()
}

func TestScanner(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	samples := randomSamples(r, 120)
	for _, tc := range []struct {
		name   string
		encode func(sample) []byte
	}{{"imagenet", imagenetExample}, {"tfds", tfdsExample}} {
		var file []byte
		for _, s := range samples {
			file = appendRecord(file, tc.encode(s))
		}
		for _, checksums := range []bool{false, true} {
			for _, slow := range []bool{false, true} {
				var in io.Reader = bytes.NewReader(file)
				if slow {
					in = iotest.HalfReader(iotest.DataErrReader(in))
				}
				recs, sum := scanAll(t, file, in, Options{Checksums: checksums})
				if len(recs) != len(samples) || sum.Records != int64(len(samples)) || sum.NoImage != 0 || sum.NoLabel != 0 {
					t.Fatalf("%s: %d records, summary %+v; want %d", tc.name, len(recs), sum, len(samples))
				}
				for i, rec := range recs {
					s := samples[i]
					got := file[rec.ImageOff : rec.ImageOff+rec.ImageSize]
					if rec.Index != int64(i) || !rec.HasImage || !bytes.Equal(got, s.image) || !rec.HasLabel || rec.Label != s.label || string(rec.Filename) != s.filename {
						t.Fatalf("%s record %d: %+v, image equal %v; want %+v", tc.name, i, rec, bytes.Equal(got, s.image), s)
					}
					if wantSyn := map[string]string{"imagenet": s.synset}[tc.name]; string(rec.Synset) != wantSyn {
						t.Fatalf("%s record %d: synset %q, want %q", tc.name, i, rec.Synset, wantSyn)
					}
					data := file[rec.Offset+headerSize : rec.Offset+headerSize+rec.DataSize]
					if rec.DataCRC != crc32.Checksum(data, castagnoli) {
						t.Fatalf("record %d: DataCRC %08x is not the data's", i, rec.DataCRC)
					}
					if want := crc32.Checksum(s.image, castagnoli); checksums && rec.ImageCRC != want || !checksums && rec.ImageCRC != 0 {
						t.Fatalf("record %d (checksums %v): ImageCRC %08x, image's %08x", i, checksums, rec.ImageCRC, want)
					}
				}
			}
		}
	}
}

// TestMissing: records without an image or a label are returned and counted, not dropped.
func TestMissing(t *testing.T) {
	img := []byte("\xff\xd8jpeg")
	var file []byte
	file = appendRecord(file, encodeExample(feature{key: "image/encoded", bytes: [][]byte{img}}))                               // no label
	file = appendRecord(file, encodeExample(feature{key: "image/class/label", ints: []int64{3}}))                               // no image
	file = appendRecord(file, encodeExample(feature{key: "image", ints: []int64{1}}, feature{key: "label", bytes: [][]byte{}})) // wrong kinds
	file = appendRecord(file, nil)                                                                                              // empty Example
	file = appendRecord(file, encodeExample(feature{key: "image", bytes: [][]byte{img}}, feature{key: "image/encoded", bytes: [][]byte{{}}},
		feature{key: "label", ints: []int64{7}}, feature{key: "image/class/label", ints: []int64{8}})) // the script's keys win
	recs, sum := scanAll(t, file, bytes.NewReader(file), Options{Checksums: true})
	want := Summary{Records: 5, NoImage: 3, NoLabel: 3, NoImageFirst: []int64{1, 2, 3}, NoLabelFirst: []int64{0, 2, 3}}
	if sum.Records != want.Records || sum.NoImage != want.NoImage || sum.NoLabel != want.NoLabel ||
		!slices.Equal(sum.NoImageFirst, want.NoImageFirst) || !slices.Equal(sum.NoLabelFirst, want.NoLabelFirst) {
		t.Fatalf("summary %+v, want %+v", sum, want)
	}
	if r := recs[0]; !r.HasImage || !bytes.Equal(file[r.ImageOff:r.ImageOff+r.ImageSize], img) || r.HasLabel {
		t.Errorf("record 0: %+v", r)
	}
	if r := recs[1]; r.HasImage || !r.HasLabel || r.Label != 3 {
		t.Errorf("record 1: %+v", r)
	}
	if r := recs[4]; !r.HasImage || r.ImageSize != 0 || r.Label != 8 || r.ImageCRC != 0 {
		t.Errorf("record 4: %+v, want the empty image/encoded and label 8", r)
	}
}

// TestRefused: compressed files are refused as such; corruption and truncation are errors
// naming the record.
func TestRefused(t *testing.T) {
	var plain []byte
	for _, s := range randomSamples(rand.New(rand.NewPCG(3, 4)), 3) {
		plain = appendRecord(plain, imagenetExample(s))
	}
	var gz, zl bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write(plain)
	w.Close()
	z := zlib.NewWriter(&zl)
	z.Write(plain)
	z.Close()
	badData := bytes.Clone(plain)
	badData[headerSize+10] ^= 1
	badLen := bytes.Clone(plain)
	second := headerSize + int(binary.LittleEndian.Uint64(plain)) + footerSize
	badLen[second] ^= 1
	for _, tc := range []struct {
		name      string
		file      []byte
		checksums bool
		is        error
		records   int
	}{
		{"gzip", gz.Bytes(), false, ErrCompressed, 0},
		{"zlib", zl.Bytes(), false, ErrCompressed, 0},
		{"truncated", plain[:len(plain)-1], false, io.ErrUnexpectedEOF, 2},
		{"truncated header", plain[:second+5], false, io.ErrUnexpectedEOF, 1},
		{"data CRC", badData, true, nil, 0},
		{"second length CRC", badLen, false, nil, 1},
		{"not a TFRecord", []byte("hello, world, this is text"), false, nil, 0},
	} {
		s := NewScanner(bytes.NewReader(tc.file), "x.tfrecord", Options{Checksums: tc.checksums})
		n := 0
		var err error
		for {
			if _, err = s.Next(); err != nil {
				break
			}
			n++
		}
		if err == io.EOF || n != tc.records || tc.is != nil && !errors.Is(err, tc.is) || tc.is == nil && errors.Is(err, ErrCompressed) {
			t.Errorf("%s: %d records, then %v; want %d records, then an error (%v)", tc.name, n, err, tc.records, tc.is)
		} else if !bytes.Contains([]byte(err.Error()), []byte("x.tfrecord")) {
			t.Errorf("%s: error %q does not name the file", tc.name, err)
		}
		if _, again := s.Next(); again != err {
			t.Errorf("%s: error not sticky: %v, then %v", tc.name, err, again)
		}
		t.Logf("%s: %v", tc.name, err)
	}
	// Without Checksums the data CRC is not checked: the corrupt record is returned.
	if recs, _ := scanAll(t, badData, bytes.NewReader(badData), Options{}); len(recs) != 3 {
		t.Errorf("%d records of badData without checksums, want 3", len(recs))
	}
}

// BenchmarkScanner scans a file of ImageNet-sized records (in the page cache after the first
// pass) beside a plain read of it in 4 MiB reads (what cat does), so that the rates compare in
// one run.
func BenchmarkScanner(b *testing.B) {
	var file []byte
	for _, s := range randomSamples(rand.New(rand.NewPCG(7, 8)), 1000) {
		file = appendRecord(file, imagenetExample(s))
	}
	path := filepath.Join(b.TempDir(), "bench.tfrecord")
	if err := os.WriteFile(path, file, 0o644); err != nil {
		b.Fatal(err)
	}
	open := func(b *testing.B) *os.File {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		return f
	}
	b.Run("cat", func(b *testing.B) {
		b.SetBytes(int64(len(file)))
		buf := make([]byte, bufSize)
		for b.Loop() {
			f := open(b)
			io.CopyBuffer(io.Discard, struct{ io.Reader }{f}, buf)
			f.Close()
		}
	})
	for _, checksums := range []bool{false, true} {
		b.Run(map[bool]string{false: "scan", true: "scan+checksums"}[checksums], func(b *testing.B) {
			b.SetBytes(int64(len(file)))
			s := NewScanner(nil, "", Options{})
			for b.Loop() {
				f := open(b)
				s.Reset(f, "bench", Options{Checksums: checksums})
				for {
					if _, err := s.Next(); err != nil {
						break
					}
				}
				f.Close()
			}
		})
	}
}
