//go:build integration

package integration

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

// This file tests the formats other than tar that aifs index reads in place, with files written
// by independent writers: ZIPs by Python's zipfile and Info-ZIP's zip.

// pythonZip writes the tree at src into zipPath with Python's zipfile: every file stored, in
// path order; the files named in zip64 written with force_zip64 (ZIP64 local and central
// records, as zipfile writes a member it cannot size beforehand past 2 GiB).
func pythonZip(t *testing.T, src, zipPath string, zip64 ...string) {
	t.Helper()
	script := `
import os, sys, zipfile
src, out, big = sys.argv[1], sys.argv[2], set(sys.argv[3:])
with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as z:
    for d, dirs, files in os.walk(src):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(d, f)
            name = os.path.relpath(p, src)
            if name in big:
                with open(p, "rb") as r, z.open(zipfile.ZipInfo.from_file(p, name), "w", force_zip64=True) as w:
                    w.write(r.read())
            else:
                z.write(p, name)
`
	run(t, torchPython, append([]string{"-c", script, src, zipPath}, zip64...)...)
}

// infoZip writes the tree at src into zipPath with Info-ZIP's zip, with its flags (-0: stored).
func infoZip(t *testing.T, src, zipPath string, flags ...string) {
	t.Helper()
	cmd := exec.Command("zip", append(append([]string{"-q", "-r", "-X"}, flags...), zipPath, ".")...)
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("zip %q (Info-ZIP; apt-get install zip): %v\n%s", flags, err, out)
	}
}

// zipTree writes a small tree to index from ZIPs: files of random bytes, one of 3 MiB (ZIP64 in
// the Python ZIP), and text that deflate shrinks (Info-ZIP's zip stores what it cannot shrink,
// so only the text is deflated in its default mode).
func zipTree(t *testing.T) string {
	src := filepath.Join(t.TempDir(), "src")
	for i := range 20 {
		writeFile(t, filepath.Join(src, "class"+strconv.Itoa(i%3), "k"+strconv.Itoa(i)+".jpg"), randomBytes(uint64(i), 3000+i*97))
	}
	writeFile(t, filepath.Join(src, "big", "large.bin"), randomBytes(99, 3<<20))
	writeFile(t, filepath.Join(src, "notes", "readme.txt"), []byte(strings.Repeat("deflate shrinks this line\n", 400)))
	writeFile(t, filepath.Join(src, "empty.jpg"), nil)
	return src
}

