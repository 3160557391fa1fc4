//go:build integration

package integration

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/aifs/aifs/layout"
)

// The scale issue (docs/scale.md): an index is read and checked block by block as the tree is
// used, so a mount of any size is live at once and holds what was used. These tests mount sets
// written by integration/genindex (the index as aifs pack writes it, over sparse shards).

// genIndex writes a set of samples files in dirs directories into a new directory (see
// integration/genindex) and returns it.
func genIndex(t *testing.T, samples, dirs, real int, extra ...string) string {
	t.Helper()
	bin := filepath.Join(workDir, "genindex")
	if _, err := os.Stat(bin); err != nil {
		if out, err := exec.Command("go", "build", "-o", bin, "github.com/aifs/aifs/integration/genindex").CombinedOutput(); err != nil {
			t.Fatalf("building genindex: %v\n%s", err, out)
		}
	}
	set := filepath.Join(worldDir(t), "set")
	args := append([]string{"-samples", strconv.Itoa(samples), "-dirs", strconv.Itoa(dirs), "-real", strconv.Itoa(real),
		"-size", "4096", "-shard-size", strconv.Itoa(64 << 20)}, extra...)
	if out, err := exec.Command(bin, append(args, set)...).CombinedOutput(); err != nil {
		t.Fatalf("genindex: %v\n%s", err, out)
	}
	return set
}

