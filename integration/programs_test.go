//go:build integration

package integration

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// These tests run the programs a new user tries on a mount — numpy memmaps, SQLite, getfattr,
// tar, Python's buffered io at random offsets — and check that each behaves as on a native
// read-only file system, at a native cost. They need numpy and Python's sqlite3 under
// /usr/bin/python3 (python3-numpy), the sqlite3 shell and getfattr (Debian's sqlite3, attr).

// Sizes of the large files of programsSet: larger than a sample (1 MiB), and one larger than
// the loader fetches whole (16 MiB).
const (
	programsMedium = 6 << 20
	programsLarge  = 40 << 20
)

// programsSet packs a tree of files real programs use: a numpy array, a SQLite database, two
// large files of random bytes and samples of 130 KiB to 1 MiB. It returns the source tree and
// the shard set.
func programsSet(t *testing.T) (src, set string) {
	t.Helper()
	dir := t.TempDir()
	src, set = filepath.Join(dir, "src"), filepath.Join(dir, "set")
	rng := rand.New(rand.NewPCG(3, 4))
	randomBytes := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	writeFile(t, filepath.Join(src, "big", "medium.bin"), randomBytes(programsMedium))
	writeFile(t, filepath.Join(src, "big", "large.bin"), randomBytes(programsLarge))
	for i := range 24 {
		writeFile(t, filepath.Join(src, "samples", string(rune('a'+i))+".bin"), randomBytes(130<<10+i*38<<10))
	}
	mkdir(t, filepath.Join(src, "data"))
	python(t, `
import sys, sqlite3, numpy
numpy.save(sys.argv[1] + "/array.npy", numpy.arange(1 << 20, dtype=numpy.int64).reshape(4096, 256))
con = sqlite3.connect(sys.argv[1] + "/db.sqlite")
con.execute("create table t (k integer primary key, v text)")
con.executemany("insert into t values (?, ?)", [(i, str(i)) for i in range(1000)])
con.commit()
con.close()
`, filepath.Join(src, "data"))
	mustAifs(t, "pack", "--quiet", src, set)
	return src, set
}

// python runs code with /usr/bin/python3 and the args, fails the test if it fails, and returns
// its standard output.
func python(t *testing.T, code string, args ...string) string {
	t.Helper()
	cmd := exec.Command(torchPython, append([]string{"-c", code}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v\n%s%s", err, out, stderr.Bytes())
	}
	return string(out)
}

// TestWritesRefused: with the kernel cache on or off, no write path reaches the tree, for root:
// opening for writing, truncating and a writable shared mapping all fail with EROFS (EACCES for
// the mapping of a read-only descriptor), as on a native read-only mount, and a numpy memmap
// opened 'r+' fails instead of changing what every other reader sees. A private writable mapping
// works and changes nothing for others.
func TestWritesRefused(t *testing.T) {
	src, set := programsSet(t)
	want, err := os.ReadFile(filepath.Join(src, "data", "array.npy"))
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"on", "off"} {
		t.Run("kernel_cache="+mode, func(t *testing.T) {
			mnt := mountSet(t, set, "-o", "kernel_cache="+mode)
			p := filepath.Join(mnt, "data", "array.npy")
			if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) { // pages cached, no-open mode on
				t.Fatalf("reading %s: %v, equal %v", p, err, bytes.Equal(got, want))
			}
			for _, flag := range []int{os.O_RDWR, os.O_WRONLY, os.O_RDONLY | os.O_TRUNC, os.O_WRONLY | os.O_APPEND} {
				if f, err := os.OpenFile(p, flag, 0); !errors.Is(err, syscall.EROFS) {
					t.Errorf("open flags %#x: %v, want EROFS", flag, err)
					if f != nil {
						f.Close()
					}
				}
			}
			if err := os.Truncate(p, 0); !errors.Is(err, syscall.EROFS) {
				t.Errorf("truncate: %v, want EROFS", err)
			}
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if m, err := syscall.Mmap(int(f.Fd()), 0, 4096, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED); !errors.Is(err, syscall.EACCES) {
				t.Errorf("a writable shared mapping of a read-only descriptor: %v, want EACCES", err)
				if err == nil {
					syscall.Munmap(m)
				}
			}
			if mode == "on" { // kernel_cache=off files are FOPEN_DIRECT_IO: not mappable at all
				m, err := syscall.Mmap(int(f.Fd()), 0, 4096, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE)
				if err != nil {
					t.Errorf("a private writable mapping: %v", err)
				} else {
					m[200] ^= 0xff // copy on write: this process's page only
					syscall.Munmap(m)
				}
			}
			out := python(t, `
import errno, sys, numpy
try:
    a = numpy.load(sys.argv[1], mmap_mode="r+")
    a[0, :] = -1
    a.flush()
    print("r+ opened")
except OSError as e:
    print(errno.errorcode[e.errno])
`, p)
			if strings.TrimSpace(out) != "EROFS" {
				t.Errorf("numpy.load(mmap_mode='r+'): %q, want EROFS", out)
			}
			// With kernel_cache=off (FOPEN_DIRECT_IO) no file can be mapped, so another
			// process reads the array with plain reads there.
			got := python(t, `
import sys, numpy
a = numpy.load(sys.argv[1], mmap_mode="r" if sys.argv[2] == "on" else None)
print(int(a[0, 0]), int(a[0, 255]), int(a[4095, 255]))
`, p, mode)
			if got != "0 255 1048575\n" {
				t.Errorf("a fresh numpy.load(mmap_mode='r') reads %q, want the packed values 0 255 1048575", got)
			}
			if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, want) {
				t.Errorf("after the refused writes the file reads differently: %v, equal %v", err, bytes.Equal(b, want))
			}
		})
	}
}

