// Package hfarrow reads the files of a Hugging Face `datasets` image set: Arrow IPC stream files
// (what load_dataset leaves in its cache and save_to_disk writes), Arrow IPC files, and Parquet
// files whose image bytes are stored uncompressed and PLAIN (datasets >= 4.6). For each row it
// gives the extent in the file of the image's bytes, the base name of the image's path and the
// label: what indexing such a set in place needs. It knows nothing of aifs's index and imports
// only the standard library; its user is the indexer.
//
// # Schema
//
// `datasets` stores an Image feature as a column struct{bytes: binary, path: string} and a
// ClassLabel as an int64 column, and describes the features as JSON in the schema's metadata,
// key "huggingface" ({"info": {"features": {COLUMN: {"_type": "Image"}, COLUMN: {"_type":
// "ClassLabel", "names": [...]}}}}). The image column is Options.ImageColumn, or else the first
// column (in schema order) whose feature is an Image; the label column is Options.LabelColumn,
// or else the first ClassLabel column, or none. The class names are those of the label
// column's feature, where the metadata has them.
//
// # Formats
//
// Arrow IPC stream and file formats are read message by message (FlatBuffers metadata, parsed
// by hand), in the encapsulated form (0xFFFFFFFF, int32 metadata length) and the older one (the
// length alone). An image's bytes are its value in the binary (or large_binary) child "bytes",
// one run of the record batch's body: the body's offset in the file, plus the data buffer's
// offset, plus the value's offset. Only the image struct's and label's buffers are read, not the
// image bytes (unless Options.Checksums).
//
// Parquet is read from its footer (Thrift compact protocol, parsed by hand). An image's bytes
// are its PLAIN BYTE_ARRAY value in a data page (v1 or v2) of an UNCOMPRESSED column chunk of
// "image.bytes", after the value's 4-byte length. The pages of that column are read whole. The
// label and path columns may be PLAIN or dictionary-encoded, and UNCOMPRESSED or SNAPPY.
//
// # What is refused
//
// Compressed Arrow bodies (BodyCompression: LZ4 or ZSTD buffers) and Parquet image pages
// compressed (any codec but UNCOMPRESSED) or not PLAIN (dictionary encoding) do not hold the
// image's bytes as a run of the file: the Scanner's constructor or Next returns an error wrapping
// ErrRefused that says what to do instead. A file whose schema has no such image column, or
// whose metadata is malformed, is an error naming the file. A row whose image (the struct or its
// bytes) or label is null is not an error: Next returns it with HasImage or HasLabel false, and
// the Summary counts it.
//
// # API
//
// NewScanner reads a file's schema through an io.ReaderAt; Scanner.Next returns the rows in
// order, and Summary the counts of null images and labels; Reset starts another file keeping
// the scanner's buffers. A row's Path is the scanner's bytes, valid until the next Next.
package hfarrow

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

const (
	// maxMeta bounds an Arrow message's metadata, a Parquet footer and a Parquet page header.
	maxMeta = 64 << 20
	// maxPage bounds a Parquet page, read whole.
	maxPage = 1 << 30
	// windowSize is the size of the reads that bring the image bytes in for their checksums
	// (and a Parquet file's image chunks): small enough that what a read brings is still in
	// a core's L2 cache (2 MiB here) when the rows are parsed and summed after it. At 8 MiB,
	// following a Parquet page's PLAIN lengths missed the cache at every value: 0.3 CPU s of
	// a run of 1.28 M rows (docs/bench/formats-notes.md#parquet-reads).
	windowSize = 1 << 20
	// readAhead is the least a read of metadata (Arrow messages' metadata and the buffers of
	// offsets, paths and labels) reads: the buffers after a batch's image bytes, the next
	// message's metadata and the buffers before its image bytes then take one read, not ten,
	// which matters over S3.
	readAhead = 64 << 10
	// maxReported bounds the row numbers a Summary keeps of each kind of null.
	maxReported = 100
)

// ErrRefused is wrapped by the errors for files whose image bytes are not stored as runs of
// the file: compressed Arrow bodies, compressed or dictionary-encoded Parquet image pages.
var ErrRefused = errors.New("its image bytes cannot be served where they lie")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Format is the kind of file a Scanner reads.
type Format uint8

const (
	ArrowStream Format = iota // Arrow IPC stream format: what load_dataset caches
	ArrowFile                 // Arrow IPC file format ("ARROW1" magic)
	Parquet                   // Parquet ("PAR1" magic)
)

func (f Format) String() string {
	return [...]string{"Arrow IPC stream", "Arrow IPC file", "Parquet"}[f]
}

// Options names the columns read and says whether the image bytes are checksummed. The zero
// value reads the default columns (package doc) without checksums.
type Options struct {
	ImageColumn string // the image column; default "": the first Image feature
	LabelColumn string // the label column; default "": the first ClassLabel feature, or none
	// Checksums sets Row.ImageCRC, reading every image's bytes. Default false: the image bytes
	// of an Arrow file are not read.
	Checksums bool
}

