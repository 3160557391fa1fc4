package tar

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aifs/aifs/internal/testenv"
)

// tarEntry is one path of the tree the tool tests archive, as the archive should describe it.
type tarEntry struct {
	name   string
	typ    Type
	mode   uint32 // permission bits (not checked for symlinks)
	data   []byte // files
	target string // symlinks and hard links
}

var (
	tarN99    = strings.Repeat("e", 95) + ".txt"
	tarN100   = strings.Repeat("a", 96) + ".txt"
	tarN101   = strings.Repeat("b", 97) + ".txt"
	tarD155   = "dir/" + strings.Repeat("c", 150)                 // a directory; 155 bytes with its slash
	tarL255   = tarD155 + "/" + strings.Repeat("d", 96) + ".bin"  // ustar can split it: 154 + 100
	tarL309   = tarD155 + "/" + strings.Repeat("f", 150) + ".bin" // no ustar split
	tarTarget = strings.Repeat("g", 120)                          // a symlink target over ustar's 100
)

// tarTree builds the tree that the tool tests archive, in archive order: every member type, names
// at the format limits, and big.bin, large enough that skipping it seeks.
func tarTree(t *testing.T) (string, []tarEntry) {
	rng := rand.New(rand.NewSource(1))
	big := make([]byte, 5<<19+77)
	rng.Read(big)
	small := []byte("hello, tar\n")
	ents := []tarEntry{
		{name: "small.txt", typ: TypeFile, mode: 0o640, data: small},
		{name: "empty", typ: TypeFile, mode: 0o600, data: []byte{}},
		{name: tarN99, typ: TypeFile, mode: 0o644, data: []byte("99\n")},
		{name: tarN100, typ: TypeFile, mode: 0o644, data: []byte("100\n")},
		{name: tarN101, typ: TypeFile, mode: 0o644, data: []byte("101\n")},
		{name: "dir", typ: TypeDir, mode: 0o750},
		{name: tarD155, typ: TypeDir, mode: 0o755},
		{name: tarL255, typ: TypeFile, mode: 0o644, data: bytes.Repeat([]byte("255"), 700)},
		{name: tarL309, typ: TypeFile, mode: 0o644, data: []byte("309\n")},
		{name: "link", typ: TypeSymlink, target: "small.txt"},
		{name: "longlink", typ: TypeSymlink, target: tarTarget},
		{name: "hard.txt", typ: TypeHardLink, mode: 0o640, target: "small.txt"},
		{name: "big.bin", typ: TypeFile, mode: 0o755, data: big},
		{name: "ünïcødé-名前.txt", typ: TypeFile, mode: 0o644, data: []byte("utf-8\n")},
	}
	dir := t.TempDir()
	mtime := time.Unix(1700000000, 123456789)
	for _, e := range ents {
		p := filepath.Join(dir, e.name)
		var err error
		switch e.typ {
		case TypeFile:
			err = os.WriteFile(p, e.data, 0o600)
		case TypeDir:
			err = os.Mkdir(p, 0o700)
		case TypeSymlink:
			err = os.Symlink(e.target, p)
		case TypeHardLink:
			err = os.Link(filepath.Join(dir, e.target), p)
		}
		if err == nil && e.typ != TypeSymlink {
			err = os.Chmod(p, os.FileMode(e.mode))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := len(ents) - 1; i >= 0; i-- { // children first, so that directory times stay
		if ents[i].typ != TypeSymlink {
			if err := os.Chtimes(filepath.Join(dir, ents[i].name), mtime, mtime); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir, ents
}

// tarHolds says whether an archive in format can hold e (GNU tar and bsdtar refuse the others, or
// for link targets silently truncate them).
func tarHolds(format string, e tarEntry) bool {
	name := e.name
	if e.typ == TypeDir {
		name += "/"
	}
	if len(e.target) > 100 && (format == "v7" || format == "ustar") {
		return false
	}
	switch format {
	case "v7":
		return len(name) <= 99
	case "ustar": // up to 100 bytes, or split at a slash into a prefix of up to 155 and a name of up to 100
		for i := 0; i < len(name) && len(name) > 100; i++ {
			if name[i] == '/' && i <= 155 && len(name)-i-1 <= 100 && len(name)-i-1 > 0 {
				return true
			}
		}
		return len(name) <= 100
	}
	return true
}

// tarTool runs a tar writer; the tests need GNU tar, bsdtar and python3.
func tarTool(t *testing.T, dir string, name string, args ...string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		testenv.Need(t, name+" (apt-get install tar python3 libarchive-tools)")
		t.Fatalf("%s not found: the tar tests need GNU tar, python3 and bsdtar (apt-get install tar python3 libarchive-tools)", name)
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8") // names are UTF-8
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

const tarPython = `
import sys, tarfile
fmt = {"pax": tarfile.PAX_FORMAT, "gnu": tarfile.GNU_FORMAT}[sys.argv[2]]
with tarfile.open(sys.argv[1], "w", format=fmt, encoding="utf-8") as tf:
    for name in sys.argv[3:]:
        tf.add(name, recursive=False)
`

// TestTarToolArchives reads archives written by GNU tar, bsdtar and Python's tarfile in each of
// their formats, checking every member against the source tree and against archive/tar.
func TestTarToolArchives(t *testing.T) {
	if out, err := exec.Command("tar", "--version").Output(); err != nil || !bytes.Contains(out, []byte("GNU tar")) {
		t.Fatalf("tar is not GNU tar (%v): the tar tests need it (apt-get install tar)", err)
	}
	type writer struct {
		name, format string // format: the closest GNU tar format, for tarHolds
		cmd          func(out string, names []string) []string
	}
	var writers []writer
	for _, f := range []string{"gnu", "oldgnu", "pax", "ustar", "v7"} {
		writers = append(writers, writer{"gnutar-" + f, f, func(out string, names []string) []string {
			return append([]string{"tar", "--format=" + f, "-cf", out, "--no-recursion"}, names...)
		}})
	}
	for f, format := range map[string]string{"default": "pax", "ustar": "ustar", "pax": "pax", "gnutar": "gnu"} {
		writers = append(writers, writer{"bsdtar-" + f, format, func(out string, names []string) []string {
			cmd := []string{"bsdtar", "-cf", out, "-n"}
			if f != "default" {
				cmd = append(cmd, "--format", f)
			}
			return append(cmd, names...)
		}})
	}
	for _, f := range []string{"pax", "gnu"} {
		writers = append(writers, writer{"python-" + f, f, func(out string, names []string) []string {
			return append([]string{"/usr/bin/python3", "-c", tarPython, out, f}, names...)
		}})
	}
	for _, w := range writers {
		t.Run(w.name, func(t *testing.T) {
			dir, ents := tarTree(t)
			var want []tarEntry
			var names []string
			for _, e := range ents {
				if tarHolds(w.format, e) {
					want = append(want, e)
					names = append(names, e.name)
				}
			}
			out := filepath.Join(t.TempDir(), "out.tar")
			cmd := w.cmd(out, names)
			tarTool(t, dir, cmd[0], cmd[1:]...)
			checkToolArchive(t, out, want)
		})
	}
}

// checkToolArchive reads the archive at path three ways (seeking past data, reading all data
// through a non-seekable reader, and archive/tar) and checks each member against want.
func checkToolArchive(t *testing.T, path string, want []tarEntry) {
	archive, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seeker := &seekCounter{ReadSeeker: f}
	members := readTarMembers(t, seeker, nil)
	if seeker.seeks == 0 {
		t.Errorf("no Seek while skipping big.bin")
	}
	streamed := readTarMembers(t, struct{ io.Reader }{bytes.NewReader(archive)}, archive)
	if fmt.Sprint(streamed) != fmt.Sprint(members) {
		t.Errorf("reading data changed the members:\n%v\n%v", streamed, members)
	}
	oracle := tar.NewReader(bytes.NewReader(archive))
	for _, m := range members {
		h, err := oracle.Next()
		for err == nil && h.Typeflag == tar.TypeXGlobalHeader {
			h, err = oracle.Next()
		}
		if err != nil {
			t.Fatalf("archive/tar at %q: %v", m.Name, err)
		}
		size, typ := h.Size, map[byte]Type{tar.TypeReg: TypeFile, tar.TypeLink: TypeHardLink, tar.TypeSymlink: TypeSymlink, tar.TypeDir: TypeDir}[h.Typeflag]
		if typ != TypeFile {
			size = 0
		}
		w := Member{Name: h.Name, Linkname: h.Linkname, Type: typ, Mode: uint32(h.Mode & 0o7777), MTime: h.ModTime.UnixNano(), Size: size, Offset: m.Offset, Header: m.Header}
		if m != w {
			t.Errorf("member differs from archive/tar's:\n got %+v\nwant %+v", m, w)
		}
	}
	if h, err := oracle.Next(); err != io.EOF {
		t.Errorf("archive/tar has more members: %v, %v", h, err)
	}
	if len(members) != len(want) {
		t.Errorf("%d members, want %d", len(members), len(want))
	}
	for i := 0; i < min(len(members), len(want)); i++ {
		m, e := members[i], want[i]
		name := strings.TrimSuffix(m.Name, "/")
		if name != e.name || m.Type != e.typ || m.Linkname != e.target || m.Size != int64(len(e.data)) {
			t.Errorf("member %d: %q %v size %d link %q; want %q %v size %d link %q", i, name, m.Type, m.Size, m.Linkname, e.name, e.typ, len(e.data), e.target)
		}
		if e.typ != TypeSymlink && m.Mode != e.mode {
			t.Errorf("%q: mode %#o, want %#o", e.name, m.Mode, e.mode)
		}
		if e.typ != TypeSymlink && m.MTime/1e9 != 1700000000 { // os.Chtimes follows symlinks
			t.Errorf("%q: mtime %d", e.name, m.MTime)
		}
		if m.Offset+m.Size > int64(len(archive)) || !bytes.Equal(archive[m.Offset:m.Offset+m.Size], e.data) {
			t.Errorf("%q: bytes at [%d,+%d) are not its content", e.name, m.Offset, m.Size)
		}
	}
}

// readTarMembers reads all members of r, reading their data (checked against archive) if
// archive is set, and checks the end.
func readTarMembers(t *testing.T, r io.Reader, archive []byte) []Member {
	t.Helper()
	tr := NewReader(r)
	var ms []Member
	for {
		m, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("Next after %d members: %v", len(ms), err)
		}
		if archive != nil {
			data, err := io.ReadAll(tr)
			if err != nil || !bytes.Equal(data, archive[m.Offset:m.Offset+m.Size]) {
				t.Fatalf("%q: Read gave %d bytes, %v; want the %d at its offset", m.Name, len(data), err, m.Size)
			}
		}
		ms = append(ms, m)
	}
	if archive != nil && (tr.Offset()%tarBlock != 0 || tr.Offset() > int64(len(archive)) || !isZeroBlock(archive[tr.Offset()-2*tarBlock:])) {
		t.Errorf("Offset at the end is %d of %d bytes, not after the end blocks", tr.Offset(), len(archive))
	}
	return ms
}

type seekCounter struct {
	io.ReadSeeker
	seeks int
}

func (s *seekCounter) Seek(off int64, whence int) (int64, error) {
	s.seeks++
	return s.ReadSeeker.Seek(off, whence)
}

// TestTarGNUSparse checks that sparse members, old GNU ones with extension blocks among them,
// are TypeSparse, named by the file's name (not the placeholder that PAX formats 0.1 and 1.0
// put in the header), and that the offsets of the members after them stay exact.
func TestTarGNUSparse(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 { // more than the 4 regions an old GNU header holds
		if _, err := f.WriteAt([]byte(fmt.Sprintf("region %d", i)), int64(i)<<16); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(1 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	after := []byte("after the sparse file\n")
	if err := os.WriteFile(filepath.Join(dir, "after"), after, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--format=gnu"}, {"--format=pax", "--sparse-version=0.0"}, {"--format=pax", "--sparse-version=0.1"}, {"--format=pax", "--sparse-version=1.0"}} {
		out := filepath.Join(t.TempDir(), "sparse.tar")
		tarTool(t, dir, "tar", append(args, "-S", "--hole-detection=raw", "-cf", out, "sparse", "after")...)
		archive, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		ms := readTarMembers(t, bytes.NewReader(archive), archive)
		if len(ms) != 2 || ms[0].Type != TypeSparse || ms[0].Name != "sparse" || ms[1].Type != TypeFile || ms[1].Name != "after" ||
			!bytes.Equal(archive[ms[1].Offset:ms[1].Offset+ms[1].Size], after) {
			t.Errorf("%v: members %+v", args, ms)
		}
		if args[0] == "--format=gnu" && ms[0].Offset != ms[0].Header+2*tarBlock {
			t.Errorf("old GNU sparse header at %d: data at %d, want after one extension block", ms[0].Header, ms[0].Offset)
		}
	}
}

// tarHeader returns a ustar header block (magic "" for v7, "gnu" for GNU) with its checksum set.
func tarHeader(name string, flag byte, size int64, magic string) []byte {
	h := make([]byte, tarBlock)
	copy(h, name)
	copy(h[100:], "0000644\x00")
	copy(h[108:], "0001750\x000001750\x00")
	if size >= 0 && size < 1<<33 {
		copy(h[124:], fmt.Sprintf("%011o\x00", size))
	} else { // GNU base-256: the sign bit of the first byte's next bit
		for i := 135; i >= 124; i-- {
			h[i] = byte(size)
			size >>= 8
		}
		h[124] |= 0x80
	}
	copy(h[136:], fmt.Sprintf("%011o\x00", 1700000000))
	h[156] = flag
	switch magic {
	case "ustar":
		copy(h[257:], "ustar\x0000")
	case "gnu":
		copy(h[257:], "ustar  \x00")
	}
	return tarSeal(h)
}

// tarSeal sets the checksum of header h.
func tarSeal(h []byte) []byte {
	copy(h[148:156], "        ")
	sum := 0
	for _, c := range h {
		sum += int(c)
	}
	copy(h[148:], fmt.Sprintf("%06o\x00 ", sum))
	return h
}

// tarPadded returns data padded to whole blocks.
func tarPadded(data string) []byte {
	b := []byte(data)
	return append(b, make([]byte, -len(b)&(tarBlock-1))...)
}

// tarExt returns an extension member: a header of type flag and the payload.
func tarExt(flag byte, payload string) []byte {
	return append(tarHeader("ext", flag, int64(len(payload)), "ustar"), tarPadded(payload)...)
}

// paxRecords formats PAX records from key, value pairs.
func paxRecords(kv ...string) string {
	var s string
	for i := 0; i < len(kv); i += 2 {
		r := " " + kv[i] + "=" + kv[i+1] + "\n"
		n := len(r) + 1
		for len(fmt.Sprint(n))+len(r) != n {
			n++
		}
		s += fmt.Sprint(n) + r
	}
	return s
}

func tarJoin(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// TestTarCrafted reads hand-made archives: what the tools do not write, and broken input.
func TestTarCrafted(t *testing.T) {
	end := make([]byte, 2*tarBlock)
	file := func(name, data string) []byte {
		return append(tarHeader(name, '0', int64(len(data)), "ustar"), tarPadded(data)...)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(tarJoin(file("a", "gzipped"), end))
	zw.Close()
	bigHeader := tarHeader("huge", '0', 10<<30, "gnu")
	sparseHeader := tarHeader("sparse", 'S', 4, "gnu")
	sparseHeader[482] = 1 // isextended: a block of sparse map follows
	tarSeal(sparseHeader)
	longName := strings.Repeat("n", 300)
	tests := []struct {
		name    string
		archive []byte
		want    string // members as "name:type:size@offset", then the error, or "EOF"
	}{
		{"empty input", nil, "EOF"},
		{"end blocks only", end, "EOF"},
		{"one end block", end[:tarBlock], "EOF"},
		{"end at a header boundary", file("a", "x"), "a:file:1@512 EOF"},
		{"zero block then data", tarJoin(file("a", "x"), end[:tarBlock], file("b", "y")), "a:file:1@512 header at byte 1536: data follows the end-of-archive block"},
		{"v7 file and directory", tarJoin(tarHeader("f", 0, 3, ""), tarPadded("abc"), tarHeader("d/", '0', 0, ""), tarHeader("d2/", 0, 0, "ustar"), end),
			"f:file:3@512 d/:directory:0@1536 d2/:directory:0@2048 EOF"},
		{"ustar prefix", tarJoin(func() []byte {
			h := tarHeader("name", '0', 0, "ustar")
			copy(h[345:], "the/prefix")
			return tarSeal(h)
		}(), end), "the/prefix/name:file:0@512 EOF"},
		{"GNU has no prefix", tarJoin(func() []byte {
			h := tarHeader("name", '0', 0, "gnu")
			copy(h[345:], "14677050000\x00")
			return tarSeal(h)
		}(), end), "name:file:0@512 EOF"},
		{"header-only types have no data", tarJoin(tarHeader("d", '5', 1000, "ustar"), tarHeader("l", '2', 1000, "ustar"), file("f", "x"), end),
			"d:directory:0@512 l:symlink:0@1024 f:file:1@1536 EOF"},
		{"GNU long name and link", tarJoin(tarExt('L', longName+"\x00"), tarExt('K', "target\x00"), tarHeader("short", '1', 0, "gnu"), end),
			longName + ":hard link:0@2560 EOF"},
		{"PAX path and size", tarJoin(tarExt('x', paxRecords("path", longName, "size", "5", "comment", "x")), tarHeader("short", '0', 0, "ustar"), tarPadded("12345"), end),
			longName + ":file:5@1536 EOF"},
		{"PAX path beats GNU long name", tarJoin(tarExt('L', "gnu\x00"), tarExt('x', paxRecords("path", "pax")), file("short", ""), end), "pax:file:0@2560 EOF"},
		{"PAX sparse", tarJoin(tarExt('x', paxRecords("GNU.sparse.major", "1", "GNU.sparse.minor", "0")), file("f", "map"), end), "f:sparse file:3@1536 EOF"},
		{"PAX sparse name beats path and the header", tarJoin(tarExt('x', paxRecords("path", "./GNUSparseFile.7/long", "GNU.sparse.major", "1",
			"GNU.sparse.minor", "0", "GNU.sparse.name", "dir/long")), file("./GNUSparseFile.7/f", "map"), end), "dir/long:sparse file:3@1536 EOF"},
		{"PAX sparse name only in 'x' headers", tarJoin(tarExt('g', paxRecords("GNU.sparse.name", "g")), file("f", ""), end), "f:file:0@1536 EOF"},
		{"PAX global headers", tarJoin(tarExt('g', paxRecords("path", "same", "mtime", "1.5")), file("a", ""),
			tarExt('x', paxRecords("path", "own", "mtime", "-2.25")), file("b", ""),
			tarExt('g', paxRecords("path", "")), file("c", ""), end),
			"same:file:0@1536 own:file:0@3072 c:file:0@4608 EOF"},
		{"a later PAX header replaces an earlier", tarJoin(tarExt('x', paxRecords("path", "a", "size", "1")), tarExt('x', paxRecords("path", "b")), file("f", ""), end),
			"b:file:0@2560 EOF"},
		{"GNU volume label, FIFO and dumpdir", tarJoin(tarHeader("label", 'V', 0, "gnu"), tarHeader("fifo", '6', 700, "gnu"), tarHeader("dump", 'D', 2, "gnu"), tarPadded("a\x00"), end),
			"label:other:0@512 fifo:other:0@1024 dump:other:2@1536 EOF"},
		{"GNU sparse extension block", tarJoin(sparseHeader, make([]byte, tarBlock), tarPadded("data"), file("after", "x"), end),
			"sparse:sparse file:4@1024 after:file:1@2048 EOF"},
		{"truncated in a GNU sparse extension block", tarJoin(sparseHeader, make([]byte, 100)),
			"truncated: sparse header at byte 0 needs bytes up to 1024, the archive ends at 612"},
		{"PAX record with a bad length", tarJoin(tarExt('x', "99 path=x\n"), file("a", ""), end), "header at byte 0: bad PAX record length"},
		{"PAX record too short", tarJoin(tarExt('x', "3 path=x\n"), file("a", ""), end), "header at byte 0: bad PAX record length"},
		{"PAX record without newline", tarJoin(tarExt('x', "10 path=xy"), file("a", ""), end), "header at byte 0: bad PAX record length"},
		{"PAX bad size", tarJoin(tarExt('x', paxRecords("size", "-1")), file("a", ""), end), "header at byte 0: PAX size \"-1\" is not a size"},
		{"huge GNU long name", tarJoin(tarHeader("ext", 'L', 2<<20, "gnu")), "'L' header at byte 0: payload of 2097152 bytes is over the 1048576 accepted"},
		{"dangling extension header", tarJoin(tarExt('x', paxRecords("path", "p")), end), "the archive ends after the extension header at byte 0"},
		{"base-256 size, truncated", tarJoin(bigHeader, tarPadded("some data")), "huge:file:10737418240@512 truncated: member \"huge\" needs bytes up to 10737418752, the archive ends at 1024"},
		{"negative base-256 size", tarHeader("neg", '0', -5, "gnu"), "header at byte 0: invalid size -5"},
		{"bad octal size", func() []byte { h := tarHeader("a", '0', 0, "ustar"); copy(h[124:], "12x"); return tarSeal(h) }(), "header at byte 0: invalid size field \"12x"},
		{"checksum mismatch", tarJoin(file("a", "x"), func() []byte { h := file("b", "y"); h[0] = 'c'; return h }()), "a:file:1@512 header at byte 1024: checksum mismatch"},
		{"signed checksum", tarJoin(func() []byte {
			h := tarHeader("é", '0', 0, "ustar")
			sum := 0
			for i, c := range h {
				if i < 148 || i >= 156 {
					sum += int(int8(c))
				} else {
					sum += ' '
				}
			}
			copy(h[148:], fmt.Sprintf("%06o\x00 ", sum))
			return h
		}(), end), "é:file:0@512 EOF"},
		{"not a tar", []byte(strings.Repeat("text\n", 200)), "header at byte 0: checksum mismatch"},
		{"truncated in a header", file("a", "x")[:100], "truncated: header at byte 0 needs bytes up to 512, the archive ends at 100"},
		{"truncated in data", tarJoin(file("a", strings.Repeat("x", 1000)), end)[:800], "a:file:1000@512 truncated: member \"a\" needs bytes up to 1536, the archive ends at 800"},
		{"truncated in padding", tarJoin(file("a", strings.Repeat("x", 1000)))[:1520], "a:file:1000@512 truncated: member \"a\" needs bytes up to 1536, the archive ends at 1520"},
		{"truncated in the second header", tarJoin(file("a", "x"), file("b", "y"))[:1100], "a:file:1@512 truncated: header at byte 1024 needs bytes up to 1536, the archive ends at 1100"},
		{"truncated in a PAX header", tarExt('x', paxRecords("path", longName))[:600], "truncated: 'x' header at byte 0 needs bytes up to 1024, the archive ends at 600"},
		{"gzip", gz.Bytes(), "compressed with gzip"},
		{"zstd", []byte("\x28\xb5\x2f\xfd\x04\x58\x55\x00\x00"), "compressed with zstd"},
		{"xz", append([]byte("\xfd7zXZ\x00"), make([]byte, 600)...), "compressed with xz"},
		{"name starting like bzip2", tarJoin(file("BZh91AY", "x"), end), "BZh91AY:file:1@512 EOF"},
	}
	for _, tc := range tests {
		for _, seekable := range []bool{true, false} {
			var r io.Reader = bytes.NewReader(tc.archive)
			if !seekable {
				r = struct{ io.Reader }{r}
			}
			tr := NewReader(r)
			var got []string
			for {
				m, err := tr.Next()
				if err != nil {
					got = append(got, err.Error())
					if err != io.EOF && !strings.HasPrefix(err.Error(), "tar: ") {
						t.Errorf("%s: error %q does not start with \"tar: \"", tc.name, err)
					}
					if strings.Contains(err.Error(), "truncated") != errors.Is(err, io.ErrUnexpectedEOF) {
						t.Errorf("%s: error %q and errors.Is(io.ErrUnexpectedEOF) disagree", tc.name, err)
					}
					if strings.Contains(err.Error(), "compressed") != errors.Is(err, ErrCompressed) {
						t.Errorf("%s: error %q and errors.Is(ErrCompressed) disagree", tc.name, err)
					}
					if _, err2 := tr.Next(); err2 != err {
						t.Errorf("%s: error not sticky: %v then %v", tc.name, err, err2)
					}
					break
				}
				got = append(got, fmt.Sprintf("%s:%v:%d@%d", m.Name, m.Type, m.Size, m.Offset))
			}
			g := strings.ReplaceAll(strings.Join(got, " "), "tar: ", "")
			if !strings.HasPrefix(g, tc.want) {
				t.Errorf("%s (seekable %v):\n got %s\nwant %s", tc.name, seekable, g, tc.want)
			}
		}
	}
}

// TestTarPAXTimes checks mtime parsing, from the header and from PAX records with fractions.
func TestTarPAXTimes(t *testing.T) {
	for _, tc := range []struct {
		mtime string
		want  int64
	}{
		{"", 1700000000e9},
		{"12", 12e9},
		{"12.5", 12_500_000_000},
		{"-2.25", -2_250_000_000},
		{"-0.5", -500_000_000},
		{"1.1234567891", 1_123_456_789},
		{"99999999999999", 1<<63 - 1},
	} {
		var archive []byte
		if tc.mtime != "" {
			archive = tarExt('x', paxRecords("mtime", tc.mtime))
		}
		archive = tarJoin(archive, tarHeader("f", '0', 0, "ustar"))
		m, err := NewReader(bytes.NewReader(archive)).Next()
		if err != nil || m.MTime != tc.want {
			t.Errorf("mtime %q: got %d, %v; want %d", tc.mtime, m.MTime, err, tc.want)
		}
	}
}

// TestTarSkipOnPipe skips a large member on a pipe: an *os.File whose Seek fails.
func TestTarSkipOnPipe(t *testing.T) {
	archive := tarJoin(tarHeader("big", '0', 3<<20, "ustar"), make([]byte, 3<<20), tarHeader("next", '0', 0, "ustar"))
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		pw.Write(archive)
		pw.Close()
	}()
	defer pr.Close()
	tr := NewReader(pr)
	var names []string
	for {
		m, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, fmt.Sprintf("%s@%d", m.Name, m.Offset))
	}
	if got := strings.Join(names, " "); got != "big@512 next@3146752" || tr.Offset() != int64(len(archive)) {
		t.Errorf("members %s, Offset %d", got, tr.Offset())
	}
}

// TestTarReadAllocations checks that reading members allocates only their names.
func TestTarReadAllocations(t *testing.T) {
	archive, n := tarShard(1000, 1000)
	allocs := testing.AllocsPerRun(5, func() {
		tr := NewReader(bytes.NewReader(archive))
		for {
			if _, err := tr.Next(); err != nil {
				break
			}
		}
	})
	if allocs > float64(n+10) {
		t.Errorf("%.0f allocations for %d members", allocs, n)
	}
}

// tarShard writes a WebDataset-like tar of n samples of two members of size bytes each, in PAX
// format with mtime records, and returns it and its member count.
func tarShard(n, size int) ([]byte, int) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	data := make([]byte, size)
	for i := range n {
		for _, ext := range []string{"jpg", "cls"} {
			tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("sample%06d.%s", i, ext), Mode: 0o644, Size: int64(size),
				ModTime: time.Unix(1700000000, int64(i)), Format: tar.FormatPAX, Typeflag: tar.TypeReg})
			tw.Write(data)
		}
	}
	tw.Close()
	return buf.Bytes(), 2 * n
}

func BenchmarkTarReader(b *testing.B) {
	archive, n := tarShard(1000, 1000)
	b.SetBytes(int64(len(archive)))
	b.ReportAllocs()
	for b.Loop() {
		tr := NewReader(bytes.NewReader(archive))
		for {
			if _, err := tr.Next(); err != nil {
				if err != io.EOF {
					b.Fatal(err)
				}
				break
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/member")
}

// TestTarChecksumSums checks the word-at-a-time sum and the signed one against byte-by-byte
// sums over blocks of random bytes, of bytes all over 127, and of zeros.
func TestTarChecksumSums(t *testing.T) {
	blocks := [][tarBlock]byte{{}, {}, {}}
	for i := range blocks[1] {
		blocks[1][i] = 0xff
	}
	for i := range blocks[2] {
		blocks[2][i] = byte(i*131 + i>>3)
	}
	for k, h := range blocks {
		var u, s int64
		for i, c := range h {
			if i >= 148 && i < 156 {
				c = ' '
			}
			u, s = u+int64(c), s+int64(int8(c))
		}
		if gu, gs := tarChecksum(&h), tarSignedChecksum(&h); gu != u || gs != s {
			t.Errorf("block %d: tarChecksum = %d, tarSignedChecksum = %d; want %d, %d", k, gu, gs, u, s)
		}
	}
}

// TestTarNumber checks numeric fields: octal with its padding of spaces and NULs on either side,
// base-256, and what is neither.
func TestTarNumber(t *testing.T) {
	for _, c := range []struct {
		field string
		want  int64
		ok    bool
	}{
		{"0000644\x00", 0o644, true}, {"  644 \x00", 0o644, true}, {"\x00\x00644  ", 0o644, true},
		{"", 0, true}, {"   \x00\x00", 0, true}, {"17777777777", 0o17777777777, true},
		{"6 44", 0, false}, {"0008", 0, false}, {"-1", 0, false}, {"7777777777777777777777", 0, false},
		{"\x80\x00\x00\x00\x00\x00\x01\x00", 256, true}, {"\xff\xff\xff\xff\xff\xff\xff\xfe", -2, true},
	} {
		if got, ok := tarNumber([]byte(c.field)); got != c.want || ok != c.ok {
			t.Errorf("tarNumber(%q) = %d, %v; want %d, %v", c.field, got, ok, c.want, c.ok)
		}
	}
}
