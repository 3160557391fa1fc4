//go:build integration

package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

// run runs a command and fails the test unless it exits 0.
func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %q: %v\n%s", name, args, err, clip(string(out)))
	}
	return string(out)
}

// extractedEntries models what a mount of tarPath must show: the tree its own tool (GNU tar or
// bsdtar) extracts, with modes, mtimes and hard links as the archive has them, less what aifs
// index skips (symlinks, FIFOs): walked without following symlinks.
func extractedEntries(t *testing.T, tool, tarPath string) []entry {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "extracted")
	mkdir(t, dir)
	run(t, tool, "-xpf", tarPath, "-C", dir)
	var out []entry
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() && !d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if rel == "." {
			rel = ""
		}
		e := entry{path: filepath.ToSlash(rel), dir: d.IsDir(), mode: modeBits(fi.Mode()), mtime: fi.ModTime().UnixNano(), size: fi.Size()}
		if d.IsDir() {
			kids, err := os.ReadDir(path)
			if err != nil {
				return err
			}
			e.size = int64(len(slices.DeleteFunc(kids, func(k fs.DirEntry) bool { return !k.Type().IsRegular() && !k.IsDir() })))
		} else {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			e.sum = sha256.Sum256(data)
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sortEntries(out)
	return out
}

// TestIndexTarEdgeTree writes the edge-case tree (non-UTF-8 and 255-byte names, 200 levels of
// nesting, zero-byte files, permission bits, symlinks and a FIFO; not the directory of 100,000
// files, which would take minutes to read through the mount) as a tar, with GNU tar in GNU
// format (sorted by name: member order is id order) and with bsdtar in PAX format (in directory
// order: the index keeps an extent order),
// indexes each in place and mounts it: every file, directory, mode, mtime and byte is what
// extracting the tar gives, the symlinks and FIFO skipped with a warning naming them. aifs ls and
// aifs verify take the set.
func TestIndexTarEdgeTree(t *testing.T) {
	src := edgeTree(t)
	for _, c := range []struct {
		name, tool string
		args       []string
	}{
		{"gnu-tar-gnu", "tar", []string{"--format=gnu", "--sort=name", "--exclude", "./big"}},
		{"bsdtar-pax", "bsdtar", []string{"--format=pax", "--exclude", "./big"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			tarPath := filepath.Join(dir, "edge.tar")
			run(t, c.tool, append(c.args, "-cf", tarPath, "-C", src, ".")...)
			set := filepath.Join(dir, "index") // beside the tar: named ../edge.tar
			r := mustAifs(t, "index", "--quiet", tarPath, set)
			for _, name := range []string{"linkfile", "linkdir", "dangling", "fifo"} {
				if !strings.Contains(r.stderr, name) {
					t.Errorf("aifs index warned of no %q:\n%s", name, r.stderr)
				}
			}
			if x := loadSet(t, set); x.Shards()[0].Name != "../edge.tar" {
				t.Errorf("the index names the tar %q, want ../edge.tar", x.Shards()[0].Name)
			}
			if r := mustAifs(t, "verify", set); !strings.Contains(r.stdout, "ok:") {
				t.Errorf("aifs verify: %s", r)
			}
			if r := mustAifs(t, "ls", set, "edge/a"); !strings.Contains(r.stdout, "zzz-zero") {
				t.Errorf("aifs ls edge/a: %s", r)
			}
			mnt := mountSet(t, set)
			want, got := extractedEntries(t, c.tool, tarPath), sourceEntries(t, filepath.Join(mnt, "edge"), true)
			if len(want) > 0 && len(got) > 0 && want[0].path == "" && got[0].path == "" {
				want[0].mtime = got[0].mtime // bsdtar -x leaves the mtime of the directory it extracts into
			}
			compareEntries(t, c.name, want, got)
		})
	}
}

