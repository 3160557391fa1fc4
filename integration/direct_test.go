//go:build integration

package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/aifs/aifs/layout"
)

// The sample-locations issue (docs/direct.md): the mount's .aifs/locations, `aifs locate`, and
// python/aifs_direct.py, which reads samples from the shards with no FUSE request.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// location is one file's record in .aifs/locations, or one line of `aifs locate`.
type location struct {
	shard          string // the shard's path
	offset, length uint64
	crc            uint32
}

// mountLocations reads mnt's .aifs/locations and returns each regular file's location by
// path relative to mnt, found through its inode number.
func mountLocations(t *testing.T, mnt string) map[string]location {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(mnt, ".aifs", "locations"))
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	if len(b) < 64 || string(b[:8]) != "AIFSLOC\x00" || le.Uint32(b[8:]) != 1 || le.Uint32(b[12:]) != 24 {
		t.Fatalf("locations header %q", b[:min(len(b), 64)])
	}
	records, table := le.Uint64(b[16:]), le.Uint64(b[24:])
	var shards []string
	p := table
	for range le.Uint32(b[32:]) {
		n := uint64(le.Uint16(b[p+8:]))
		shards = append(shards, string(b[p+10:p+10+n]))
		p += 10 + n
	}
	source := string(b[p+2 : p+2+uint64(le.Uint16(b[p:]))])
	out := map[string]location{}
	err = filepath.WalkDir(mnt, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			return err
		}
		if st.Ino < 1 || st.Ino > records {
			return fmt.Errorf("%s: inode %d outside the %d records", path, st.Ino, records)
		}
		r := b[64+24*(st.Ino-1):]
		shard := le.Uint32(r[16:])
		if shard >= uint32(len(shards)) {
			return fmt.Errorf("%s: record names shard %d of %d", path, shard, len(shards))
		}
		rel, _ := filepath.Rel(mnt, path)
		out[rel] = location{layout.ShardPath(source, layout.Shard{Name: shards[shard]}), le.Uint64(r), le.Uint64(r[8:]), le.Uint32(r[20:])}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// locateLines parses the output of `aifs locate`.
func locateLines(t *testing.T, out string) map[string]location {
	t.Helper()
	got := map[string]location{}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 5 {
			t.Fatalf("aifs locate line %q: %d fields, want 5", line, len(f))
		}
		path := f[0]
		if strings.HasPrefix(path, `"`) {
			var err error
			if path, err = strconv.Unquote(path); err != nil {
				t.Fatalf("aifs locate line %q: %v", line, err)
			}
		}
		off, err1 := strconv.ParseUint(f[2], 10, 64)
		n, err2 := strconv.ParseUint(f[3], 10, 64)
		crc, err3 := strconv.ParseUint(f[4], 16, 32)
		if err1 != nil || err2 != nil || err3 != nil || len(f[4]) != 8 {
			t.Fatalf("aifs locate line %q: bad numbers", line)
		}
		got[path] = location{f[1], off, n, uint32(crc)}
	}
	return got
}

// TestLocationsEdgeTree: for every file of the edge-case tree (odd names, empty files, a file
// larger than a shard), .aifs/locations and `aifs locate` (of the set and of the mount) agree,
// and the bytes at that place of that shard are the file's, with that CRC32C.
func TestLocationsEdgeTree(t *testing.T) {
	src := edgeTree(t)
	set := filepath.Join(t.TempDir(), "set")
	mustAifs(t, "pack", "--quiet", "--shard-size", "64K", src, set)
	mnt := mountSet(t, set)

	byInode := mountLocations(t, mnt)
	bySet := locateLines(t, mustAifs(t, "locate", set).stdout)
	if r := mustAifs(t, "locate", mnt); locateLinesEqual(locateLines(t, r.stdout), bySet) != "" {
		t.Errorf("aifs locate MOUNTPOINT differs from aifs locate SET: %s", locateLinesEqual(locateLines(t, r.stdout), bySet))
	}
	if diff := locateLinesEqual(byInode, bySet); diff != "" {
		t.Errorf(".aifs/locations differs from aifs locate: %s", diff)
	}
	files, empty, large := 0, 0, 0
	for rel, loc := range byInode {
		want, err := os.ReadFile(filepath.Join(mnt, rel))
		if err != nil {
			t.Fatal(err)
		}
		shard, err := os.Open(loc.shard)
		if err != nil {
			t.Fatalf("%q: %v", rel, err)
		}
		got := make([]byte, loc.length)
		_, err = shard.ReadAt(got, int64(loc.offset))
		shard.Close()
		if err != nil && !(err == io.EOF && len(got) == 0) {
			t.Fatalf("%q: reading %+v: %v", rel, loc, err)
		}
		if !bytes.Equal(got, want) || loc.crc != crc32.Checksum(want, castagnoli) {
			t.Errorf("%q: %+v holds other bytes than the file's %d (CRC32C %08x)", rel, loc, len(want), crc32.Checksum(want, castagnoli))
		}
		files++
		if len(want) == 0 {
			empty++
		}
		if len(want) > 64<<10 {
			large++
		}
	}
	if files != countFiles(sourceEntries(t, src, false)) || empty < 2 || large < 1 {
		t.Errorf("%d files located (%d empty, %d over a shard); the source has %d", files, empty, large, countFiles(sourceEntries(t, src, false)))
	}
	sub := locateLines(t, mustAifs(t, "locate", mnt, filepath.Join(mnt, "a"), "large.bin").stdout)
	for p := range sub {
		if !strings.HasPrefix(p, "a/") && p != "large.bin" {
			t.Errorf("aifs locate MNT MNT/a large.bin printed %q", p)
		}
	}
	if r := aifs(t, "locate", set, "no/such"); r.code != 1 || !strings.Contains(r.stderr, "no such file") {
		t.Errorf("aifs locate of a missing path: %s", r)
	}
}