// Schema is what a Scanner found in the file's schema.
type Schema struct {
	Format      Format
	ImageColumn string
	LabelColumn string   // "" if the file has none
	ClassNames  []string // of the label column, from the "huggingface" metadata; nil if none
}

// Row is one row of the file. HasImage and HasLabel are false where the image (the struct, or
// its bytes) or the label is null, or the file has no label column.
type Row struct {
	Index     int64 // the row's number in the file, from 0
	HasImage  bool
	ImageOff  int64  // offset in the file of the image's first byte
	ImageSize int64  // bytes of the image
	ImageCRC  uint32 // CRC32C of the image's bytes; with Options.Checksums only
	// ImageHead holds the image's first bytes (zero-filled past its end) when HasHead: the
	// Scanner read them anyway (Parquet always, Arrow with Options.Checksums), so the type's
	// magic number is known with no other read.
	ImageHead [12]byte
	HasHead   bool
	// Path is the base name of the image's path; nil if it is null or empty, or the image null.
	// It is the Scanner's bytes, valid until the next call of Next: copy what is kept.
	Path     []byte
	HasLabel bool
	Label    int64
}

// Summary counts the rows a Scanner has returned, and those with a null image or label, with
// the numbers of the first maxReported of each.
type Summary struct {
	Rows           int64
	NullImage      int64
	NullLabel      int64   // rows whose label is null (0 if the file has no label column)
	NullImageFirst []int64 // row numbers of the first rows with a null image
	NullLabelFirst []int64
}

// Scanner reads the rows of one file in order. It is not safe for concurrent use. Errors are
// sticky: after one, Next returns it again.
type Scanner struct {
	r       io.ReaderAt
	size    int64
	name    string
	opt     Options
	schema  Schema
	ahead   window // small reads, read ahead
	win     window // the image bytes, for their checksums (Arrow)
	batch   arena  // what a batch reads (readAt) and keeps (paths): reset at each batch
	src     source // reads the rows of the next batch into rows
	rows    []Row  // the current batch
	next    int    // rows[next] is the next row returned
	index   int64  // the number of the first row of the next batch
	err     error
	summary Summary
}

// arena holds the bytes of one batch, end to end in a block reused from batch to batch: a
// batch's buffers and paths cost no allocation once the block is large enough
// (docs/bench/formats-notes.md#allocations-a-sample). A slice it gave is valid until reset.
type arena struct{ buf []byte }

// alloc returns n bytes of the arena (not zeroed).
func (a *arena) alloc(n int) []byte {
	if cap(a.buf)-len(a.buf) < n {
		a.buf = make([]byte, 0, max(2*cap(a.buf), n, 64<<10)) // the old block stays with its slices
	}
	k := len(a.buf)
	a.buf = a.buf[:k+n]
	return a.buf[k : k+n : k+n]
}

// keep returns a copy of b in the arena.
func (a *arena) keep(b []byte) []byte {
	c := a.alloc(len(b))
	copy(c, b)
	return c
}

func (a *arena) reset() { a.buf = a.buf[:0] }

// source is one format's reading of a file, batch by batch (an Arrow record batch, a Parquet
// row group): batch appends the rows of the next one, numbered from first, with their
// ImageCRC if Options.Checksums, and returns io.EOF after the last.
type source interface {
	batch(rows []Row, first int64) ([]Row, error)
}

// NewScanner reads the schema of the file of size bytes in r; name names it in errors. The
// format is told by the file's first bytes.
func NewScanner(r io.ReaderAt, size int64, name string, opt Options) (*Scanner, error) {
	s := &Scanner{}
	if err := s.Reset(r, size, name, opt); err != nil {
		return nil, err
	}
	return s, nil
}

// Reset makes s read the file of size bytes in r, as NewScanner does, keeping s's buffers: one
// Scanner can read many files in turn.
func (s *Scanner) Reset(r io.ReaderAt, size int64, name string, opt Options) error {
	*s = Scanner{r: r, size: size, name: name, opt: opt,
		ahead: window{r: r, size: size, least: readAhead, buf: s.ahead.buf[:0]},
		win:   window{r: r, size: size, least: windowSize, buf: s.win.buf[:0]},
		batch: arena{s.batch.buf[:0]}, rows: s.rows[:0]}
	var head [8]byte
	n, err := r.ReadAt(head[:], 0)
	if n < len(head) && size >= int64(len(head)) {
		return s.errorf("read its first bytes: %w", cmp(err))
	}
	switch {
	case bytes.HasPrefix(head[:n], []byte("PAR1")):
		s.schema.Format = Parquet
		s.src, err = openParquet(s)
	case bytes.HasPrefix(head[:n], []byte("ARROW1")):
		s.schema.Format = ArrowFile
		s.src, err = openArrow(s, true)
	default:
		s.schema.Format = ArrowStream
		s.src, err = openArrow(s, false)
	}
	if err != nil {
		s.err = err
	}
	return err
}