// TestIndexTarRefusals checks what aifs index and a mount of its set refuse, each with a message
// naming the cause: a compressed tar, an index already there (without --force) and a packed
// set's directory; a tar modified after indexing (at mount); a set indexed without checksums
// (verify, -o verify=on). Brace patterns, directories and --merge name the tars as WebDataset
// writes them, and a set whose index lies elsewhere keeps working when moved with its tars.
func TestIndexTarRefusals(t *testing.T) {
	dir := t.TempDir()
	tars := filepath.Join(dir, "shards")
	for i := range 3 {
		d := filepath.Join(dir, "src", strconv.Itoa(i))
		writeFile(t, filepath.Join(d, "k"+strconv.Itoa(i)+".jpg"), randomBytes(uint64(i), 5000+i))
		writeFile(t, filepath.Join(d, "shared.txt"), []byte("from tar "+strconv.Itoa(i)))
		mkdir(t, tars)
		run(t, "tar", "-cf", filepath.Join(tars, "train-00"+strconv.Itoa(i)+".tar"), "-C", d, ".")
	}
	set := filepath.Join(dir, "sets", "merged")
	r := mustAifs(t, "index", "--merge", filepath.Join(tars, "train-{000..002}.tar"), set)
	if !strings.Contains(r.stdout, "indexed 3 tars") || !strings.Contains(r.stdout, "2 files replaced") {
		t.Errorf("summary: %s", r)
	}
	mnt := mountSet(t, set)
	if b, err := os.ReadFile(filepath.Join(mnt, "shared.txt")); err != nil || string(b) != "from tar 2" {
		t.Errorf("shared.txt through --merge = %q, %v; want the last tar's", b, err)
	}
	unmount(t, mnt, daemonPID(t, mnt))

	// Moved together, the relative names still lead to the tars.
	moved := filepath.Join(t.TempDir(), "moved")
	run(t, "cp", "-a", dir, moved)
	mnt = mountSet(t, filepath.Join(moved, "sets", "merged"))
	if b, err := os.ReadFile(filepath.Join(mnt, "k1.jpg")); err != nil || len(b) != 5001 {
		t.Errorf("k1.jpg of the moved set: %d bytes, %v", len(b), err)
	}

	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"again without --force", []string{"index", tars, set}, "--force"},
		{"compressed", []string{"index", filepath.Join(dir, "x.tar.gz"), filepath.Join(dir, "gz")}, "aifs pack"},
		{"compressed content", []string{"index", filepath.Join(dir, "gzip-inside.tar"), filepath.Join(dir, "gz2")}, "gzip"},
		{"packed set", []string{"index", "--force", tars, filepath.Join(dir, "packed")}, "packed shard set"},
		{"unbalanced braces", []string{"index", filepath.Join(tars, "train-{0..2.tar"), filepath.Join(dir, "b")}, "without its '}'"},
		{"missing tar", []string{"index", filepath.Join(tars, "train-{000..003}.tar"), filepath.Join(dir, "m")}, "train-003.tar"},
	} {
		switch c.name {
		case "compressed":
			writeFile(t, c.args[1], []byte{0x1f, 0x8b})
		case "compressed content":
			writeFile(t, c.args[1], append([]byte{0x1f, 0x8b, 8, 0}, make([]byte, 2000)...))
		case "packed set":
			mustAifs(t, "pack", "--quiet", filepath.Join(dir, "src"), c.args[3])
		}
		if r := aifs(t, c.args...); r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: aifs %q = %s; want a failure naming %q", c.name, c.args, r, c.want)
		}
	}

	// Without checksums: verify and verify=on say so.
	fast := filepath.Join(dir, "fast")
	mustAifs(t, "index", "--quiet", "--no-checksums", tars, fast)
	if r := aifs(t, "verify", fast); r.code == 0 || !strings.Contains(r.stderr, "no checksums") {
		t.Errorf("verify of a set without checksums: %s", r)
	}
	if r := aifs(t, "mount", fast, t.TempDir(), "-o", "verify=on"); r.code == 0 || !strings.Contains(r.stderr, "no checksums") {
		t.Errorf("mount -o verify=on of a set without checksums: %s", r)
	}
	fastMnt := mountSet(t, fast)
	if b, err := os.ReadFile(filepath.Join(fastMnt, "train-000", "k0.jpg")); err != nil || len(b) != 5000 {
		t.Errorf("read without checksums: %d bytes, %v", len(b), err)
	}

	// A tar modified after indexing is refused at mount, by name.
	mustAifs(t, "index", "--quiet", "--force", tars, fast)
	tar1 := filepath.Join(tars, "train-001.tar")
	if err := os.Chtimes(tar1, time.Now(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if r := aifs(t, "mount", fast, t.TempDir()); r.code == 0 || !strings.Contains(r.stderr, tar1) || !strings.Contains(r.stderr, "modified") {
		t.Errorf("mount after a tar was modified: %s", r)
	}
}

// TestIndexTarImageFolder writes the JPEG tree as WebDataset tars (shuffled, 100 samples a
// tar: key, .JPEG and .cls members) and indexes them with --view imagefolder and the tree's
// class names: torchvision's ImageFolder on the mount finds the same classes and samples as on
// the tree, and a shuffled two-worker DataLoader decodes identical tensors with identical
// labels, sample by sample.
func TestIndexTarImageFolder(t *testing.T) {
	src, _ := jpegSet(t)
	wds := wdsShards(t, src)
	set := filepath.Join(t.TempDir(), "view")
	r := mustAifs(t, "index", "--view", "imagefolder", "--class-names", filepath.Join(wds, "classes.txt"), wds, set)
	if !strings.Contains(r.stdout, strconv.Itoa(jpegFiles)+" samples in "+strconv.Itoa(jpegClasses)+" classes") {
		t.Errorf("summary: %s", r)
	}
	mnt := mountSet(t, set)
	t.Log(torchCheck(t, "imagefolder", src, mnt))
	t.Log(torchCheck(t, "loader", src, mnt, "--workers", "2"))
}

// wdsShards writes the tree at src as WebDataset tars of 100 shuffled samples each.
func wdsShards(t *testing.T, src string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "wds")
	script, err := filepath.Abs(filepath.Join("torchcheck", "wds.py"))
	if err != nil {
		t.Fatal(err)
	}
	run(t, torchPython, script, src, out, "--per-tar", "100", "--shuffle", "1")
	return out
}

