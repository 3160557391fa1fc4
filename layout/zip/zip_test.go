package zip

import (
	"archive/zip"
	"bytes"
	"errors"
	"hash/crc32"
	"io"
	"strings"
	"testing"
	"time"
)

// FuzzMembers feeds arbitrary bytes to Members. It must not panic; each stored member's extent
// lies inside the input; where archive/zip reads the ZIP too, both find the same members (names,
// CRC-32s, sizes), and where it reads a member whole (its CRC-32 checked), the bytes at the
// extent are those bytes and their CRC-32/IEEE is the member's. The seeds
// (testdata/fuzz/FuzzMembers: ZIPs written by Python's zipfile, stored, ZIP64, deflated and
// streamed with data descriptors, and by Info-ZIP's zip -0, zip and zip from a pipe) run as a
// normal test.
func FuzzMembers(f *testing.F) {
	f.Add([]byte{})
	f.Add(writeZip(f, zmem{"a/b.jpg", "stored bytes", zip.Store}, zmem{"c.txt", strings.Repeat("d", 300), zip.Deflate}))
	f.Fuzz(func(t *testing.T, data []byte) {
		members, err := Members(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		zr, zerr := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		if zerr == nil || errors.Is(zerr, zip.ErrInsecurePath) {
			if len(zr.File) != len(members) {
				t.Fatalf("%d members, archive/zip reads %d", len(members), len(zr.File))
			}
			for i, f := range zr.File {
				if f.Name != members[i].Name || f.CRC32 != members[i].CRC || int64(f.UncompressedSize64) != members[i].Size {
					t.Fatalf("member %d: %+v, archive/zip reads %q (CRC-32 %08x, %d bytes)", i, members[i], f.Name, f.CRC32, f.UncompressedSize64)
				}
			}
		}
		for i, m := range members {
			if !m.Stored() {
				if m.Offset != -1 {
					t.Fatalf("%q: not stored, but an offset %d", m.Name, m.Offset)
				}
				continue
			}
			if m.Offset < 0 || m.Size < 0 || m.Offset+m.Size > int64(len(data)) {
				t.Fatalf("%q: extent [%d,+%d) outside %d bytes", m.Name, m.Offset, m.Size, len(data))
			}
			if zerr != nil && !errors.Is(zerr, zip.ErrInsecurePath) {
				continue
			}
			rc, err := zr.File[i].Open()
			if err != nil {
				continue
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				continue // archive/zip found the CRC-32 wrong, or the data short
			}
			if ext := data[m.Offset : m.Offset+m.Size]; !bytes.Equal(got, ext) || crc32.ChecksumIEEE(ext) != m.CRC {
				t.Fatalf("%q: archive/zip reads %d bytes, not the %d at [%d,+%d) (CRC-32 %08x)", m.Name, len(got), len(ext), m.Offset, m.Size, m.CRC)
			}
		}
	})
}

type zmem struct {
	name, data string
	method     uint16
}

func writeZip(t testing.TB, members ...zmem) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, m := range members {
		h := &zip.FileHeader{Name: m.name, Method: m.method, Modified: time.Unix(1700000000, 0)}
		fw, err := w.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(fw, m.data)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestMembers(t *testing.T) {
	z := writeZip(t, zmem{"a/b.jpg", "stored bytes", zip.Store}, zmem{"c.txt", strings.Repeat("d", 300), zip.Deflate},
		zmem{"dir/", "", zip.Store}, zmem{"../up", "x", zip.Store})
	members, err := Members(bytes.NewReader(z), int64(len(z)))
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 4 {
		t.Fatalf("%d members, want 4", len(members))
	}
	a, c, d, up := members[0], members[1], members[2], members[3]
	if !a.Stored() || string(z[a.Offset:a.Offset+a.Size]) != "stored bytes" || a.CRC != crc32.ChecksumIEEE([]byte("stored bytes")) || a.MTime != 1700000000e9 {
		t.Errorf("stored member %+v", a)
	}
	if c.Stored() || c.Offset != -1 || c.MethodName() != "deflated" || c.Size != 300 {
		t.Errorf("deflated member %+v", c)
	}
	if d.Type != TypeDir || d.Mode == 0 {
		t.Errorf("directory %+v", d)
	}
	if up.Name != "../up" || !up.Stored() {
		t.Errorf("a name with .. is the caller's to refuse: %+v", up)
	}
	if _, err := Members(strings.NewReader("not a zip at all"), 16); !errors.Is(err, ErrNotZip) {
		t.Errorf("Members of text = %v, want ErrNotZip", err)
	}
	if _, err := Members(bytes.NewReader(z), int64(len(z))-1); err == nil {
		t.Error("a ZIP cut by a byte read without error")
	}
	boom := errors.New("boom")
	if _, err := Members(failAt{bytes.NewReader(z), boom}, int64(len(z))); !errors.Is(err, boom) {
		t.Errorf("a read error: %v, want it wrapped", err)
	}
}

// failAt is a ReaderAt that fails every read.
type failAt struct {
	io.ReaderAt
	err error
}

func (f failAt) ReadAt([]byte, int64) (int, error) { return 0, f.err }

// TestBlockReader reads a ZIP of many small members through a counting reader: the blocks are
// read about once each.
func TestBlockReader(t *testing.T) {
	var ms []zmem
	for i := range 2000 {
		ms = append(ms, zmem{strings.Repeat("n", i%50) + string(rune('a'+i%26)) + "/" + strings.Repeat("x", 3) + string(rune('0'+i%10)) + ".bin", strings.Repeat("z", 1000+i), zip.Store})
	}
	z := writeZip(t, ms...)
	cr := &countReader{r: bytes.NewReader(z)}
	members, err := Members(cr, int64(len(z)))
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 2000 {
		t.Fatalf("%d members", len(members))
	}
	blocks := (len(z) + BlockSize - 1) / BlockSize
	if cr.n > blocks+3 {
		t.Errorf("%d reads for a ZIP of %d blocks", cr.n, blocks)
	}
}

type countReader struct {
	r io.ReaderAt
	n int
}

func (c *countReader) ReadAt(p []byte, off int64) (int, error) {
	c.n++
	return c.r.ReadAt(p, off)
}
