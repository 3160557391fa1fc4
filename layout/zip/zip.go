// Package zip reads the central directory of a ZIP file and says where each member's bytes lie,
// so that the ZIP's stored members can be served in place: ZIP64 (sizes, offsets and counts past
// 32 bits), data descriptors (the central directory has the sizes), and the local header that
// fixes where a member's data starts. It imports only the standard library. It reads the records
// itself, keeping nothing per member but a Member (archive/zip keeps an object of 300 bytes and
// more, and reads each local header apart: docs/bench/README.md#zips-indexed-in-place-aifs-index-issue-49-2026-11-28);
// its fuzz test holds it to archive/zip's reading.
//
// Only a member stored without compression (method 0) and not encrypted has its bytes in the
// ZIP as they are: Stored reports it, and Offset is then where they start. The CRC-32 of the
// central directory is the CRC-32/IEEE of exactly those bytes.
//
// Members reads the ZIP through an io.ReaderAt in blocks (BlockSize), from the central directory
// at its end, then each stored member's local header in central directory order (the order
// writers put the members in): a ZIP of many small members costs about one pass over it, one of
// large members a block per member.
package zip

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// ErrNotZip is wrapped by the error of Members for bytes that hold no ZIP end record.
var ErrNotZip = errors.New("not a ZIP file (no end of central directory record)")

// Type is what a member is.
type Type uint8

const (
	TypeFile    Type = iota // a regular file
	TypeDir                 // a directory (a name ending in "/")
	TypeSymlink             // a symbolic link (Unix mode in the external attributes)
	TypeOther               // a device, FIFO or socket
)

// Member is one entry of the central directory.
type Member struct {
	Name      string // as stored: '/'-separated, maybe with "./", ".." or a leading "/"
	Type      Type
	Mode      uint32 // permission bits (0644 or 0755 when the ZIP records none)
	MTime     int64  // nanoseconds since the Unix epoch
	Method    uint16 // 0 stored, 8 deflated, ...
	Encrypted bool
	Size      int64  // uncompressed
	CRC       uint32 // CRC-32/IEEE of the uncompressed bytes
	Offset    int64  // where its data starts; set for Stored members only, else -1
}

// Stored reports whether m's bytes lie in the ZIP as they are: a file, stored, not encrypted.
func (m Member) Stored() bool { return m.Type == TypeFile && m.Method == methodStore && !m.Encrypted }

// MethodName names m's compression method, for a message.
func (m Member) MethodName() string {
	switch {
	case m.Encrypted:
		return "encrypted"
	case m.Method == methodStore:
		return "stored"
	case m.Method == 8:
		return "deflated"
	case m.Method == 9:
		return "deflate64"
	case m.Method == 12:
		return "bzip2"
	case m.Method == 14:
		return "LZMA"
	case m.Method == 93:
		return "zstd"
	}
	return fmt.Sprintf("compression method %d", m.Method)
}

// BlockSize is the unit in which Members reads the ZIP.
const BlockSize = 256 << 10

// The records of the ZIP format (APPNOTE.TXT) that Members reads, by signature and fixed size.
const (
	methodStore = 0

	sigLocal      = 0x04034b50
	sigCentral    = 0x02014b50
	sigEnd        = 0x06054b50
	sigEnd64      = 0x06064b50
	sigEnd64Loc   = 0x07064b50
	localLen      = 30
	centralLen    = 46
	endLen        = 22
	end64Len      = 56
	end64LocLen   = 20
	maxCommentLen = 1<<16 - 1

	extraZip64     = 0x0001
	extraTimestamp = 0x5455 // Info-ZIP's extended timestamp: the mtime in Unix seconds
)

var le = binary.LittleEndian

