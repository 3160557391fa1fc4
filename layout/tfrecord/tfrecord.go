// Package tfrecord reads uncompressed TFRecord files record by record, giving the extent in the
// file of each record's image bytes: what indexing a TFRecord set in place needs. It knows
// nothing of aifs's index and imports only the standard library; its user is the indexer.
//
// # Format
//
// A TFRecord file is a sequence of records, each
//
//	u64 length (little endian), u32 masked CRC32C of those 8 bytes, length bytes of data,
//	u32 masked CRC32C of the data
//
// where a CRC c is masked as ((c>>15)|(c<<17)) + 0xa282ead8. The data of an image set's record
// is a tf.train.Example protocol buffer: Example{features: Features{feature: map<string,
// Feature>}}, a Feature being one of bytes_list (1), float_list (2) or int64_list (3). The
// image is one protobuf bytes value, so one contiguous run of the file. Keys read:
//
//	field     tensorflow/models and tensorflow/tpu ImageNet scripts   TFDS
//	image     image/encoded                                           image
//	filename  image/filename                                          file_name
//	label     image/class/label (int64)                               label (int64)
//	synset    image/class/synset
//
// When a record holds both spellings of a field, the script's key wins. A value is the first
// of its list.
//
// # What is refused
//
// GZIP- and ZLIB-compressed TFRecord files (TFRecordOptions compression) hide the framing in a
// compressed stream, and their bytes cannot be served where they lie: their first length CRC
// fails, and Next returns an error wrapping ErrCompressed that names the compression when the
// file starts with its magic. Any other CRC mismatch, a truncated record or a record whose data
// is not a protocol buffer is an error naming the file and the record's offset: the file is
// corrupt, or not a TFRecord file of Examples. A record with no image or no label is not an
// error: Next returns it with HasImage or HasLabel false, and the Summary counts it.
//
// # API
//
// A Scanner reads one file in one sequential pass through 4 MiB reads of an io.Reader (a file,
// or an S3 object's body): Next returns its records in order, Summary counts those without an
// image or a label, Offset says how far it has read (for progress), and Reset starts another
// file keeping the buffer. With Options.Checksums it also checks each record's data CRC and
// computes the CRC32C of each image's bytes, in the same pass over the bytes.
package tfrecord

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

const (
	headerSize = 12 // u64 length + u32 masked CRC of it
	footerSize = 4  // u32 masked CRC of the data
	// bufSize is the Scanner's buffer, and the size of its reads: small enough that a read's
	// bytes are still in a core's L2 cache (2 MiB here) when its records are parsed and summed
	// (docs/bench/formats-notes.md#tfrecord-reads).
	bufSize = 1 << 20
	// maxRecord bounds a record's data length; TensorFlow's own readers take no more in one
	// string. The buffer grows to a record's length only as its bytes arrive.
	maxRecord = 1 << 31
	// maxReported bounds the record numbers a Summary keeps of each kind of problem.
	maxReported = 100
)

// ErrCompressed is wrapped by the error Next returns for a compressed TFRecord file; the
// message names the compression where the file's first bytes show it.
var ErrCompressed = errors.New("TFRecord file is compressed")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record is one record of a file. HasImage and HasLabel say whether the Example held an image
// and a label; the other fields are zero where it did not hold them.
type Record struct {
	Index     int64  // the record's number in the file, from 0
	Offset    int64  // offset in the file of the record's length field
	DataSize  int64  // bytes of the record's data (the Example)
	DataCRC   uint32 // CRC32C of the data, unmasked, as the file records it
	HasImage  bool
	ImageOff  int64  // offset in the file of the image's first byte
	ImageSize int64  // bytes of the image (may be 0: an empty bytes value is still an image)
	ImageCRC  uint32 // CRC32C of the image's bytes; with Options.Checksums only
	// ImageHead holds the image's first bytes (fewer, zero-filled, if it is shorter): enough
	// for its type's magic number, with no read of the file.
	ImageHead [12]byte
	HasLabel  bool
	Label     int64 // image/class/label or label, as stored (the ImageNet scripts count from 1)
	// Filename (image/filename or file_name) and Synset (image/class/synset) are nil if absent.
	// They are the Scanner's bytes, valid until the next call of Next: copy what is kept.
	Filename []byte
	Synset   []byte
}