// TestSQLiteReadOnly: SQLite (Python's module and the sqlite3 shell) opens a database in the
// mount, reads it, and reports a write as a native read-only file system makes it report it,
// also after a first read has put the mount in no-open mode (where an open for writing used
// to succeed unchecked, and the write then failed as "unable to open database file").
func TestSQLiteReadOnly(t *testing.T) {
	_, set := programsSet(t)
	mnt := mountSet(t, set)
	db := filepath.Join(mnt, "data", "db.sqlite")
	if _, err := os.ReadFile(db); err != nil {
		t.Fatal(err)
	}
	cli, err := exec.Command("sqlite3", db, "select count(*) from t; insert into t values (5000, 'x');").CombinedOutput()
	if !strings.Contains(string(cli), "1000\n") || !strings.Contains(string(cli), "attempt to write a readonly database") {
		t.Errorf("sqlite3 shell: %v, output %q; want the count and 'attempt to write a readonly database'", err, cli)
	}
	out := python(t, `
import sqlite3, sys
con = sqlite3.connect(sys.argv[1])
print(con.execute("select count(*), sum(k) from t").fetchone())
try:
    con.execute("insert into t values (5000, 'x')")
    con.commit()
    print("inserted")
except sqlite3.OperationalError as e:
    print(e)
`, db)
	if out != "(1000, 499500)\nattempt to write a readonly database\n" {
		t.Errorf("sqlite3 on the mount printed %q, want the rows and 'attempt to write a readonly database'", out)
	}
}

// TestXattrs: files have no extended attributes: getfattr -d is silent and exits 0, tar
// --xattrs does not warn, listxattr is empty, and getxattr is EOPNOTSUPP, answered by the
// kernel after one GETXATTR: ls -lR, which asks two attributes an entry, sends at most one.
func TestXattrs(t *testing.T) {
	_, set := programsSet(t)
	mnt := mountSet(t, set)
	before := readStats(t, mnt).Ops["xattr"].Count
	if out, err := exec.Command("ls", "-lR", mnt).CombinedOutput(); err != nil {
		t.Fatalf("ls -lR: %v: %s", err, out)
	}
	if n := readStats(t, mnt).Ops["xattr"].Count - before; n > 1 {
		t.Errorf("ls -lR sent %d xattr requests, want at most 1 (the kernel remembers GETXATTR's ENOSYS)", n)
	}
	p := filepath.Join(mnt, "data", "db.sqlite")
	for _, args := range [][]string{{"getfattr", "-d", p}, {"getfattr", "-R", "-d", mnt}, {"tar", "--xattrs", "-cf", "/dev/null", "-C", mnt, "."}} {
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		if err != nil || len(out) != 0 {
			t.Errorf("%s: %v, output %q; want success and no output", strings.Join(args, " "), err, out)
		}
	}
	if n, err := syscall.Listxattr(p, make([]byte, 256)); n != 0 || err != nil {
		t.Errorf("listxattr: %d, %v; want 0, nil", n, err)
	}
	if _, err := syscall.Getxattr(p, "user.x", make([]byte, 256)); !errors.Is(err, syscall.EOPNOTSUPP) {
		t.Errorf("getxattr: %v, want EOPNOTSUPP", err)
	}
}