// TestIndexZipWriters indexes ZIPs of one tree written by Python's zipfile (stored, a ZIP64
// member) and Info-ZIP (zip -0, and zip, whose deflated member is refused and named), mounts each
// and compares every file with the tree; aifs verify passes, and after a byte of a stored member
// is changed in the ZIP it fails naming that member, as does a read of it under -o verify=on. A
// ZIP modified after indexing is refused at mount.
func TestIndexZipWriters(t *testing.T) {
	src := zipTree(t)
	dir := t.TempDir()
	pyZip, stored, deflated := filepath.Join(dir, "python.zip"), filepath.Join(dir, "stored.zip"), filepath.Join(dir, "deflated.zip")
	pythonZip(t, src, pyZip, "big/large.bin")
	infoZip(t, src, stored, "-0")
	infoZip(t, src, deflated)
	want := sourceEntries(t, src, true)

	for _, z := range []string{pyZip, stored} {
		set := filepath.Join(dir, "set-"+filepath.Base(z))
		r := mustAifs(t, "index", "--merge", z, set)
		if !strings.Contains(r.stdout, "indexed 1 ZIPs") || strings.Contains(r.stdout, "refused") {
			t.Errorf("%s: summary %s", z, r)
		}
		mnt := mountSet(t, set)
		sameContent(t, want, sourceEntries(t, mnt, true))
		if r := mustAifs(t, "verify", set); !strings.Contains(r.stdout, "ok: 23 samples") {
			t.Errorf("aifs verify of %s: %s", z, r)
		}
		// The CRC32C column (and the locations file aifs_direct checks) has none for a CRC-32.
		if r := mustAifs(t, "locate", set, "class0/k0.jpg"); !strings.HasSuffix(strings.TrimSpace(r.stdout), "\t3000\t00000000") {
			t.Errorf("aifs locate of a ZIP member: %s", r)
		}
		unmount(t, mnt, daemonPID(t, mnt))
	}

	// Deflated members are refused and named; the stored ones are served.
	set := filepath.Join(dir, "set-deflated")
	r := mustAifs(t, "index", deflated, set)
	if !strings.Contains(r.stdout, "members refused") || !strings.Contains(r.stdout, "notes/readme.txt (deflated)") ||
		!strings.Contains(r.stderr, "notes/readme.txt (deflated)") {
		t.Errorf("summary of a ZIP with a deflated member: %s", r)
	}
	mnt := mountSet(t, set)
	if _, err := os.Stat(filepath.Join(mnt, "deflated", "notes", "readme.txt")); !os.IsNotExist(err) {
		t.Errorf("the deflated member on the mount: %v, want it absent", err)
	}
	if b, err := os.ReadFile(filepath.Join(mnt, "deflated", "class1", "k1.jpg")); err != nil || !bytes.Equal(b, randomBytes(1, 3097)) {
		t.Errorf("a stored member of the same ZIP: %d bytes, %v", len(b), err)
	}
	unmount(t, mnt, daemonPID(t, mnt))

	// A changed byte of a stored member: verify names it, verify=on refuses its read.
	set = filepath.Join(dir, "set-stored.zip")
	data, err := os.ReadFile(stored)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(data, randomBytes(5, 3000+5*97))
	if at < 0 {
		t.Fatal("class2/k5.jpg's bytes are not in the stored ZIP")
	}
	fi, _ := os.Stat(stored)
	data[at+100] ^= 0x10
	writeFile(t, stored, data)
	os.Chtimes(stored, fi.ModTime(), fi.ModTime()) // the mount checks size and mtime: same
	if r := aifs(t, "verify", set); r.code == 0 || !strings.Contains(r.stdout, "class2/k5.jpg") || !strings.Contains(r.stdout, "crc32 ") {
		t.Errorf("aifs verify after a member byte changed: %s", r)
	}
	mnt = mountSet(t, set, "-o", "verify=on")
	if _, err := os.ReadFile(filepath.Join(mnt, "class2", "k5.jpg")); err == nil {
		t.Error("a corrupt member read without error under verify=on")
	}
	if b, err := os.ReadFile(filepath.Join(mnt, "class0", "k0.jpg")); err != nil || !bytes.Equal(b, randomBytes(0, 3000)) {
		t.Errorf("an intact member under verify=on: %d bytes, %v", len(b), err)
	}
	unmount(t, mnt, daemonPID(t, mnt))

	// Modified after indexing: refused at mount, by name.
	if err := os.Chtimes(stored, time.Now(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if r := aifs(t, "mount", set, t.TempDir()); r.code == 0 || !strings.Contains(r.stderr, stored) || !strings.Contains(r.stderr, "modified") {
		t.Errorf("mount after the ZIP was modified: %s", r)
	}

	// A tar and a ZIP together need --format; a ZIP given as a tar fails as one.
	run(t, "tar", "-cf", filepath.Join(dir, "t.tar"), "-C", src, "class0")
	if r := aifs(t, "index", filepath.Join(dir, "t.tar"), pyZip, filepath.Join(dir, "mixed")); r.code == 0 || !strings.Contains(r.stderr, "index them apart") {
		t.Errorf("a tar and a ZIP: %s", r)
	}
	if r := aifs(t, "index", "--format", "hf", pyZip, filepath.Join(dir, "hf")); r.code == 0 || !strings.Contains(r.stderr, "hfarrow") || !strings.Contains(r.stderr, filepath.Base(pyZip)) {
		t.Errorf("--format hf: %s", r)
	}
}

// jpegZip zips the shared JPEG tree with Info-ZIP's zip -0 (CLASS/FILE members).
func jpegZip(t *testing.T) (src, zipPath string) {
	src, _ = jpegSet(t)
	zipPath = filepath.Join(t.TempDir(), "jpeg.zip")
	infoZip(t, src, zipPath, "-0")
	return src, zipPath
}

// TestIndexZipImageFolder zips the JPEG tree (Info-ZIP, stored), indexes it with --view
// imagefolder and mounts it: torchvision's ImageFolder finds the tree's classes and samples, and
// a shuffled two-worker DataLoader decodes identical tensors with identical labels.
func TestIndexZipImageFolder(t *testing.T) {
	src, z := jpegZip(t)
	set := filepath.Join(t.TempDir(), "view")
	r := mustAifs(t, "index", "--view", "imagefolder", z, set)
	if !strings.Contains(r.stdout, strconv.Itoa(jpegFiles)+" samples in "+strconv.Itoa(jpegClasses)+" classes") {
		t.Errorf("summary: %s", r)
	}
	mnt := mountSet(t, set)
	t.Log(torchCheck(t, "imagefolder", src, mnt))
	t.Log(torchCheck(t, "loader", src, mnt, "--workers", "2"))
}

// TestIndexZipS3 uploads the zipped JPEG tree to the bucket, indexes it there with --view
// imagefolder (the index beside it), verifies it, and mounts it with a disk cache: every
// sample's bytes are the tree's under its paths, and ImageFolder finds the same classes and
// samples. An object replaced after indexing is refused at mount.
func TestIndexZipS3(t *testing.T) {
	srv := s3Server(t)
	src, z := jpegZip(t)
	put := func(data []byte) {
		if _, err := srv.Client().PutObject(context.Background(), srv.Bucket, "zips/jpeg.zip", bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(z)
	if err != nil {
		t.Fatal(err)
	}
	put(data)
	url := "s3://" + srv.Bucket + "/zips"
	mustAifs(t, "index", "--quiet", "--view", "imagefolder", url+"/", url)
	if r := mustAifs(t, "verify", url); !strings.Contains(r.stdout, "ok: "+strconv.Itoa(jpegFiles)+" samples") {
		t.Errorf("aifs verify %s: %s", url, r)
	}
	mnt := mountSet(t, url, "--cache-dir", filepath.Join(t.TempDir(), "cache"))
	sameContent(t, sourceEntries(t, src, true), sourceEntries(t, mnt, true))
	t.Log(torchCheck(t, "imagefolder", src, mnt))
	unmount(t, mnt, daemonPID(t, mnt))

	data[len(data)/2] ^= 0xff
	put(data)
	if r := aifs(t, "mount", url, t.TempDir()); r.code == 0 || !strings.Contains(r.stderr, "jpeg.zip") || !strings.Contains(r.stderr, "ETag") {
		t.Errorf("mount after the ZIP object was replaced: %s", r)
	}
}
