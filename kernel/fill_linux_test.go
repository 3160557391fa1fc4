package kernel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/layout/pack"
)

// fillSet packs 48 files of 20-60 KB in three directories into shards of 256 KiB and returns
// the source tree's bytes by path, the set's directory and index, and its EROFS image.
func fillSet(t *testing.T) (map[string][]byte, string, *layout.Index, string) {
	t.Helper()
	src, set := t.TempDir(), filepath.Join(t.TempDir(), "set")
	files := map[string][]byte{}
	for i := range 48 {
		name := fmt.Sprintf("d%d/f%02d.bin", i%3, i)
		b := bytes.Repeat([]byte{byte(i), byte(i >> 1), 7}, (20000+900*i)/3)
		files[name] = b
		os.MkdirAll(filepath.Join(src, filepath.Dir(name)), 0o755)
		if err := os.WriteFile(filepath.Join(src, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	x, image := packSet(t, src, set, pack.Options{ShardSize: 256 << 10})
	return files, set, x, image
}

// fillMount makes a Filler over sparse copies (in dir) of the set's shards, fetching from the
// shards themselves through fetch (nil: read them), runs it and mounts the plane over the copies;
// cleanup unmounts the plane, then ends the Filler. It returns the Filler, the copies and the
// mountpoint.
func fillMount(t *testing.T, set string, x *layout.Index, image, dir string, fetch Fetch) (*Filler, []string, string) {
	t.Helper()
	var copies []string
	var sizes []int64
	for _, s := range x.Shards() {
		copies = append(copies, filepath.Join(dir, filepath.Base(layout.ShardPath(set, s))))
		sizes = append(sizes, int64(s.Size))
	}
	if fetch == nil {
		origs := openShards(t, set, x)
		fetch = func(_ context.Context, shard int, off int64, p []byte) error {
			_, err := origs[shard].ReadAt(p, off)
			return err
		}
	}
	fl, err := NewFiller(copies, sizes, 64<<10, fetch)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fl.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Filler.Run: %v", err)
		}
		if err := fl.Close(); err != nil {
			t.Errorf("Filler.Close: %v", err)
		}
	})
	mnt := t.TempDir()
	if err := Mount(image, copies, mnt, true); err != nil { // after the marks: EROFS opens the copies now
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := Unmount(mnt); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	return fl, copies, mnt
}

// dropPages drops the plane's pages of every file, so that the next reads go to the copies.
func dropPages(t *testing.T, mnt string, files map[string][]byte) {
	t.Helper()
	for name := range files {
		f, err := os.Open(filepath.Join(mnt, name))
		if err != nil {
			t.Fatal(err)
		}
		unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		f.Close()
	}
}

// TestFiller: the kernel plane over sparse copies of its shards, which a Filler fills from the
// shards on the reads' pre-content events: every file reads as the source's bytes, no chunk is
// fetched twice, a copy filled whole loses its mark (its reads raise no event), and a Filler
// made again over the same copies (what is filled persisted) fetches nothing again.
func TestFiller(t *testing.T) {
	files, set, x, image := fillSet(t)
	dir := t.TempDir()
	var mu sync.Mutex
	fetches := map[[2]int64]int{}
	origs := openShards(t, set, x)
	fetch := func(_ context.Context, shard int, off int64, p []byte) error {
		mu.Lock()
		fetches[[2]int64{int64(shard), off}]++
		mu.Unlock()
		_, err := origs[shard].ReadAt(p, off)
		return err
	}
	check := func(mnt, when string) {
		t.Helper()
		for name, want := range files {
			got, err := os.ReadFile(filepath.Join(mnt, name))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s: %s: %v (%d bytes, want %d)", when, name, err, len(got), len(want))
			}
		}
	}
	t.Run("fill", func(t *testing.T) {
		fl, copies, mnt := fillMount(t, set, x, image, dir, fetch)
		check(mnt, "read through the sparse copies")
		st := fl.Stats()
		if st.Fetched == 0 || st.Events == 0 || st.Waited == 0 || st.Failed != 0 {
			t.Errorf("stats %+v: want chunks fetched on events, none failed", st)
		}
		mu.Lock()
		for k, n := range fetches {
			if n != 1 {
				t.Errorf("chunk at %v fetched %d times", k, n)
			}
		}
		mu.Unlock()
		if err := fl.Fill(context.Background(), 0, 0, int64(x.Shards()[0].Size)); err != nil {
			t.Fatal(err)
		}
		if st := fl.Stats(); st.Whole == 0 {
			t.Errorf("stats %+v after shard 0 was filled whole: want it whole", st)
		}
		events := fl.Stats().Events
		var shard0 []string
		for name := range files {
			if id, _ := x.LookupPath(name); x.Entry(id).Shard == 0 {
				shard0 = append(shard0, name)
			}
		}
		dropPages(t, mnt, files)
		for _, name := range shard0 {
			os.ReadFile(filepath.Join(mnt, name))
		}
		if st := fl.Stats(); st.Events != events {
			t.Errorf("reads of a copy filled whole raised %d events", st.Events-events)
		}
		if _, err := os.Stat(copies[0] + filledSuffix); err == nil {
			t.Errorf("the filled record of %s exists before Persist", copies[0])
		}
	})
	before := len(fetches)
	t.Run("again", func(t *testing.T) {
		fl, _, mnt := fillMount(t, set, x, image, dir, fetch)
		check(mnt, "read again through copies filled before")
		if st := fl.Stats(); st.Fetched != 0 {
			t.Errorf("a Filler over copies filled before fetched %d chunks (%+v)", st.Fetched, st)
		}
	})
	if len(fetches) != before {
		t.Errorf("%d chunks fetched again", len(fetches)-before)
	}
}

// TestFillerFails: where a chunk cannot be fetched (S3 down), the read that needs it fails with
// EIO, never reads a hole's zeros, and the next read, once fetches work again, succeeds.
func TestFillerFails(t *testing.T) {
	files, set, x, image := fillSet(t)
	var down sync.Mutex // held: fetches fail
	origs := openShards(t, set, x)
	fetch := func(_ context.Context, shard int, off int64, p []byte) error {
		if !down.TryLock() {
			return errors.New("S3 is down")
		}
		defer down.Unlock()
		_, err := origs[shard].ReadAt(p, off)
		return err
	}
	fl, _, mnt := fillMount(t, set, x, image, t.TempDir(), fetch)
	down.Lock()
	for name := range files {
		b, err := os.ReadFile(filepath.Join(mnt, name))
		if !errors.Is(err, syscall.EIO) {
			t.Fatalf("%s with S3 down: %v (%d bytes), want EIO", name, err, len(b))
		}
		break
	}
	if st := fl.Stats(); st.Failed == 0 {
		t.Errorf("stats %+v: want the failed read counted", st)
	}
	down.Unlock()
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(mnt, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s once S3 is back: %v (%d bytes, want %d)", name, err, len(got), len(want))
		}
	}
}

// openShards opens the shards of set, in order, until the test ends.
func openShards(t *testing.T, set string, x *layout.Index) []*os.File {
	t.Helper()
	var fs []*os.File
	for _, s := range x.Shards() {
		f, err := os.Open(layout.ShardPath(set, s))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		fs = append(fs, f)
	}
	return fs
}