// TestRandomAccessLargeFiles: a file larger than a sample reports ext4's 4 KiB st_blksize, so
// Python's buffered io, os.pread and a numpy memmap reading 4 KiB at random offsets fetch about
// what they ask for (at most the kernel's 128 KiB read-ahead a read), not 1 MiB a read, the
// buffer and read-ahead of a sample. A sample keeps a 1 MiB st_blksize.
func TestRandomAccessLargeFiles(t *testing.T) {
	_, set := programsSet(t)
	const reads = 200
	for _, name := range []string{"medium.bin", "large.bin"} {
		for _, how := range []string{"open", "pread", "memmap"} {
			mnt := mountSet(t, set)
			p := filepath.Join(mnt, "big", name)
			before := readStats(t, mnt).ReadBytes
			python(t, `
import os, random, sys, numpy
path, how, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
size = os.path.getsize(path)
rng = random.Random(5)
offsets = [rng.randrange(0, size - 4096) for _ in range(n)]
if how == "open":
    with open(path, "rb") as f:
        for off in offsets:
            f.seek(off)
            assert len(f.read(4096)) == 4096
elif how == "pread":
    fd = os.open(path, os.O_RDONLY)
    for off in offsets:
        assert len(os.pread(fd, 4096, off)) == 4096
    os.close(fd)
else:
    m = numpy.memmap(path, dtype=numpy.uint8, mode="r")
    total = sum(int(m[off]) for off in offsets)
`, p, how, "200")
			got := readStats(t, mnt).ReadBytes - before
			t.Logf("%s, %s: %d random 4 KiB reads fetched %d KiB through READ", name, how, reads, got>>10)
			if limit := uint64(reads * 128 << 10); got > limit {
				t.Errorf("%s, %s: %d random 4 KiB reads fetched %d KiB, want at most %d KiB (128 KiB a read)", name, how, reads, got>>10, limit>>10)
			}
		}
	}
	mnt := mountSet(t, set)
	for p, want := range map[string]int64{"big/large.bin": 4096, "big/medium.bin": 4096, "samples/x.bin": 1 << 20, "data/db.sqlite": 1 << 20} {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(mnt, p), &st); err != nil || st.Blksize != want {
			t.Errorf("%s: st_blksize %d (%v), want %d", p, st.Blksize, err, want)
		}
	}
}

// hashFiles prints the name and SHA-256 of each file of directory argv[1], reading each whole
// with Python's io, as a DataLoader reads a sample.
const hashFiles = `
import hashlib, os, sys
for name in sorted(os.listdir(sys.argv[1])):
    with open(os.path.join(sys.argv[1], name), "rb") as f:
        print(name, hashlib.sha256(f.read()).hexdigest())
`

// TestSamplesOneRead: a sample larger than the kernel's 128 KiB read-ahead window is still read
// by one READ, whole (the rest is pushed into the page cache with the first), and reads back
// byte for byte, through Python's io as a DataLoader reads it.
func TestSamplesOneRead(t *testing.T) {
	src, set := programsSet(t)
	mnt := mountSet(t, set)
	before := readStats(t, mnt).Ops["read"].Count
	out := python(t, hashFiles, filepath.Join(mnt, "samples"))
	reads := readStats(t, mnt).Ops["read"].Count - before // with the first stats file's 2 READs
	entries, err := os.ReadDir(filepath.Join(src, "samples"))
	if err != nil {
		t.Fatal(err)
	}
	want := python(t, hashFiles, filepath.Join(src, "samples"))
	if out != want {
		t.Errorf("samples read through the mount differ from the source:\n%s\nwant\n%s", out, want)
	}
	if n := uint64(len(entries)); reads > n+3 {
		t.Errorf("%d samples of 130 KiB to 1 MiB took %d READs, want one each", n, reads)
	}
}
