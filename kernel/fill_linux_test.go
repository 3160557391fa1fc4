package kernel

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

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
	return fillMountWith(t, set, x, image, dir, FillOptions{Chunk: 64 << 10, Fetch: fetch})
}

// fillMountWith is fillMount with the Filler's options (a nil Fetch reads the shards).
func fillMountWith(t *testing.T, set string, x *layout.Index, image, dir string, opt FillOptions) (*Filler, []string, string) {
	t.Helper()
	var copies []string
	var sizes []int64
	for _, s := range x.Shards() {
		copies = append(copies, filepath.Join(dir, filepath.Base(layout.ShardPath(set, s))))
		sizes = append(sizes, int64(s.Size))
	}
	if opt.Fetch == nil {
		origs := openShards(t, set, x)
		opt.Fetch = func(_ context.Context, shard int, off int64, p []byte) error {
			_, err := origs[shard].ReadAt(p, off)
			return err
		}
	}
	fl, err := NewFiller(copies, sizes, opt)
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
		var first string
		for name := range files {
			first = name
			break
		}
		// A read by another process is a reader's (on demand); this process's are reads ahead.
		if out, err := exec.Command("cat", filepath.Join(mnt, first)).Output(); err != nil || !bytes.Equal(out, files[first]) {
			t.Fatalf("cat %s: %v (%d bytes, want %d)", first, err, len(out), len(files[first]))
		}
		if st := fl.Stats(); st.Demand == 0 || st.Ahead != 0 || st.WaitP50us <= 0 {
			t.Errorf("stats %+v after another process read a file: want chunks fetched on demand and their wait", st)
		}
		check(mnt, "read through the sparse copies")
		st := fl.Stats()
		if st.Ahead == 0 || st.Events == 0 || st.Waited == 0 || st.Failed != 0 {
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
		if _, err := os.Stat(copies[0] + FilledSuffix); err == nil {
			t.Errorf("the filled record of %s exists before Persist", copies[0])
		}
	})
	before := len(fetches)
	t.Run("again", func(t *testing.T) {
		fl, _, mnt := fillMount(t, set, x, image, dir, fetch)
		check(mnt, "read again through copies filled before")
		if st := fl.Stats(); st.Demand+st.Ahead != 0 {
			t.Errorf("a Filler over copies filled before fetched %d chunks (%+v)", st.Demand+st.Ahead, st)
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

// TestFillerEvict: with a budget of a third of the set, reading it three times through the
// plane punches chunks out again, reads chunks outside the stable subset through (their pages
// only), keeps what is filled (and the copies' blocks on disk) near
// the budget, and every read still gets the source's bytes, never a hole's zeros.
func TestFillerEvict(t *testing.T) {
	files, set, x, image := fillSet(t)
	var total int64
	for _, s := range x.Shards() {
		total += int64(s.Size)
	}
	budget := total / 3
	fl, copies, mnt := fillMountWith(t, set, x, image, t.TempDir(), FillOptions{Chunk: 64 << 10, Budget: budget, Grace: 20 * time.Millisecond})
	names := slices.Sorted(maps.Keys(files))
	for pass := range 3 {
		for _, name := range names {
			got, err := os.ReadFile(filepath.Join(mnt, name))
			if err != nil || !bytes.Equal(got, files[name]) {
				t.Fatalf("pass %d: %s: %v (%d bytes, want the source's %d)", pass, name, err, len(got), len(files[name]))
			}
			time.Sleep(2 * time.Millisecond) // let evict run within the pass
		}
		dropPages(t, mnt, files)
	}
	deadline := time.Now().Add(5 * time.Second)
	for st := fl.Stats(); (st.FilledBytes > budget || st.Punched == 0) && time.Now().Before(deadline); st = fl.Stats() {
		time.Sleep(50 * time.Millisecond)
	}
	st := fl.Stats()
	if st.Punched == 0 || st.FilledBytes > budget || st.PunchFailed != 0 || st.Failed != 0 || st.Through == 0 {
		t.Fatalf("stats %+v: want chunks punched, reads through chunks outside the subset, and at most %d bytes filled", st, budget)
	}
	onDisk := func() (n int64) {
		for _, c := range copies {
			var s unix.Stat_t
			if err := unix.Stat(c, &s); err != nil {
				t.Fatal(err)
			}
			n += s.Blocks * 512
		}
		return n
	}
	slack := int64(len(copies)) * (64 << 10)
	for onDisk() > budget+slack && time.Now().Before(deadline.Add(5*time.Second)) { // the last victims' punches, after the grace
		time.Sleep(50 * time.Millisecond)
	}
	if n := onDisk(); n > budget+slack {
		t.Errorf("the copies take %d bytes on disk, want at most the budget %d (+%d); stats %+v", n, budget, slack, fl.Stats())
	}
}

// TestFillerAdopt: a daemon dies with a read it took from the group unanswered and another
// queued; the group and the copies are held elsewhere (the keeper). AdoptFiller fails the read
// taken with EIO (the page cache may try it again: then its Run answers it), never a hole's
// zeros, and its Run fills and allows the queued one and those
// after.
func TestFillerAdopt(t *testing.T) {
	files, set, x, image := fillSet(t)
	dir := t.TempDir()
	var copies []string
	var sizes []int64
	for _, s := range x.Shards() {
		copies = append(copies, filepath.Join(dir, filepath.Base(layout.ShardPath(set, s))))
		sizes = append(sizes, int64(s.Size))
	}
	origs := openShards(t, set, x)
	opt := FillOptions{Chunk: 64 << 10, Fetch: func(_ context.Context, shard int, off int64, p []byte) error {
		_, err := origs[shard].ReadAt(p, off)
		return err
	}}
	dead, err := NewFiller(copies, sizes, opt) // never Run: it takes one event by hand and dies
	if err != nil {
		t.Fatal(err)
	}
	mnt := t.TempDir()
	if err := Mount(image, copies, mnt, true); err != nil {
		dead.Close()
		t.Fatal(err)
	}
	defer Unmount(mnt)
	names := slices.Sorted(maps.Keys(files))
	cat := func(name string) (*exec.Cmd, *bytes.Buffer) {
		c := exec.Command("cat", filepath.Join(mnt, name))
		var out bytes.Buffer
		c.Stdout = &out
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		return c, &out
	}
	taken, takenOut := cat(names[0])
	// The dead daemon's read of the event: poll, read, and never answer.
	fan, copyFDs := dead.FDs()
	p := []unix.PollFd{{Fd: int32(fan), Events: unix.POLLIN}}
	if n, err := unix.Poll(p, 5000); n != 1 || err != nil {
		t.Fatalf("no event for the read of %s: %v", names[0], err)
	}
	buf := make([]byte, 4096)
	n, err := unix.Read(fan, buf)
	if err != nil || n < eventSize {
		t.Fatalf("read fanotify: %d bytes, %v", n, err)
	}
	unix.Close(int(int32(binary.NativeEndian.Uint32(buf[16:20])))) // its descriptors die with it
	// The keeper's copies of the group and the copies' descriptors; then the daemon dies.
	heldFan, err := unix.FcntlInt(uintptr(fan), unix.F_DUPFD_CLOEXEC, 0) // not inherited by the cats: a reader holding the group would wait for itself
	if err != nil {
		t.Fatal(err)
	}
	var held []*os.File
	for i, fd := range copyFDs {
		d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, os.NewFile(uintptr(d), copies[i]))
	}
	dead.Close()
	queued, queuedOut := cat(names[len(names)-1]) // waits, with no daemon
	time.Sleep(100 * time.Millisecond)

	fl, err := AdoptFiller(heldFan, held, copies, sizes, opt)
	if err != nil {
		t.Fatal(err)
	}
	if st := fl.Stats(); st.Orphans != 1 {
		t.Errorf("stats %+v: want 1 orphaned read failed", st)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fl.Run(ctx) }()
	defer func() {
		cancel()
		<-done
		fl.Close()
	}()
	// The page cache tries a failed read again (a new event, which Run answers): the reader
	// gets EIO or the source's bytes.
	if err := taken.Wait(); err == nil && !bytes.Equal(takenOut.Bytes(), files[names[0]]) {
		t.Errorf("the read the dead daemon took got %d bytes, not the source's: want EIO or them", takenOut.Len())
	}
	if err := queued.Wait(); err != nil || !bytes.Equal(queuedOut.Bytes(), files[names[len(names)-1]]) {
		t.Errorf("the read queued while no daemon ran: %v (%d bytes), want the source's bytes", err, queuedOut.Len())
	}
	for _, name := range names {
		got, err := os.ReadFile(filepath.Join(mnt, name))
		if err != nil || !bytes.Equal(got, files[name]) {
			t.Fatalf("%s after the takeover: %v (%d bytes, want %d)", name, err, len(got), len(files[name]))
		}
	}
}

// TestFillerStage: with StageShards, a reader's first read of a copy has the whole copy filled
// in the background; once Stage is called (a plan), reads stage no more whole copies, and what
// Stage names is filled ahead of any read.
func TestFillerStage(t *testing.T) {
	files, set, x, image := fillSet(t)
	fl, _, mnt := fillMountWith(t, set, x, image, t.TempDir(), FillOptions{Chunk: 64 << 10, StageShards: true})
	shardOf := func(name string) int {
		id, _ := x.LookupPath(name)
		return int(x.Entry(id).Shard)
	}
	whole := func(shard int) bool { return fl.shards[shard].holes.Load() == 0 }
	wait := func(what string, ok func() bool) {
		t.Helper()
		for end := time.Now().Add(5 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%s: not within 5 s (stats %+v)", what, fl.Stats())
			}
		}
	}
	names := slices.Sorted(maps.Keys(files))
	first := names[0]
	if out, err := exec.Command("cat", filepath.Join(mnt, first)).Output(); err != nil || !bytes.Equal(out, files[first]) {
		t.Fatalf("cat %s: %v", first, err)
	}
	wait("the copy first read filled whole", func() bool { return whole(shardOf(first)) })

	last := len(x.Shards()) - 1
	if whole(last) {
		t.Fatalf("shard %d whole before any read of it", last)
	}
	fl.Stage(last, 0, int64(x.Shards()[last].Size))
	wait("the copy a plan names filled whole", func() bool { return whole(last) })
	var other string // a file of a shard neither read nor staged
	for _, name := range names {
		if s := shardOf(name); s != shardOf(first) && s != last && !whole(s) {
			other = name
			break
		}
	}
	if other == "" {
		t.Fatal("no shard left to read")
	}
	if out, err := exec.Command("cat", filepath.Join(mnt, other)).Output(); err != nil || !bytes.Equal(out, files[other]) {
		t.Fatalf("cat %s: %v", other, err)
	}
	time.Sleep(200 * time.Millisecond)
	if whole(shardOf(other)) {
		t.Errorf("a read after a plan staged its whole copy (%s, shard %d)", other, shardOf(other))
	}
	if st := fl.Stats(); st.Ahead == 0 || st.Demand == 0 {
		t.Errorf("stats %+v: want chunks filled on demand and ahead", st)
	}
}

// TestFillerHeldAfterFetch: a read over two chunks, one filled and one a hole whose fetch is
// slow, while the filled one is taken back and punched (a budget of nothing, a short grace):
// the read is allowed only once both are filled again, and gets the source's bytes, not the
// punched chunk's zeros.
func TestFillerHeldAfterFetch(t *testing.T) {
	files, set, x, image := fillSet(t)
	const chunk = 64 << 10
	var name string // a file across a chunk boundary
	for n := range files {
		id, _ := x.LookupPath(n)
		if e := x.Entry(id); e.Offset/chunk != (e.Offset+e.Size-1)/chunk {
			name = n
			break
		}
	}
	if name == "" {
		t.Fatal("no file crosses a chunk boundary")
	}
	id, _ := x.LookupPath(name)
	e := x.Entry(id)
	first := int64(e.Offset) / chunk
	origs := openShards(t, set, x)
	release := make(chan struct{})
	fl, _, mnt := fillMountWith(t, set, x, image, t.TempDir(), FillOptions{Chunk: chunk, Budget: 1, Grace: 10 * time.Millisecond,
		Fetch: func(_ context.Context, shard int, off int64, p []byte) error {
			if shard == int(e.Shard) && off == (first+1)*chunk {
				<-release // the second chunk's fetch waits while the first is punched
			}
			_, err := origs[shard].ReadAt(p, off)
			return err
		}})
	if err := fl.Fill(context.Background(), int(e.Shard), first*chunk, 1); err != nil {
		t.Fatal(err)
	}
	cat := exec.Command("cat", filepath.Join(mnt, name))
	var out bytes.Buffer
	cat.Stdout = &out
	if err := cat.Start(); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(5 * time.Second); fl.Stats().Punched == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			close(release)
			t.Fatalf("the filled chunk was not punched in 5 s: %+v", fl.Stats())
		}
	}
	close(release)
	if err := cat.Wait(); err != nil || !bytes.Equal(out.Bytes(), files[name]) {
		t.Fatalf("cat %s: %v (%d bytes, want the source's %d; zeros: %v)", name, err, out.Len(), len(files[name]),
			bytes.Count(out.Bytes(), []byte{0}) > len(files[name])/2)
	}
}