func cmp(err error) error {
	if err == nil || err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// errorf is an error naming the file.
func (s *Scanner) errorf(format string, a ...any) error {
	return fmt.Errorf("hfarrow: %s: "+format, append([]any{s.name}, a...)...)
}

// refused is the error for a file refused for what, with a hint of what to do instead.
func (s *Scanner) refused(what, hint string) error {
	return fmt.Errorf("hfarrow: %s: %s: %w; %s", s.name, what, ErrRefused, hint)
}

// Schema returns what the scanner found in the file's schema.
func (s *Scanner) Schema() Schema { return s.schema }

// Summary returns the counts of the rows returned so far.
func (s *Scanner) Summary() Summary { return s.summary }

// Next returns the next row. It returns io.EOF after the last row, an error wrapping
// ErrRefused for a batch whose image bytes are compressed, and otherwise an error naming the
// file and what in it is malformed.
func (s *Scanner) Next() (Row, error) {
	for s.err == nil && s.next == len(s.rows) {
		s.rows, s.next = s.rows[:0], 0
		s.batch.reset()
		s.rows, s.err = s.src.batch(s.rows, s.index)
		s.index += int64(len(s.rows))
	}
	if s.err != nil {
		return Row{}, s.err
	}
	row := s.rows[s.next]
	s.next++
	s.count(row)
	return row, nil
}

func (s *Scanner) count(row Row) {
	s.summary.Rows++
	if !row.HasImage {
		s.summary.NullImage++
		if len(s.summary.NullImageFirst) < maxReported {
			s.summary.NullImageFirst = append(s.summary.NullImageFirst, row.Index)
		}
	}
	if !row.HasLabel && s.schema.LabelColumn != "" {
		s.summary.NullLabel++
		if len(s.summary.NullLabelFirst) < maxReported {
			s.summary.NullLabelFirst = append(s.summary.NullLabelFirst, row.Index)
		}
	}
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// baseName returns the last element of a path as `datasets` stores it (a file name, a local
// path or a URL): what follows its last '/' or '\\'; nil for an empty one.
func baseName(p []byte) []byte {
	if i := bytes.LastIndexAny(p, `/\`); i >= 0 {
		p = p[i+1:]
	}
	if len(p) == 0 {
		return nil
	}
	return p
}

// window holds bytes of a file read in large reads (of least bytes at the least), for reading
// runs in order of offset.
type window struct {
	r     io.ReaderAt
	size  int64
	least int64
	off   int64
	buf   []byte
}

// held returns the file's bytes [off, off+n) if the window holds them, valid until the next
// call of bytes.
func (w *window) held(off, n int64) ([]byte, bool) {
	if off < w.off || n < 0 || off+n > w.off+int64(len(w.buf)) {
		return nil, false
	}
	return w.buf[off-w.off : off-w.off+n], true
}

// bytes returns the file's bytes [off, off+n), valid until the next call.
func (w *window) bytes(off, n int64) ([]byte, error) {
	if off < 0 || n < 0 || off > w.size-n {
		return nil, fmt.Errorf("[%d,+%d) is outside the file's %d bytes", off, n, w.size)
	}
	if off >= w.off && off+n <= w.off+int64(len(w.buf)) {
		return w.buf[off-w.off : off-w.off+n], nil
	}
	want := min(max(n, w.least), w.size-off)
	if int64(cap(w.buf)) < want {
		w.buf = make([]byte, want)
	}
	w.buf = w.buf[:want]
	if k, err := w.r.ReadAt(w.buf, off); int64(k) < want {
		w.buf = w.buf[:0]
		return nil, cmp(err)
	}
	w.off = off
	return w.buf[:n], nil
}

// readAt reads the file's bytes [off, off+n) into the batch's arena, valid until the next
// batch, or fails naming what. Small reads go through s.ahead.
func (s *Scanner) readAt(off, n int64, what string) ([]byte, error) {
	if off < 0 || n < 0 || off > s.size-n {
		return nil, s.errorf("%s [%d,+%d) is outside the file's %d bytes", what, off, n, s.size)
	}
	b := s.batch.alloc(int(n))
	if w, ok := s.win.held(off, n); ok { // read already, with the image bytes before it
		copy(b, w)
		return b, nil
	}
	if n < readAhead/2 {
		w, err := s.ahead.bytes(off, n)
		if err != nil {
			return nil, s.errorf("read %s [%d,+%d): %w", what, off, n, err)
		}
		copy(b, w)
		return b, nil
	}
	if k, err := s.r.ReadAt(b, off); int64(k) < n {
		return nil, s.errorf("read %s [%d,+%d): %w", what, off, n, cmp(err))
	}
	return b, nil
}
