// Package zip reads the central directory of a ZIP file and says where each member's bytes lie,
// so that the ZIP's stored members can be served in place. It wraps the standard library's
// archive/zip (ZIP64, data descriptors, the local header that fixes where a member's data
// starts) and imports nothing else.
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
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"io/fs"
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
func (m Member) Stored() bool { return m.Type == TypeFile && m.Method == zip.Store && !m.Encrypted }

// MethodName names m's compression method, for a message.
func (m Member) MethodName() string {
	switch {
	case m.Encrypted:
		return "encrypted"
	case m.Method == zip.Store:
		return "stored"
	case m.Method == zip.Deflate:
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

// Members returns the members of the ZIP r of size bytes in central directory order. A stored
// member whose data would run past the end of the ZIP, or whose compressed and uncompressed
// sizes differ, is an error; so is a local header that cannot be read.
func Members(r io.ReaderAt, size int64) ([]Member, error) {
	br := &blockReader{r: r, size: size}
	zr, err := zip.NewReader(br, size)
	if errors.Is(err, zip.ErrFormat) && br.err == nil {
		return nil, fmt.Errorf("%w: %w", ErrNotZip, err)
	}
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) { // names are the caller's to clean
		if br.err != nil {
			return nil, br.err
		}
		return nil, err
	}
	members := make([]Member, len(zr.File))
	stored := make([]int, 0, len(zr.File))
	for i, f := range zr.File {
		m := Member{Name: f.Name, Method: f.Method, Encrypted: f.Flags&1 != 0, Size: int64(f.UncompressedSize64),
			CRC: f.CRC32, Offset: -1, MTime: f.Modified.UnixNano()}
		if f.Modified.IsZero() {
			m.MTime = 0
		}
		mode := f.Mode()
		switch {
		case mode.IsDir():
			m.Type, m.Mode = TypeDir, uint32(mode.Perm())
		case mode&fs.ModeSymlink != 0:
			m.Type = TypeSymlink
		case mode&(fs.ModeDevice|fs.ModeNamedPipe|fs.ModeSocket|fs.ModeCharDevice) != 0:
			m.Type = TypeOther
		default:
			m.Mode = uint32(mode.Perm())
		}
		if m.Mode == 0 {
			m.Mode = 0o644
			if m.Type == TypeDir {
				m.Mode = 0o755
			}
		}
		if m.Stored() {
			if f.CompressedSize64 != f.UncompressedSize64 {
				return nil, fmt.Errorf("member %q is stored but its sizes differ (%d compressed, %d not)", f.Name, f.CompressedSize64, f.UncompressedSize64)
			}
			stored = append(stored, i)
		}
		members[i] = m
	}
	// Local headers in central directory order: writers write it in the order of the members,
	// so the blocks read are read once.
	for _, i := range stored {
		f, m := zr.File[i], &members[i]
		off, err := f.DataOffset()
		if err != nil {
			if br.err != nil {
				return nil, br.err
			}
			return nil, fmt.Errorf("member %q: local header: %w", f.Name, err)
		}
		m.Offset = off
		if off < 0 || off > size || m.Size > size-off {
			return nil, fmt.Errorf("member %q: its %d bytes at offset %d run past the end of the %d-byte ZIP", f.Name, m.Size, off, size)
		}
	}
	return members, nil
}