// Members returns the members of the ZIP r of size bytes in central directory order. A ZIP whose
// central directory cannot be found is an error wrapping ErrNotZip; a record cut short or out of
// the file, a stored member whose data would run past the end of the ZIP or whose compressed and
// uncompressed sizes differ, and a read error of r are errors too.
func Members(r io.ReaderAt, size int64) ([]Member, error) {
	br := &blockReader{r: r, size: size}
	dirOff, dirSize, records, err := findDirectory(br, size)
	if err != nil {
		return nil, err
	}
	if records > dirSize/centralLen {
		return nil, fmt.Errorf("the central directory of %d bytes cannot hold %d records", dirSize, records)
	}
	members := make([]Member, 0, records)
	var names []byte
	nameEnds := make([]int, 0, records)
	off := dirOff
	var rec [centralLen]byte
	var vari []byte // the name, extra field and comment of a record
	// the last MS-DOS date and time converted: most members share one
	var (
		dosStamp uint32
		dosTime  int64
		dosKnown bool
	)
	for range records {
		if err := readFull(br, rec[:], off); err != nil {
			return nil, fmt.Errorf("central directory record at byte %d: %w", off, err)
		}
		if le.Uint32(rec[:]) != sigCentral {
			return nil, fmt.Errorf("central directory record at byte %d: bad signature", off)
		}
		nameLen, extraLen, commentLen := int(le.Uint16(rec[28:])), int(le.Uint16(rec[30:])), int(le.Uint16(rec[32:]))
		n := nameLen + extraLen + commentLen
		if cap(vari) < n {
			vari = make([]byte, n)
		}
		vari = vari[:n]
		if err := readFull(br, vari, off+centralLen); err != nil {
			return nil, fmt.Errorf("central directory record at byte %d: %w", off, err)
		}
		off += centralLen + int64(n)
		name, extra := vari[:nameLen], vari[nameLen:nameLen+extraLen]
		m := Member{Method: le.Uint16(rec[10:]), Encrypted: le.Uint16(rec[8:])&1 != 0, CRC: le.Uint32(rec[16:]), Offset: -1}
		comp, uncomp, header := uint64(le.Uint32(rec[20:])), uint64(le.Uint32(rec[24:])), uint64(le.Uint32(rec[42:]))
		if stamp := le.Uint32(rec[12:]); stamp != dosStamp || !dosKnown {
			dosStamp, dosTime, dosKnown = stamp, msDosTime(le.Uint16(rec[14:]), le.Uint16(rec[12:])), true
		}
		mtime := dosTime
		for len(extra) >= 4 {
			id, n := le.Uint16(extra), int(le.Uint16(extra[2:]))
			if n > len(extra)-4 {
				break
			}
			field := extra[4 : 4+n]
			extra = extra[4+n:]
			switch id {
			case extraZip64: // each 64-bit value present only where the 32-bit field is full
				for _, v := range []*uint64{&uncomp, &comp, &header} {
					if *v == 0xffffffff && len(field) >= 8 {
						*v, field = le.Uint64(field), field[8:]
					}
				}
			case extraTimestamp:
				if len(field) >= 5 && field[0]&1 != 0 {
					mtime = int64(int32(le.Uint32(field[1:]))) * 1e9
				}
			}
		}
		m.MTime = mtime
		m.Type, m.Mode = fileType(le.Uint16(rec[4:])>>8, le.Uint32(rec[38:]), name)
		if uncomp > 1<<62 || comp > 1<<62 || header > 1<<62 {
			return nil, fmt.Errorf("member %q: sizes or offset out of range", name)
		}
		m.Size = int64(uncomp)
		if m.Stored() {
			if comp != uncomp {
				return nil, fmt.Errorf("member %q is stored but its sizes differ (%d compressed, %d not)", name, comp, uncomp)
			}
			if m.Offset, err = dataOffset(br, int64(header)); err != nil {
				return nil, fmt.Errorf("member %q: %w", name, err)
			}
			if m.Offset > size || m.Size > size-m.Offset {
				return nil, fmt.Errorf("member %q: its %d bytes at offset %d run past the end of the %d-byte ZIP", name, m.Size, m.Offset, size)
			}
		}
		names = append(names, name...)
		nameEnds = append(nameEnds, len(names))
		members = append(members, m)
	}
	all, start := string(names), 0 // one string for every name
	for i := range members {
		members[i].Name = all[start:nameEnds[i]]
		start = nameEnds[i]
	}
	return members, nil
}

// readFull reads len(p) bytes at off, a short read being an error.
func readFull(r io.ReaderAt, p []byte, off int64) error {
	if _, err := r.ReadAt(p, off); err != nil {
		if err == io.EOF {
			return io.ErrUnexpectedEOF
		}
		return err
	}
	return nil
}