// Options says what a Scanner does beyond finding the records. The zero value finds them only.
type Options struct {
	// Checksums checks each record's data CRC (a mismatch is an error) and sets
	// Record.ImageCRC. Default false: the data CRCs are not checked, the length CRCs always are.
	Checksums bool
}

// Summary counts the records a Scanner has returned and those it returned without an image
// or a label, with the numbers of the first maxReported of each.
type Summary struct {
	Records      int64
	NoImage      int64
	NoLabel      int64
	NoImageFirst []int64 // record numbers of the first records with no image
	NoLabelFirst []int64 // record numbers of the first records with no label
}

// Scanner reads the records of one TFRecord file in order. It is not safe for concurrent use.
// Errors are sticky: after one, Next returns it again.
type Scanner struct {
	r       io.Reader
	name    string // the file's name, in errors
	opt     Options
	buf     []byte // buf[start:end] holds the file's bytes from offset base+start
	start   int
	end     int
	base    int64 // offset in the file of buf[0]
	index   int64 // the next record's number
	err     error // sticky: io.EOF at the end, or the first error
	summary Summary
}

// NewScanner returns a scanner of the TFRecord file read from r, from its first byte; name
// names it in errors.
func NewScanner(r io.Reader, name string, opt Options) *Scanner {
	return newScanner(r, name, opt, bufSize)
}

// newScanner returns a Scanner whose buffer starts at size bytes (the fuzz test's are small).
func newScanner(r io.Reader, name string, opt Options, size int) *Scanner {
	return &Scanner{r: r, name: name, opt: opt, buf: make([]byte, size)}
}

// Reset makes s read the file in r from its first byte, as NewScanner(r, name, opt) would,
// keeping s's buffer: one Scanner can read many files in turn.
func (s *Scanner) Reset(r io.Reader, name string, opt Options) {
	*s = Scanner{r: r, name: name, opt: opt, buf: s.buf}
}

// Summary returns the counts of the records returned so far.
func (s *Scanner) Summary() Summary { return s.summary }

// Offset returns the number of bytes of the file consumed: at the end, its length.
func (s *Scanner) Offset() int64 { return s.base + int64(s.start) }

// Next returns the next record. It returns io.EOF after the last record, an error wrapping
// io.ErrUnexpectedEOF if the file is truncated, one wrapping ErrCompressed for a compressed
// file and otherwise an error naming the file and the offset of the record at fault.
func (s *Scanner) Next() (Record, error) {
	if s.err != nil {
		return Record{}, s.err
	}
	rec, err := s.next()
	if err != nil {
		s.err = err
		return Record{}, err
	}
	s.count(rec)
	return rec, nil
}

func (s *Scanner) count(rec Record) {
	s.summary.Records++
	if !rec.HasImage {
		s.summary.NoImage++
		if len(s.summary.NoImageFirst) < maxReported {
			s.summary.NoImageFirst = append(s.summary.NoImageFirst, rec.Index)
		}
	}
	if !rec.HasLabel {
		s.summary.NoLabel++
		if len(s.summary.NoLabelFirst) < maxReported {
			s.summary.NoLabelFirst = append(s.summary.NoLabelFirst, rec.Index)
		}
	}
}

func (s *Scanner) next() (Record, error) {
	rec := Record{Index: s.index, Offset: s.Offset()}
	if err := s.fill(headerSize); err == io.EOF && s.end == s.start {
		return rec, io.EOF
	} else if err != nil {
		return rec, s.truncated(rec, err)
	}
	h := s.buf[s.start : s.start+headerSize]
	n := binary.LittleEndian.Uint64(h)
	if got, want := maskedCRC(h[:8]), binary.LittleEndian.Uint32(h[8:]); got != want {
		return rec, s.badLength(rec, h)
	}
	if n > maxRecord {
		return rec, fmt.Errorf("tfrecord: %s: record %d at byte %d: length %d is over %d", s.name, rec.Index, rec.Offset, n, int64(maxRecord))
	}
	rec.DataSize = int64(n)
	if err := s.fill(headerSize + int(n) + footerSize); err != nil {
		return rec, s.truncated(rec, err)
	}
	data := s.buf[s.start+headerSize : s.start+headerSize+int(n)]
	rec.DataCRC = unmask(binary.LittleEndian.Uint32(s.buf[s.start+headerSize+int(n):]))
	dataOff := rec.Offset + headerSize
	if err := parseExample(data, &rec, dataOff); err != nil {
		return rec, fmt.Errorf("tfrecord: %s: record %d at byte %d is not a tf.train.Example: %w", s.name, rec.Index, rec.Offset, err)
	}
	if s.opt.Checksums {
		if crc := s.checksum(data, &rec, dataOff); crc != rec.DataCRC {
			return rec, fmt.Errorf("tfrecord: %s: record %d at byte %d: data CRC32C %08x, the file records %08x", s.name, rec.Index, rec.Offset, crc, rec.DataCRC)
		}
	}
	s.start += headerSize + int(n) + footerSize
	s.index++
	return rec, nil
}

