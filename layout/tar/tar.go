// Package tar reads tar archives (ustar, GNU, PAX, v7) member by member, giving each member's
// header and data offsets in the archive: what indexing a tar in place needs, and what
// archive/tar hides across PAX and GNU extension blocks. It knows nothing of aifs's index and
// imports only the standard library; layout/tarindex is its user.
package tar

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

const (
	tarBlock   = 512
	tarBufSize = 1 << 20 // the bufio.Reader of each Reader
	tarMaxExt  = 1 << 20 // largest PAX or GNU long-name payload, or GNU sparse map, accepted
	tarSeekMin = 1 << 20 // skips at least this long seek when the input is an io.Seeker
	// tarMaxSize bounds member sizes, so that offset + size + padding cannot overflow an int64.
	tarMaxSize = 1 << 62
)

// ErrCompressed is wrapped by the error NewReader's first Next returns for a compressed tar;
// the message names the compression. Such a tar must be decompressed before it can be indexed.
var ErrCompressed = errors.New("tar is compressed")

var tarCompressions = []struct{ magic, name string }{
	{"\x1f\x8b", "gzip"}, {"BZh", "bzip2"}, {"\xfd7zXZ\x00", "xz"},
	{"\x28\xb5\x2f\xfd", "zstd"}, {"\x04\x22\x4d\x18", "lz4"}, {"LZIP", "lzip"},
}

// Type says what a tar member is.
type Type uint8

const (
	TypeFile     Type = iota // regular file ('0', '\0', '7' contiguous file)
	TypeHardLink             // '1': Linkname names an earlier member; no data of its own
	TypeDir                  // '5', or a '\0' (or v7 '0') member whose name ends in '/'
	TypeSymlink              // '2'
	TypeOther                // devices, FIFOs, GNU 'D', 'M', 'V' and any typeflag not understood
	TypeSparse               // GNU sparse 'S', or a PAX GNU.sparse.* file: its data is not the file's bytes
)

func (t Type) String() string {
	if int(t) < len(tarTypeNames) {
		return tarTypeNames[t]
	}
	return "Type(" + strconv.Itoa(int(t)) + ")"
}

// tarTypeOf returns the type of a member of typeflag flag, before its name and PAX records have
// their say. It is a switch, not a map, hashing nothing (docs/bench/layout-notes.md#tar-header-parsing).
func tarTypeOf(flag byte) Type {
	switch flag {
	case 0, '0', '7':
		return TypeFile
	case '1':
		return TypeHardLink
	case '2':
		return TypeSymlink
	case '5':
		return TypeDir
	case 'S':
		return TypeSparse
	}
	return TypeOther
}

var tarTypeNames = []string{"file", "hard link", "directory", "symlink", "other", "sparse file"}

// Member is one member as the archive describes it. Directories, links, devices and FIFOs
// have no data: their Size is 0 whatever their header says, as for archive/tar and tarfile.
type Member struct {
	Name     string // PAX "GNU.sparse.name", else "path", else GNU long name ('L'), else ustar prefix + "/" + name; not cleaned
	Linkname string // PAX "linkpath", else GNU long link name ('K'), else the header's linkname
	Type     Type   // see Type; the type decides whether there is data
	Mode     uint32 // permission bits only (& 07777)
	MTime    int64  // nanoseconds since the Unix epoch (PAX "mtime" with its fraction, else the header's), saturating
	Size     int64  // bytes of data that follow the header in the archive (PAX "size" overrides)
	Offset   int64  // offset in the archive of the member's first data byte
	Header   int64  // offset of the member's first header block, extension blocks included
}

// Reader reads the members of an uncompressed tar sequentially. It is not safe for concurrent
// use. Errors are sticky: after one, Next and Read return it again.
//
// Formats read: v7, ustar, GNU (long names 'L'/'K', old sparse 'S' with its extension blocks)
// and PAX ('x' records apply to the next member, a later 'x' replacing an earlier; 'g' records
// apply to every later member until a later 'g' overrides or, with an empty value, removes them).
// 'g', 'x', 'L' and 'K' headers are consumed, not returned; GNU volume labels ('V') are returned
// as TypeOther. A PAX member with GNU.sparse records is TypeSparse, named by GNU.sparse.name
// where it has one (GNU tar's sparse formats 0.1 and 1.0 put a placeholder,
// "./GNUSparseFile.PID/name", in its header). The end is two zero blocks, one zero block
// followed by the end of the input, or the end of the input at a header boundary; a zero block
// followed by anything else is an error.
type Reader struct {
	r      io.Reader
	br     *bufio.Reader
	seeker io.Seeker // r, if it is one and seeking has not failed
	off    int64     // archive bytes consumed
	remain int64     // unread data of the current member
	pad    int64     // padding after it
	name   []byte    // the current member's name (Next makes Member.Name of it)
	err    error     // sticky: io.EOF at the end, or the first error
	global tarPAX    // PAX 'g' records in effect
	local  tarPAX    // PAX 'x' records for the member being read
	long   [2]string // its GNU long name ('L') and long link name ('K')
	blk    [tarBlock]byte
	ext    []byte // extension payloads, reused
}