// TestIndexTarS3 uploads the JPEG tree's WebDataset tars to the bucket, indexes them there
// (the index beside them), and mounts the set with a disk cache: every sample's bytes are the
// source's, under the source's paths, and torchvision's ImageFolder finds the source's classes
// and samples. An object replaced after indexing is refused at mount.
func TestIndexTarS3(t *testing.T) {
	srv := s3Server(t)
	src, _ := jpegSet(t)
	wds := wdsShards(t, src)
	ents, err := os.ReadDir(wds)
	if err != nil {
		t.Fatal(err)
	}
	put := func(name string) {
		if _, err := srv.Client().FPutObject(context.Background(), srv.Bucket, "wds/"+name, filepath.Join(wds, name), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tar") {
			put(e.Name())
		}
	}
	url := "s3://" + srv.Bucket + "/wds"
	mustAifs(t, "index", "--quiet", "--view", "imagefolder", "--class-names", filepath.Join(wds, "classes.txt"), url+"/", url)
	if r := aifs(t, "index", "--quiet", url+"/", url); r.code == 0 || !strings.Contains(r.stderr, "--force") {
		t.Errorf("a second index to the same prefix without --force: %s", r)
	}
	packed := "s3://" + srv.Bucket + "/packed"
	mustAifs(t, "pack", "--quiet", src, packed)
	if r := aifs(t, "index", "--quiet", "--force", url+"/", packed); r.code == 0 || !strings.Contains(r.stderr, "packed shard set") {
		t.Errorf("an index over a packed set in S3: %s", r)
	}
	if r := mustAifs(t, "verify", url); !strings.Contains(r.stdout, "ok: "+strconv.Itoa(jpegFiles)+" samples") {
		t.Errorf("aifs verify %s: %s", url, r)
	}
	mnt := mountSet(t, url, "--cache-dir", filepath.Join(t.TempDir(), "cache"))
	sameContent(t, sourceEntries(t, src, true), sourceEntries(t, mnt, true))
	t.Log(torchCheck(t, "imagefolder", src, mnt))
	unmount(t, mnt, daemonPID(t, mnt))
	// The same on the kernel plane over S3: EROFS over sparse copies of the tars (512-byte blocks).
	needKernelPlane(t)
	kmnt := mountKernelS3(t, url, filepath.Join(t.TempDir(), "kcache"), "")
	sameContent(t, sourceEntries(t, src, true), sourceEntries(t, kmnt, true))
	t.Log(torchCheck(t, "imagefolder", src, kmnt))
	unmount(t, kmnt, daemonPID(t, kmnt))

	// Replaced by bytes of the same size: only the ETag the index recorded tells.
	data, err := os.ReadFile(filepath.Join(wds, "train-000004.tar"))
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if _, err := srv.Client().PutObject(context.Background(), srv.Bucket, "wds/train-000004.tar", bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := aifs(t, "mount", url, t.TempDir()); r.code == 0 || !strings.Contains(r.stderr, "train-000004.tar") || !strings.Contains(r.stderr, "ETag") {
		t.Errorf("mount after a tar object was replaced: %s", r)
	}
}

// sameContent compares two models by path, kind, size and content only (a WebDataset writer
// does not keep modes and mtimes).
func sameContent(t *testing.T, want, got []entry) {
	t.Helper()
	strip := func(es []entry) []entry {
		out := make([]entry, len(es))
		for i, e := range es {
			out[i] = entry{path: e.path, dir: e.dir, size: e.size, sum: e.sum}
		}
		return out
	}
	compareEntries(t, "content", strip(want), strip(got))
}