// checksum returns the CRC32C of data, setting rec.ImageCRC: the image is summed on its own,
// and the data's sum runs over the bytes before it, the image again and the bytes after it.
// Summing the image twice costs less than combining the sums
// (docs/bench/formats-notes.md#tfrecord-checksums).
func (s *Scanner) checksum(data []byte, rec *Record, dataOff int64) uint32 {
	if !rec.HasImage {
		return crc32.Checksum(data, castagnoli)
	}
	lo, hi := rec.ImageOff-dataOff, rec.ImageOff-dataOff+rec.ImageSize
	img := data[lo:hi]
	rec.ImageCRC = crc32.Checksum(img, castagnoli)
	crc := crc32.Update(crc32.Checksum(data[:lo], castagnoli), castagnoli, img)
	return crc32.Update(crc, castagnoli, data[hi:])
}

// badLength is the error for a length whose CRC does not match: a compressed file if it is
// the first record and the file starts with the magic of a compression.
func (s *Scanner) badLength(rec Record, h []byte) error {
	if rec.Index == 0 {
		if h[0] == 0x1f && h[1] == 0x8b {
			return fmt.Errorf("tfrecord: %s: %w: it starts with gzip's magic (GZIP TFRecordOptions); decompress it (gunzip) to index it", s.name, ErrCompressed)
		}
		if h[0]&0x0f == 8 && h[0]>>4 <= 7 && (uint16(h[0])<<8|uint16(h[1]))%31 == 0 {
			return fmt.Errorf("tfrecord: %s: %w: it starts with a zlib header (ZLIB TFRecordOptions); decompress it to index it", s.name, ErrCompressed)
		}
		return fmt.Errorf("tfrecord: %s: the first record's length CRC does not match: not a TFRecord file, or a compressed one", s.name)
	}
	return fmt.Errorf("tfrecord: %s: record %d at byte %d: the length's CRC does not match: the file is corrupt", s.name, rec.Index, rec.Offset)
}

func (s *Scanner) truncated(rec Record, err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("tfrecord: %s: record %d at byte %d: %w", s.name, rec.Index, rec.Offset, err)
}

// fill makes buf[start:] hold at least n bytes, reading more of the file (in large reads, the
// buffer growing as the bytes arrive). It returns io.EOF if the file ends first. The bytes
// held are moved to the buffer's front only when the record does not fit after them: a
// record's worth, not half the buffer (docs/bench/formats-notes.md#tfrecord-reads).
func (s *Scanner) fill(n int) error {
	for empty := 0; s.end-s.start < n; {
		if s.start > 0 && len(s.buf)-s.start < n {
			copy(s.buf, s.buf[s.start:s.end])
			s.base += int64(s.start)
			s.end -= s.start
			s.start = 0
		}
		if s.end == len(s.buf) {
			grown := make([]byte, min(2*len(s.buf), n))
			copy(grown, s.buf[:s.end])
			s.buf = grown
		}
		k, err := s.r.Read(s.buf[s.end:])
		s.end += k
		if err != nil && s.end-s.start < n {
			return err
		}
		if empty++; k > 0 {
			empty = 0
		} else if empty == 100 {
			return io.ErrNoProgress
		}
	}
	return nil
}

// maskedCRC is TFRecord's masked CRC32C of b.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return (c>>15 | c<<17) + 0xa282ead8
}

// unmask undoes the mask of maskedCRC.
func unmask(m uint32) uint32 {
	c := m - 0xa282ead8
	return c<<15 | c>>17
}