// tarPAX holds the PAX records aifs uses; set says which are present. The GNU.sparse records
// count only in 'x' headers.
type tarPAX struct {
	path, linkpath string
	sparseName     string // GNU.sparse.name: a sparse file's name, the header's being a placeholder
	size, mtime    int64
	set            uint8
	sparse         bool // some GNU.sparse record is present: the member is a sparse file
}

const (
	paxPath = 1 << iota
	paxLinkpath
	paxSize
	paxMTime
	paxSparseName
)

// NewReader returns a reader of the tar in r. If r is an io.Seeker, large skips seek; where
// Seek fails (a pipe), they read.
func NewReader(r io.Reader) *Reader { return newReader(r, tarBufSize) }

// newReader returns a Reader with a buffer of size bytes (the fuzz test's are small).
func newReader(r io.Reader, size int) *Reader {
	t := &Reader{r: r, br: bufio.NewReaderSize(r, size)}
	t.seeker, _ = r.(io.Seeker)
	return t
}

// Reset makes t read the tar in r from its start, as NewReader(r) would, keeping t's buffers:
// one reader can read many tars in turn.
func (t *Reader) Reset(r io.Reader) {
	br, ext, name := t.br, t.ext[:0], t.name[:0]
	br.Reset(r)
	*t = Reader{r: r, br: br, ext: ext, name: name}
	t.seeker, _ = r.(io.Seeker)
}

// Offset returns the number of archive bytes consumed so far; at the end, the archive's length
// as far as it was read (the end-of-archive blocks included, anything after them not).
func (t *Reader) Offset() int64 { return t.off }

// Next advances to the next member, skipping whatever of the previous member's data was not read
// (by seeking when the input is an io.Seeker and the skip is large, else by reading). It returns
// io.EOF at the end of the archive, an error wrapping io.ErrUnexpectedEOF if the archive is
// truncated, ErrCompressed for compressed input, and otherwise an error naming the header's
// offset.
func (t *Reader) Next() (Member, error) {
	m, name, err := t.NextName()
	m.Name = string(name)
	return m, err
}

// NextName is Next leaving Member.Name empty: the name is returned as bytes that stay valid
// until the next call of Next, NextName or Reset, so that IndexTars copies the names of a tar
// end to end and makes one string of them (docs/bench/layout-notes.md#tar-header-parsing).
func (t *Reader) NextName() (Member, []byte, error) {
	if t.err != nil {
		return Member{}, nil, t.err
	}
	m, err := t.next()
	if err != nil {
		t.err, t.remain, t.pad = err, 0, 0
		return Member{}, nil, err
	}
	t.remain, t.pad = m.Size, -m.Size&(tarBlock-1)
	return m, t.name, nil
}

// Read reads the current member's data, returning io.EOF at its end, like archive/tar.Reader.
func (t *Reader) Read(p []byte) (int, error) {
	if t.err != nil || t.remain == 0 {
		return 0, cmp.Or(t.err, io.EOF)
	}
	n, err := t.br.Read(p[:min(int64(len(p)), t.remain)])
	t.off, t.remain = t.off+int64(n), t.remain-int64(n)
	if err != nil {
		t.err = t.readErr(err, fmt.Sprintf("member %q", t.name), t.off+t.remain+t.pad)
	}
	return n, t.err
}

// ReadBuffered returns the next bytes of the current member's data without copying them: those
// the reader's buffer holds (filled first if empty), up to the member's end. They stay valid
// until the next call on t. At the member's end it returns io.EOF. IndexTars checksums members
// so, without the copy Read makes (docs/bench/layout-notes.md#tar-header-parsing).
func (t *Reader) ReadBuffered() ([]byte, error) {
	if t.err != nil || t.remain == 0 {
		return nil, cmp.Or(t.err, io.EOF)
	}
	if t.br.Buffered() == 0 {
		if _, err := t.br.Peek(1); err != nil {
			t.err = t.readErr(err, fmt.Sprintf("member %q", t.name), t.off+t.remain+t.pad)
			return nil, t.err
		}
	}
	p, _ := t.br.Peek(int(min(int64(t.br.Buffered()), t.remain)))
	t.br.Discard(len(p))
	t.off, t.remain = t.off+int64(len(p)), t.remain-int64(len(p))
	return p, nil
}