// locateLinesEqual returns "" if a and b hold the same locations, else a difference.
func locateLinesEqual(a, b map[string]location) string {
	if len(a) != len(b) {
		return fmt.Sprintf("%d files against %d", len(a), len(b))
	}
	for p, l := range a {
		if b[p] != l {
			return fmt.Sprintf("%q: %+v against %+v", p, l, b[p])
		}
	}
	return ""
}

// directCheck runs torchcheck/direct.py with args and returns its output (stdout), failing
// the test unless it exits 0.
func directCheck(t *testing.T, args ...string) string {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("torchcheck", "direct.py"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), pythonTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, torchPython, append([]string{script}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("direct.py %s: %v\n%s", strings.Join(args, " "), err, clip(string(out)))
	}
	return strings.TrimSpace(string(out))
}

// TestDirectReads: aifs_direct reads every file of the edge-case tree and of the JPEG set with
// the mount's bytes, locating every one, with no FUSE READ; ImageFolder with the direct loader
// decodes the same tensors as through the mount.
func TestDirectReads(t *testing.T) {
	edge := filepath.Join(t.TempDir(), "edge")
	mustAifs(t, "pack", "--quiet", "--shard-size", "64K", edgeTree(t), edge)
	_, jpegs := jpegSet(t)
	for _, set := range []string{edge, jpegs} {
		mnt := mountSet(t, set)
		var got struct {
			Files               int `json:"files"`
			Located             int `json:"located"`
			FuseReadsDirectPass int `json:"fuse_reads_direct_pass"`
		}
		out := directCheck(t, "read", mnt)
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("direct.py read: %q: %v", out, err)
		}
		if got.Files == 0 || got.Located != got.Files || got.FuseReadsDirectPass != 0 {
			t.Errorf("%s: %s; want every file located and read with no FUSE READ", filepath.Base(set), out)
		}
		t.Logf("%s: %s", filepath.Base(set), out)
		if set == jpegs {
			t.Log(directCheck(t, "imagefolder", mnt))
		}
	}
}

// TestDirectCorrupt: with check=True, aifs_direct reports a sample whose bytes in the shard no
// longer match the index's CRC32C, naming it; without, it returns the bytes as they are.
func TestDirectCorrupt(t *testing.T) {
	set := copySet(t, corruptionSet(t))
	x := loadSet(t, set)
	id, err := x.LookupPath("b/sample-04.bin")
	if err != nil {
		t.Fatal("b/sample-04.bin is not in the set")
	}
	e := x.Entry(id)
	flipByte(t, filepath.Join(set, x.Shards()[e.Shard].Name), int64(e.Offset+e.Size/2))
	mnt := mountSet(t, set)
	out := directCheck(t, "corrupt", mnt, filepath.Join(mnt, "b", "sample-04.bin"))
	if !strings.Contains(out, "sample-04.bin") || !strings.Contains(out, x.Shards()[e.Shard].Name) {
		t.Errorf("the error does not name the sample and its shard: %s", out)
	}
}

// TestDirectRemount: a process that opened the mount and read a file finds, after the set is
// unmounted and another mounted at the same place, that the mount changed, reloads the
// locations (another identity) and reads the new set's bytes.
func TestDirectRemount(t *testing.T) {
	first, second := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(first, "c", "f.bin"), randomBytes(1, 5000))
	writeFile(t, filepath.Join(second, "a", "pad.bin"), randomBytes(2, 7000)) // other inodes, other offsets
	writeFile(t, filepath.Join(second, "c", "f.bin"), randomBytes(3, 6000))
	sets := [2]string{filepath.Join(t.TempDir(), "s1"), filepath.Join(t.TempDir(), "s2")}
	mustAifs(t, "pack", "--quiet", first, sets[0])
	mustAifs(t, "pack", "--quiet", second, sets[1])
	mnt := filepath.Join(t.TempDir(), "mnt")
	mkdir(t, mnt)
	mustAifs(t, "mount", sets[0], mnt)
	pid := daemonPID(t, mnt)
	t.Cleanup(func() { unmount(t, mnt, 0) })

	script, _ := filepath.Abs(filepath.Join("torchcheck", "direct.py"))
	cmd := exec.Command(torchPython, script, "remount", mnt, filepath.Join(mnt, "c", "f.bin"))
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("direct.py remount: %q, %s", lines.Text(), stderr.String())
	}
	unmount(t, mnt, pid)
	mustAifs(t, "mount", sets[1], mnt)
	io.WriteString(stdin, "go\n")
	if !lines.Scan() {
		cmd.Wait()
		t.Fatalf("direct.py remount: no result: %s", stderr.String())
	}
	var got struct {
		Stale           int    `json:"stale"`
		IdentityChanged bool   `json:"identity_changed"`
		First           string `json:"first_sha256"`
		Second          string `json:"second_sha256"`
		SameAsMount     bool   `json:"same_as_mount"`
	}
	if err := json.Unmarshal(lines.Bytes(), &got); err != nil {
		t.Fatalf("direct.py remount: %q: %v", lines.Text(), err)
	}
	if got.Stale != 1 || !got.IdentityChanged || got.First == got.Second || !got.SameAsMount {
		t.Errorf("after the remount: %+v; want the remount found, another identity, the new bytes", got)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("direct.py remount: %v: %s", err, stderr.String())
	}
}