// findDirectory finds the end of central directory record (and its ZIP64 form) and returns
// where the central directory lies and its number of records.
func findDirectory(r *blockReader, size int64) (off, dirSize, records int64, err error) {
	tailLen := min(size, endLen+maxCommentLen)
	tail := make([]byte, tailLen)
	if err := readFull(r, tail, size-tailLen); err != nil {
		return 0, 0, 0, err
	}
	at := -1
	for i := len(tail) - endLen; i >= 0; i-- { // the last end record whose comment fits
		if le.Uint32(tail[i:]) == sigEnd && i+endLen+int(le.Uint16(tail[i+20:])) <= len(tail) {
			at = i
			break
		}
	}
	if at < 0 {
		return 0, 0, 0, ErrNotZip
	}
	end := tail[at:]
	endOff := size - tailLen + int64(at)
	records, dirSize, off = int64(le.Uint16(end[10:])), int64(le.Uint32(end[12:])), int64(le.Uint32(end[16:]))
	if records == 0xffff || dirSize == 0xffffffff || off == 0xffffffff {
		if off, dirSize, records, err = findDirectory64(r, endOff); err != nil {
			return 0, 0, 0, err
		}
	}
	if off < 0 || dirSize < 0 || records < 0 || off > size || dirSize > size-off {
		return 0, 0, 0, fmt.Errorf("the central directory [%d,+%d) lies outside the %d-byte ZIP", off, dirSize, size)
	}
	return off, dirSize, records, nil
}

// findDirectory64 reads the ZIP64 end of central directory locator before endOff, and the record
// it points to.
func findDirectory64(r *blockReader, endOff int64) (off, dirSize, records int64, err error) {
	var loc [end64LocLen]byte
	if endOff < end64LocLen {
		return 0, 0, 0, errors.New("no ZIP64 end of central directory locator")
	}
	if err := readFull(r, loc[:], endOff-end64LocLen); err != nil {
		return 0, 0, 0, err
	}
	if le.Uint32(loc[:]) != sigEnd64Loc {
		return 0, 0, 0, errors.New("no ZIP64 end of central directory locator")
	}
	var rec [end64Len]byte
	at := le.Uint64(loc[8:])
	if at > 1<<62 {
		return 0, 0, 0, errors.New("the ZIP64 end of central directory lies out of range")
	}
	if err := readFull(r, rec[:], int64(at)); err != nil {
		return 0, 0, 0, fmt.Errorf("ZIP64 end of central directory: %w", err)
	}
	if le.Uint32(rec[:]) != sigEnd64 {
		return 0, 0, 0, errors.New("ZIP64 end of central directory: bad signature")
	}
	n, s, o := le.Uint64(rec[32:]), le.Uint64(rec[40:]), le.Uint64(rec[48:])
	if n > 1<<62 || s > 1<<62 || o > 1<<62 {
		return 0, 0, 0, errors.New("ZIP64 end of central directory: counts out of range")
	}
	return int64(o), int64(s), int64(n), nil
}

// dataOffset reads the local header at off and returns where the member's data starts.
func dataOffset(r io.ReaderAt, off int64) (int64, error) {
	var h [localLen]byte
	if err := readFull(r, h[:], off); err != nil {
		return 0, fmt.Errorf("local header at byte %d: %w", off, err)
	}
	if le.Uint32(h[:]) != sigLocal {
		return 0, fmt.Errorf("local header at byte %d: bad signature", off)
	}
	return off + localLen + int64(le.Uint16(h[26:])) + int64(le.Uint16(h[28:])), nil
}

// fileType decodes a member's type and permission bits from the system that made it (the high
// byte of "version made by") and its external attributes, as archive/zip does: Unix modes
// (Unix, macOS), MS-DOS attributes (FAT, NTFS, VFAT), and a name ending in "/" for a directory.
func fileType(creator uint16, attrs uint32, name []byte) (Type, uint32) {
	t, mode := TypeFile, uint32(0)
	switch creator {
	case 3, 19: // Unix, macOS
		m := attrs >> 16
		mode = m & 0o777
		switch m & 0o170000 {
		case 0o040000:
			t = TypeDir
		case 0o120000:
			t = TypeSymlink
		case 0o020000, 0o060000, 0o010000, 0o140000:
			t = TypeOther
		}
	case 0, 11, 14: // FAT, NTFS, VFAT
		mode = 0o666
		if attrs&0x01 != 0 {
			mode = 0o444
		}
		if attrs&0x10 != 0 {
			t, mode = TypeDir, mode|0o111
		}
	}
	if len(name) > 0 && name[len(name)-1] == '/' {
		t = TypeDir
	}
	if mode == 0 {
		mode = 0o644
		if t == TypeDir {
			mode = 0o755
		}
	}
	return t, mode
}

// msDosTime converts an MS-DOS date and time (local time of an unknown zone, taken as UTC, as
// archive/zip does) to nanoseconds since the Unix epoch.
func msDosTime(date, clock uint16) int64 {
	return time.Date(int(date>>9)+1980, time.Month(date>>5&0xf), int(date&0x1f),
		int(clock>>11), int(clock>>5&0x3f), int(clock&0x1f)*2, 0, time.UTC).UnixNano()
}