// next skips the rest of the current member and reads the next one's headers, leaving t at its
// data.
func (t *Reader) next() (Member, error) {
	need := t.off + t.remain + t.pad
	if err := t.skip(t.remain + t.pad); err != nil {
		return Member{}, t.readErr(err, fmt.Sprintf("member %q", t.name), need)
	}
	m := Member{Header: t.off}
	t.local, t.long = tarPAX{}, [2]string{}
	pending := int64(-1) // the first 'x', 'L' or 'K' header before the member
	for {
		at := t.off
		if err := t.readHeader(); err == io.EOF && pending >= 0 {
			return m, fmt.Errorf("tar: the archive ends after the extension header at byte %d, without its member", pending)
		} else if err != nil {
			return m, err
		}
		var f [3]int64 // mode, size, mtime
		for i, r := range [3][2]int{{100, 108}, {124, 136}, {136, 148}} {
			var ok bool
			if f[i], ok = tarNumber(t.blk[r[0]:r[1]]); !ok {
				return m, fmt.Errorf("tar: header at byte %d: invalid %s field %q", at, [3]string{"mode", "size", "mtime"}[i], t.blk[r[0]:r[1]])
			}
		}
		if f[1] < 0 || f[1] > tarMaxSize {
			return m, fmt.Errorf("tar: header at byte %d: invalid size %d", at, f[1])
		}
		flag := t.blk[156]
		if flag == 'x' || flag == 'g' || flag == 'L' || flag == 'K' {
			if err := t.readExt(flag, f[1], at); err != nil {
				return m, err
			}
			if pending < 0 && flag != 'g' {
				pending = at
			}
			continue
		}
		m.Mode, m.MTime, m.Size = uint32(f[0]&0o7777), tarNanos(f[2], 0), f[1]
		if v, ok := t.local.pick(&t.global, paxMTime); ok {
			m.MTime = v.mtime
		}
		if v, ok := t.local.pick(&t.global, paxSize); ok {
			m.Size = v.size
		}
		if t.local.set&paxSparseName != 0 {
			t.name = append(t.name[:0], t.local.sparseName...)
		} else if v, ok := t.local.pick(&t.global, paxPath); ok {
			t.name = append(t.name[:0], v.path...)
		} else if t.long[0] != "" {
			t.name = append(t.name[:0], t.long[0]...)
		} else {
			t.name = appendTarName(t.name[:0], &t.blk)
		}
		if v, ok := t.local.pick(&t.global, paxLinkpath); ok {
			m.Linkname = v.linkpath
		} else if m.Linkname = t.long[1]; m.Linkname == "" {
			m.Linkname = string(tarString(t.blk[157:257]))
		}
		v7 := string(t.blk[257:263]) != "ustar\x00" && string(t.blk[257:265]) != "ustar  \x00"
		m.Type = tarTypeOf(flag)
		switch {
		case (flag == 0 || flag == '0' && v7) && bytes.HasSuffix(t.name, []byte("/")):
			m.Type = TypeDir
		case m.Type == TypeFile && t.local.sparse:
			m.Type = TypeSparse
		case flag == 'S':
			if err := t.skipSparseMap(at); err != nil { // overwrites t.blk
				return m, err
			}
		}
		if m.Type == TypeDir || flag >= '1' && flag <= '6' {
			m.Size = 0 // header-only types: archive/tar and tarfile ignore their size too
		}
		m.Offset = t.off
		return m, nil
	}
}