// realSamples reads the set's real.txt: path → CRC32C.
func realSamples(t *testing.T, set string) map[string]uint32 {
	t.Helper()
	f, err := os.Open(filepath.Join(set, "real.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]uint32{}
	for sc := bufio.NewScanner(f); sc.Scan(); {
		path, sum, _ := strings.Cut(sc.Text(), "\t")
		crc, err := strconv.ParseUint(sum, 16, 32)
		if err != nil {
			t.Fatalf("real.txt: %q", sc.Text())
		}
		out[path] = uint32(crc)
	}
	return out
}

// TestScaleMountReadsOnUse mounts 300,000 samples: the mount reads a sliver of its index until
// the tree is used; every directory lists whole (reading the entries and names but not the lookup
// table), random paths resolve, and the real samples read back with their checksums (verify=on).
func TestScaleMountReadsOnUse(t *testing.T) {
	const samples, dirs = 300_000, 300
	set := genIndex(t, samples, dirs, 300)
	mnt := mountSet(t, set, "-o", "verify=on")
	st := readStats(t, mnt)
	if st.Index.Bytes == 0 || st.Index.ReadBytes*20 > st.Index.Bytes {
		t.Fatalf("after mount the index is %d bytes of which %d were read: want under 5%%", st.Index.Bytes, st.Index.ReadBytes)
	}
	afterMount := st.Index.ReadBytes

	// Every directory, listed whole: the entries and names are read, the lookup table is not.
	top, err := os.ReadDir(mnt)
	if err != nil || len(top) != dirs {
		t.Fatalf("the root lists %d entries (%v), want %d", len(top), err, dirs)
	}
	total := 0
	for _, d := range top {
		ents, err := os.ReadDir(filepath.Join(mnt, d.Name()))
		if err != nil {
			t.Fatal(err)
		}
		total += len(ents)
	}
	if total != samples {
		t.Errorf("the directories list %d files, want %d", total, samples)
	}
	st = readStats(t, mnt)
	afterList := st.Index.ReadBytes
	if afterList >= st.Index.Bytes || afterList*2 < st.Index.Bytes {
		t.Errorf("after listing every directory %d of %d index bytes were read: want the entries and names, not the lookup table", afterList, st.Index.Bytes)
	}

	// Random paths, looked up by stat (each a LOOKUP of the directory and of the file).
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		d := rng.IntN(dirs)
		class := fmt.Sprintf("n%08d", 1440764+d*937)
		k := rng.IntN(samples / dirs)
		fi, err := os.Stat(filepath.Join(mnt, class, fmt.Sprintf("%s_%08d.JPEG", class, k)))
		if err != nil || fi.Size() != 4096 {
			t.Fatalf("stat of sample %d of %s: %v", k, class, err)
		}
	}
	if _, err := os.Stat(filepath.Join(mnt, "n01440764", "n01440764_99999999.JPEG")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat of a missing sample: %v, want ENOENT", err)
	}

	// The real samples, read through the mount and checked by the daemon (verify=on) and here.
	for path, crc := range realSamples(t, set) {
		b, err := os.ReadFile(filepath.Join(mnt, path))
		if err != nil || layout.Checksum(b) != crc {
			t.Fatalf("%s: %v, crc32c %08x, want %08x", path, err, layout.Checksum(b), crc)
		}
	}
	st = readStats(t, mnt)
	if st.Index.Error != "" || st.Errors != 0 {
		t.Errorf("index error %q, %d request errors", st.Index.Error, st.Errors)
	}
	t.Logf("index %d bytes: %d read after mount, %d after a listing of every directory, %d after lookups", st.Index.Bytes, afterMount, afterList, st.Index.ReadBytes)
}

// TestScaleCorruptIndexBlock flips one byte of one entries block of a set's index: the mount
// comes up (the block is not read yet), serves every other directory, answers the samples of the
// damaged block with EIO and names the block in its stats; aifs verify, ls and locate report it,
// and .aifs/locations gives EIO rather than a record of zeros.
func TestScaleCorruptIndexBlock(t *testing.T) {
	const samples, dirs = 20_000, 20
	set := genIndex(t, samples, dirs, 20)
	// Sample 500 of class 10 (file 10,500 in pack order): its entry's mtime gets one bit flipped.
	x, err := layout.Load(set)
	if err != nil {
		t.Fatal(err)
	}
	victimClass := fmt.Sprintf("n%08d", 1440764+10*937)
	victim := fmt.Sprintf("%s/%s_%08d.JPEG", victimClass, victimClass, 500)
	id, err := x.LookupPath(victim)
	x.Close()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(set, layout.IndexName), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var head [256]byte
	f.ReadAt(head[:], 0)
	entries := int64(binary.LittleEndian.Uint64(head[56:])) // the entries section's offset (FORMAT.md, version 3)
	var b [1]byte
	at := entries + int64(id)*41 + 12 // the mtime's first byte
	f.ReadAt(b[:], at)
	b[0] ^= 0x40
	f.WriteAt(b[:], at)
	f.Close()

	mnt := mountSet(t, set)
	other := fmt.Sprintf("n%08d", 1440764+3*937)
	if ents, err := os.ReadDir(filepath.Join(mnt, other)); err != nil || len(ents) != samples/dirs {
		t.Fatalf("an undamaged directory lists %d entries: %v", len(ents), err)
	}
	if _, err := os.Stat(filepath.Join(mnt, victim)); !errors.Is(err, syscall.EIO) {
		t.Errorf("stat of the damaged sample: %v, want EIO", err)
	}
	if _, err := os.ReadDir(filepath.Join(mnt, victimClass)); !errors.Is(err, syscall.EIO) {
		t.Errorf("listing the damaged directory: %v, want EIO", err)
	}
	if _, err := os.Stat(filepath.Join(mnt, other, fmt.Sprintf("%s_%08d.JPEG", other, 7))); err != nil {
		t.Errorf("after the damage was found, an undamaged sample: %v", err)
	}
	st := readStats(t, mnt)
	if !strings.Contains(st.Index.Error, "entries block") || st.Errors == 0 {
		t.Errorf("stats: index error %q, %d request errors; want the block named and errors counted", st.Index.Error, st.Errors)
	}
	r := aifs(t, "verify", "--quiet", set)
	if r.code == 0 || !strings.Contains(r.stderr, "entries block") {
		t.Errorf("aifs verify of the damaged set: %s; want a failure naming the block", r)
	}
	r = aifs(t, "ls", set, victimClass)
	if r.code == 0 || !strings.Contains(r.stderr, "entries block") {
		t.Errorf("aifs ls of the damaged directory: %s; want a failure naming the block", r)
	}
	r = aifs(t, "locate", set, victimClass)
	if r.code == 0 || !strings.Contains(r.stderr, "entries block") || strings.Contains(r.stdout, "\t0\t0\t00000000") {
		t.Errorf("aifs locate of the damaged directory: %s; want a failure naming the block, and no zero record", r)
	}
	if _, err := os.ReadFile(filepath.Join(mnt, ".aifs", "locations")); !errors.Is(err, syscall.EIO) {
		t.Errorf("reading .aifs/locations over the damaged block: %v, want EIO", err)
	}
}
