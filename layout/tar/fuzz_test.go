package tar

import (
	"archive/tar"
	"bytes"
	"io"
	"strings"
	"testing"
)

// FuzzTarReader feeds arbitrary bytes to Reader. It must not panic and must end; each member
// it returns starts after the last one, and once its data has been read in full (by Read or ReadBuffered), that data is
// the input's bytes at [Offset, Offset+Size). Where archive/tar also reads a regular file, the
// two agree on its name and size. The seeds (testdata/fuzz/FuzzTarReader: small archives written
// by GNU tar, bsdtar and Python's tarfile in each format) run as a normal test.
func FuzzTarReader(f *testing.F) {
	f.Add([]byte{})
	f.Add(tarJoin(tarExt('g', paxRecords("mtime", "1.5")), tarExt('x', paxRecords("path", "p", "size", "3")),
		tarHeader("f", '0', 0, "ustar"), tarPadded("abc"), tarExt('L', "long\x00"), tarHeader("g", '0', 1, "gnu"), tarPadded("x")))
	f.Fuzz(func(t *testing.T, data []byte) {
		// A small buffer, of a size that varies, runs faster and moves the buffer's edges around.
		tr := newReader(bytes.NewReader(data), 64<<(len(data)%7))
		var members []Member
		for i := 0; ; i++ {
			m, err := tr.Next()
			if err != nil {
				break
			}
			if i > len(data)/tarBlock {
				t.Fatalf("member %d from %d bytes", i, len(data))
			}
			if prev := members[max(len(members)-1, 0):]; m.Size < 0 || m.Offset < m.Header+tarBlock ||
				len(prev) > 0 && m.Header < prev[0].Offset+prev[0].Size {
				t.Fatalf("member %d: %+v after %+v", i, m, members)
			}
			if i%3 != 2 { // leave every third member's data for Next to skip
				got, err := readMemberData(tr, i%3 == 1)
				if err == nil && (m.Offset+m.Size > int64(len(data)) || !bytes.Equal(got, data[m.Offset:m.Offset+m.Size])) {
					t.Fatalf("%q: read %d bytes, not those at [%d,+%d) of %d", m.Name, len(got), m.Offset, m.Size, len(data))
				}
			}
			members = append(members, m)
		}
		compareArchiveTar(t, data, members)
	})
}

// readMemberData reads the rest of the current member's data with Read, or ReadBuffered.
func readMemberData(tr *Reader, buffered bool) ([]byte, error) {
	if !buffered {
		return io.ReadAll(tr)
	}
	var got []byte
	for {
		p, err := tr.ReadBuffered()
		got = append(got, p...)
		if err == io.EOF {
			return got, nil
		}
		if err != nil {
			return got, err
		}
	}
}

// compareArchiveTar checks members against archive/tar's reading of data, as far as both read it
// and their rules agree: archive/tar does not apply PAX global headers, lets a GNU long name beat
// a PAX path, and reads some malformed GNU headers' atime and ctime as a ustar prefix.
func compareArchiveTar(t *testing.T, data []byte, members []Member) {
	oracle := tar.NewReader(bytes.NewReader(data))
	for _, m := range members {
		h, err := oracle.Next()
		if err != nil || h.Typeflag == tar.TypeXGlobalHeader {
			return
		}
		if m.Type == TypeDir && h.Typeflag == tar.TypeReg {
			return // a v7 "name/" of type '0': archive/tar reads it as a file with data
		}
		if m.Type != TypeFile {
			continue
		}
		if h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeCont || h.Size != m.Size {
			t.Fatalf("%q: %v of size %d; archive/tar says type %q size %d", m.Name, m.Type, m.Size, h.Typeflag, h.Size)
		}
		gnu := string(data[m.Offset-tarBlock+257:m.Offset-tarBlock+265]) == "ustar  \x00"
		switch {
		case h.Name == m.Name:
		case h.PAXRecords["path"] != "" && h.Name != h.PAXRecords["path"]:
		case gnu && strings.HasSuffix(h.Name, "/"+m.Name):
		default:
			t.Fatalf("name %q; archive/tar says %q", m.Name, h.Name)
		}
	}
}