// readHeader reads the next header block into t.blk and checks it. It returns io.EOF at the end
// of the archive.
func (t *Reader) readHeader() error {
	at := t.off
	n, err := t.read(t.blk[:])
	if n == 0 && err == io.EOF {
		return io.EOF
	}
	if err == nil && isZeroBlock(t.blk[:]) {
		n, err = t.read(t.blk[:])
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			return t.readErr(err, "end of archive", at+2*tarBlock)
		}
		if !isZeroBlock(t.blk[:n]) {
			return fmt.Errorf("tar: header at byte %d: data follows the end-of-archive block at byte %d", at+tarBlock, at)
		}
		return io.EOF
	}
	stored, ok := tarNumber(t.blk[148:156])
	unsigned := tarChecksum(&t.blk)
	if err == nil && ok && (stored == unsigned || stored == tarSignedChecksum(&t.blk)) {
		return nil
	}
	for _, c := range tarCompressions { // a short or bad first block may be a compressed tar
		if at == 0 && bytes.HasPrefix(t.blk[:n], []byte(c.magic)) {
			return fmt.Errorf("tar: compressed with %s: %w", c.name, ErrCompressed)
		}
	}
	if err != nil {
		return t.readErr(err, fmt.Sprintf("header at byte %d", at), at+tarBlock)
	}
	return fmt.Errorf("tar: header at byte %d: checksum mismatch (stored %q, computed %o): not a tar, or corrupt",
		at, tarString(t.blk[148:156]), unsigned)
}

// readExt reads the payload of the extension header at byte at, of type flag and size bytes, and
// applies it: PAX records to t.local or t.global, GNU long names to t.long.
func (t *Reader) readExt(flag byte, size, at int64) error {
	if size > tarMaxExt {
		return fmt.Errorf("tar: %q header at byte %d: payload of %d bytes is over the %d accepted", flag, at, size, tarMaxExt)
	}
	padded := size + -size&(tarBlock-1)
	if int64(cap(t.ext)) < padded {
		t.ext = make([]byte, padded)
	}
	if _, err := t.read(t.ext[:padded]); err != nil {
		return t.readErr(err, fmt.Sprintf("%q header at byte %d", flag, at), at+tarBlock+padded)
	}
	var err error
	switch p := t.ext[:size]; flag {
	case 'x':
		t.local = tarPAX{} // a later 'x' replaces an earlier, as in archive/tar
		err = t.local.parse(p, false)
	case 'g':
		err = t.global.parse(p, true)
	case 'L', 'K':
		t.long[strings.IndexByte("LK", flag)] = string(tarString(p))
	}
	if err != nil {
		return fmt.Errorf("tar: header at byte %d: %w", at, err)
	}
	return nil
}

// skipSparseMap skips the extension blocks of the old GNU sparse header at byte at, in t.blk.
func (t *Reader) skipSparseMap(at int64) error {
	if string(t.blk[257:265]) != "ustar  \x00" {
		return nil // not GNU: no extension blocks that we know of
	}
	for ext := t.blk[482]; ext != 0; ext = t.blk[504] {
		if t.off-at > tarMaxExt {
			return fmt.Errorf("tar: sparse header at byte %d: sparse map is over %d bytes", at, tarMaxExt)
		}
		if _, err := t.read(t.blk[:]); err != nil {
			return t.readErr(err, fmt.Sprintf("sparse header at byte %d", at), t.off-t.off%tarBlock+tarBlock)
		}
	}
	return nil
}

// read reads len(p) archive bytes, fewer only with an error.
func (t *Reader) read(p []byte) (int, error) {
	n, err := io.ReadFull(t.br, p)
	t.off += int64(n)
	return n, err
}

// skip discards n archive bytes, seeking if it can and n is large. At the end of the input it
// returns io.ErrUnexpectedEOF, with t.off at the end.
func (t *Reader) skip(n int64) error {
	if b := int64(t.br.Buffered()); t.seeker != nil && n-b >= tarSeekMin {
		pos, err := t.seeker.Seek(0, io.SeekCurrent)
		if err != nil {
			t.seeker = nil // not seekable after all: read instead
			return t.skip(n)
		}
		end, err := t.seeker.Seek(0, io.SeekEnd)
		if err == nil && pos-b+n > end {
			t.off += b + max(end-pos, 0)
			return io.ErrUnexpectedEOF
		}
		if err == nil {
			_, err = t.seeker.Seek(pos-b+n, io.SeekStart)
		}
		if err != nil {
			return fmt.Errorf("seek: %w", err)
		}
		t.br.Reset(t.r)
		t.off += n
		return nil
	}
	for n > 0 {
		k, err := t.br.Discard(int(min(n, 1<<30)))
		t.off += int64(k)
		n -= int64(k)
		if err != nil {
			return err
		}
	}
	return nil
}

// readErr describes err, met while reading what, which ends at byte need: the end of the input
// there means that the archive is truncated.
func (t *Reader) readErr(err error, what string, need int64) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return fmt.Errorf("tar: truncated: %s needs bytes up to %d, the archive ends at %d: %w",
			what, need, t.off, io.ErrUnexpectedEOF)
	}
	return fmt.Errorf("tar: read %s at byte %d: %w", what, t.off, err)
}
