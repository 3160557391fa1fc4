//go:build integration

package integration

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"golang.org/x/sys/unix"

	"github.com/aifs/aifs/backend/s3/s3test"
	"github.com/aifs/aifs/plan"
)

// The kernel plane over sets in S3 (docs/kernel.md, "The plane over S3"): EROFS over sparse
// local copies of the shards in the cache directory, filled from S3 on the reads' fanotify
// pre-content events. These tests need what the kernel plane needs, and Linux 6.14+ (CI has
// 6.18).

// kernelS3Set packs n files of random bytes (3-63 KB) into shards of 4 MiB at prefix in srv's
// bucket, and returns the source directory, the set's URL and its shards' bytes.
func kernelS3Set(t *testing.T, srv *s3test.Server, prefix string, n int) (src, url string, size int64) {
	return kernelS3SetSeed(t, srv, prefix, n, 11)
}

// kernelS3SetSeed is kernelS3Set with the random bytes' seed.
func kernelS3SetSeed(t *testing.T, srv *s3test.Server, prefix string, n int, seed uint64) (src, url string, size int64) {
	t.Helper()
	src = t.TempDir()
	for i := range n {
		writeFile(t, filepath.Join(src, fmt.Sprintf("c%d", i%8), fmt.Sprintf("s-%04d.bin", i)), randomBytes(uint64(i)+seed, 3000+(i*7919)%60000))
	}
	url = "s3://" + srv.Bucket + "/" + prefix
	mustAifs(t, "pack", "--quiet", "--shard-size", "4M", src, url)
	return src, url, shardBytes(t, srv, prefix)
}

// shardBytes returns the bytes of the shard objects of the set at prefix in srv's bucket.
func shardBytes(t *testing.T, srv *s3test.Server, prefix string) (size int64) {
	t.Helper()
	for obj := range srv.Client().ListObjects(t.Context(), srv.Bucket, minio.ListObjectsOptions{Prefix: prefix + "/", Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		if strings.HasSuffix(obj.Key, ".dat") {
			size += obj.Size
		}
	}
	return size
}

// mountKernelS3 mounts the set at url on the kernel plane with the cache directory cache (and
// the options opts), checking that the plane is the kernel's over S3.
func mountKernelS3(t *testing.T, url, cache, opts string) string {
	t.Helper()
	mnt := mountKernel(t, url, "-o", "cache_dir="+cache+opts)
	s := readStats(t, filepath.Dir(plan.Control(mnt)))
	if s.DataPlane.Plane != "kernel" || !strings.Contains(s.DataPlane.Reason, "S3") {
		t.Fatalf("data plane %+v, want the kernel's over S3", s.DataPlane)
	}
	return mnt
}

// fillStat returns one figure of the kernel plane's Filler (storage.kernel_fill of the stats).
func fillStat(t *testing.T, mnt, field string) int64 {
	t.Helper()
	return storageStat(t, filepath.Dir(plan.Control(mnt)), "kernel_fill", field)
}

// s3Stat returns one figure of the S3 backend's statistics of the kernel plane at mnt.
func s3Stat(t *testing.T, mnt, field string) int64 {
	t.Helper()
	return storageStat(t, filepath.Dir(plan.Control(mnt)), "s3", field)
}

// TestKernelPlaneS3: over versitygw and MinIO (erasure-coded), the kernel plane of an S3 set
// shows the source's tree and bytes; the first epoch fetches the set about once (chunks on
// demand), and a mount again over the same cache fetches nothing and its reads reach no daemon
// (every copy whole, unmarked).
func TestKernelPlaneS3(t *testing.T) {
	needKernelPlane(t)
	for _, server := range []string{"versitygw", "minio"} {
		t.Run(server, func(t *testing.T) {
			srv := s3test.Start(t)
			if server == "minio" {
				srv = s3test.StartMinIO(t)
			}
			setS3Env(t, srv)
			src, url, size := kernelS3Set(t, srv, "k", 600)
			want := digest(sourceEntries(t, src, true))
			cache := filepath.Join(t.TempDir(), "cache")
			mnt := mountKernelS3(t, url, cache, "")
			if d := digest(sourceEntries(t, mnt, true)); d != want {
				t.Fatalf("the kernel plane over S3 differs from the source")
			}
			if got := s3Stat(t, mnt, "bytes"); got < size || float64(got) > 1.1*float64(size) {
				t.Errorf("the first epoch fetched %d bytes from S3, want the set's %d (at most 1.1×)", got, size)
			}
			if n := fillStat(t, mnt, "demand_chunks"); n == 0 {
				t.Errorf("no chunk filled on demand in the first epoch")
			}
			if n := fillStat(t, mnt, "failed"); n != 0 {
				t.Errorf("%d reads failed", n)
			}
			unmount(t, mnt, daemonPID(t, mnt))

			mnt = mountKernelS3(t, url, cache, "")
			before := s3Stat(t, mnt, "bytes")
			if d := digest(sourceEntries(t, mnt, true)); d != want {
				t.Fatalf("the second mount over the same cache differs from the source")
			}
			if n := s3Stat(t, mnt, "bytes") - before; n != 0 {
				t.Errorf("the second mount fetched %d bytes from S3, want 0", n)
			}
			if n := fillStat(t, mnt, "events"); n != 0 {
				t.Errorf("reads of copies filled whole reached the daemon %d times, want 0", n)
			}
		})
	}
}

// TestKernelPlaneS3Faults: never a hole's zeros. With S3 down a read of what is not filled
// fails with EIO and succeeds once S3 is back; an object replaced in S3 after the mount is
// refused (EIO), never served; with the cache directory's disk full a fill fails with EIO.
func TestKernelPlaneS3Faults(t *testing.T) {
	needKernelPlane(t)
	srv := s3Server(t)
	src, url, _ := kernelS3Set(t, srv, "faults", 400)
	files := fileList(t, src)
	cache := filepath.Join(t.TempDir(), "cache")
	mnt := mountKernelS3(t, url, cache, ",s3_timeout=2s,s3_retries=1")

	t.Run("S3 down", func(t *testing.T) {
		srv.Stop()
		victim := slices.Max(files) // in the last shard (pack order is path order here)
		_, err := os.ReadFile(filepath.Join(mnt, victim))
		srv.Start()
		if !errors.Is(err, syscall.EIO) { // nothing was read before: its chunk is a hole
			t.Errorf("reading %s with S3 down: %v, want EIO", victim, err)
		}
		sameFile(t, src, mnt, victim)
	})

	t.Run("object replaced", func(t *testing.T) {
		// Another set's first shard put in place of this one's first: same name, other bytes.
		// Not the shard that "S3 down" read (the last): its chunk filled whole, no read of it
		// could fail (the victim was a file at random before, and in the last shard a run
		// failed so).
		_, otherURL, _ := kernelS3SetSeed(t, srv, "other", 400, 99)
		obj := firstShard(t, srv, "faults")
		info, err := srv.Client().CopyObject(t.Context(), minio.CopyDestOptions{Bucket: srv.Bucket, Object: obj},
			minio.CopySrcOptions{Bucket: srv.Bucket, Object: strings.TrimPrefix(otherURL, "s3://"+srv.Bucket+"/") + "/" + filepath.Base(obj)})
		if err != nil {
			t.Fatalf("replacing %s: %v (%+v)", obj, err, info)
		}
		var failed, wrong int
		for _, f := range files {
			got, err := os.ReadFile(filepath.Join(mnt, f))
			want, _ := os.ReadFile(filepath.Join(src, f))
			switch {
			case errors.Is(err, syscall.EIO):
				failed++
			case err != nil:
				t.Fatalf("%s: %v", f, err)
			case !bytes.Equal(got, want):
				wrong++
			}
		}
		if wrong != 0 || failed == 0 {
			t.Errorf("after the object was replaced: %d files read wrong, %d failed; want none wrong and the replaced shard's unfilled files failed", wrong, failed)
		}
	})

	t.Run("disk full", func(t *testing.T) {
		// A mount of another set with its copies on a small ext4 (tmpfs has no pre-content
		// events), filled up once the plane is mounted.
		full, img := filepath.Join(t.TempDir(), "full"), filepath.Join(t.TempDir(), "full.img")
		mkdir(t, full)
		for _, cmd := range [][]string{{"truncate", "-s", "100M", img}, {"mkfs.ext4", "-q", "-F", img}, {"mount", "-o", "loop", img, full}} {
			if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
				t.Fatalf("%v: %v: %s", cmd, err, out)
			}
		}
		t.Cleanup(func() { syscall.Unmount(full, syscall.MNT_DETACH) })
		_, fullURL, _ := kernelS3SetSeed(t, srv, "full", 400, 7)
		mnt2 := mountKernelS3(t, fullURL, full, ",cache_size=64M")
		fill, err := os.Create(filepath.Join(full, "filler"))
		if err != nil {
			t.Fatal(err)
		}
		for err == nil {
			_, err = fill.Write(make([]byte, 1<<20))
		}
		fill.Close()
		var failed int
		for _, f := range fileList(t, mnt2)[:50] {
			got, err := os.ReadFile(filepath.Join(mnt2, f))
			if err == nil && bytes.Count(got, []byte{0}) == len(got) && len(got) > 0 {
				t.Fatalf("%s read as zeros with the disk full", f)
			}
			if errors.Is(err, syscall.EIO) {
				failed++
			}
		}
		if failed == 0 {
			t.Errorf("no read failed with the cache's disk full")
		}
	})
}

// TestKernelPlaneS3Evict: with a cache of a quarter of the set, three shuffled epochs of 8
// readers read the source's bytes every time while the copies are kept within the cache's size
// by punching chunks out; the chunks kept are the same from epoch to epoch (a stable subset),
// so later epochs fetch less than the set.
func TestKernelPlaneS3Evict(t *testing.T) {
	needKernelPlane(t)
	srv := s3Server(t)
	src, url, size := kernelS3Set(t, srv, "evict", 8000) // about 260 MB
	cacheSize := size / 4
	cache := filepath.Join(t.TempDir(), "cache")
	mnt := mountKernelS3(t, url, cache, fmt.Sprintf(",cache_size=%d", cacheSize))
	var fetched []int64
	for epoch := range 3 {
		before := s3Stat(t, mnt, "bytes")
		errs, _, _ := epochUnder(t, src, mnt, nil)
		for _, err := range errs[:min(len(errs), 5)] {
			t.Errorf("epoch %d: %v", epoch, err)
		}
		fetched = append(fetched, s3Stat(t, mnt, "bytes")-before)
		dropPlanePages(t, mnt)
	}
	onDisk := func() (n int64) {
		entries, _ := filepath.Glob(filepath.Join(cache, "kernel", "*", "*.shard"))
		for _, e := range entries {
			var st syscall.Stat_t
			if syscall.Stat(e, &st) == nil {
				n += st.Blocks * 512
			}
		}
		return n
	}
	// What is filled may pass the budget by what is filled within the grace (docs/kernel.md):
	// once the readers stop, the copies come back within it.
	slack := int64(4 << 20)
	for end := time.Now().Add(15 * time.Second); onDisk() > cacheSize+slack && time.Now().Before(end); {
		time.Sleep(100 * time.Millisecond)
	}
	if n := onDisk(); n > cacheSize+slack {
		t.Errorf("the copies take %d bytes on disk, want at most the cache's %d (+%d)", n, cacheSize, slack)
	}
	if n := fillStat(t, mnt, "punched_chunks"); n == 0 {
		t.Errorf("no chunk punched with a cache of a quarter of the set")
	}
	if fetched[2] >= size {
		t.Errorf("epochs fetched %v bytes from S3 with a cache of %d: want the later ones below the set's %d", fetched, cacheSize, size)
	}
	t.Logf("S3 bytes per epoch %v (set %d, cache %d); copies on disk %d", fetched, size, cacheSize, onDisk())
}

// TestKernelPlaneS3Killed: kill -9 of the daemon, twice, during a cold epoch of 8 readers of
// the kernel plane over S3: the keeper holds the Filler's fanotify group, so the reads waiting
// for fills wait for the next daemon, which takes the group over; no reader ever gets a hole's
// zeros or another file's bytes (a read the dead daemon had taken may fail with EIO).
func TestKernelPlaneS3Killed(t *testing.T) {
	needKernelPlane(t)
	srv := s3Server(t)
	src, url, _ := kernelS3Set(t, srv, "killed", 3000)
	mnt := mountKernelS3(t, url, filepath.Join(t.TempDir(), "cache"), "")
	keeper := daemonPID(t, mnt)
	at := []int{1 + rand.IntN(4), 5 + rand.IntN(4)}
	var killed []int
	var killMu sync.Mutex
	errs, _, longest := epochUnder(t, src, mnt, func(k int) {
		if k != at[0] && k != at[1] {
			return
		}
		killMu.Lock()
		defer killMu.Unlock()
		pid := servingPID(t, mnt)
		if pid == keeper || len(killed) > 0 && killed[len(killed)-1] == pid {
			return
		}
		syscall.Kill(pid, syscall.SIGKILL)
		killed = append(killed, pid)
	})
	var eio atomic.Int64
	for _, err := range errs {
		if errors.Is(err, syscall.EIO) {
			eio.Add(1)
			continue
		}
		t.Errorf("a reader: %v", err)
	}
	if len(killed) != 2 {
		t.Fatalf("killed %d daemons, want 2", len(killed))
	}
	// Every file again, after the takeovers: the source's bytes.
	if errs, _, _ := epochUnder(t, src, mnt, nil); len(errs) != 0 {
		t.Errorf("after the takeovers: %v", errs[0])
	}
	t.Logf("2 daemons killed at tenths %v; %d reads failed with EIO; the longest read %v", at, eio.Load(), longest)
}

// fileList returns the regular files under root, relative to it, shuffled.
func fileList(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	for _, e := range sourceEntries(t, root, false) {
		if !e.dir {
			files = append(files, e.path)
		}
	}
	rand.Shuffle(len(files), func(i, j int) { files[i], files[j] = files[j], files[i] })
	return files
}

// firstShard returns the key of the first shard object under prefix.
func firstShard(t *testing.T, srv *s3test.Server, prefix string) string {
	t.Helper()
	var first string
	for obj := range srv.Client().ListObjects(t.Context(), srv.Bucket, minio.ListObjectsOptions{Prefix: prefix + "/", Recursive: true}) {
		if strings.HasSuffix(obj.Key, ".dat") && (first == "" || obj.Key < first) {
			first = obj.Key
		}
	}
	if first == "" {
		t.Fatalf("no shard under %s", prefix)
	}
	return first
}

// dropPlanePages drops the plane's pages of every file under mnt, so the next epoch reads the
// copies again.
func dropPlanePages(t *testing.T, mnt string) {
	t.Helper()
	filepath.WalkDir(mnt, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if f, err := os.Open(p); err == nil {
				unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
				f.Close()
			}
		}
		return nil
	})
	time.Sleep(10 * time.Millisecond)
}

// TestKernelPlaneS3Refusals: data=auto over an S3 set mounts FUSE, saying why, where the kernel
// plane over S3 cannot be: no cache directory, no keeper (restart=off), a cache directory on a
// file system without pre-content events (tmpfs), copies another mount holds; data=kernel fails
// there with the reason.
func TestKernelPlaneS3Refusals(t *testing.T) {
	needKernelPlane(t)
	srv := s3Server(t)
	_, url, _ := kernelS3Set(t, srv, "refused", 50)
	tmpfs := filepath.Join(t.TempDir(), "tmpfs")
	mkdir(t, tmpfs)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=200M", "tmpfs", tmpfs).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { syscall.Unmount(tmpfs, syscall.MNT_DETACH) })
	mnt := filepath.Join(t.TempDir(), "mnt")
	mkdir(t, mnt)
	for _, c := range []struct{ opts, why string }{
		{"", "--cache-dir"},
		{",cache_dir=" + filepath.Join(t.TempDir(), "c") + ",restart=off", "restart=off"},
		{",cache_dir=" + tmpfs, "pre-content"},
	} {
		r := mustAifs(t, "mount", "-o", "data=auto"+c.opts, url, mnt)
		pid := daemonPID(t, mnt)
		s := readStats(t, mnt)
		if s.DataPlane.Plane != "fuse" || !strings.Contains(s.DataPlane.Reason, c.why) {
			t.Errorf("-o data=auto%s: data plane %+v, want fuse because of %q", c.opts, s.DataPlane, c.why)
		}
		if !strings.Contains(r.stderr, "data plane: fuse") {
			t.Errorf("-o data=auto%s: the mount did not say which plane and why: %s", c.opts, r)
		}
		unmount(t, mnt, pid)
		if r := aifs(t, "mount", "-o", "data=kernel"+c.opts, url, mnt); r.code == 0 || !strings.Contains(r.stderr, c.why) {
			t.Errorf("-o data=kernel%s: want a refusal naming %q, got %s", c.opts, c.why, r)
			if isMounted(mnt) {
				unmount(t, mnt, daemonPID(t, mnt))
			}
		}
	}
	// A second mount on the copies another mount of the set holds.
	cache := filepath.Join(t.TempDir(), "shared")
	mountKernelS3(t, url, cache, "")
	r := mustAifs(t, "mount", "-o", "data=auto,cache_dir="+cache, url, mnt)
	s := readStats(t, mnt)
	if s.DataPlane.Plane != "fuse" || !strings.Contains(s.DataPlane.Reason, "in use") {
		t.Errorf("data=auto over copies in use: data plane %+v (%s), want fuse because they are in use", s.DataPlane, r)
	}
	unmount(t, mnt, daemonPID(t, mnt))
	if r := aifs(t, "mount", "-o", "data=kernel,cache_dir="+cache, url, mnt); r.code == 0 || !strings.Contains(r.stderr, "in use") {
		t.Errorf("data=kernel over copies in use: want a refusal saying so, got %s", r)
	}
}

// TestKernelPlaneS3Detached: SIGTERM to the mount, or kill -9 of its keeper (the daemon then
// gets SIGTERM), while a file of the plane is open and not yet read: the plane is detached, and
// the daemon goes on filling its reads, which get the source's bytes, until the file is closed;
// then the daemon ends.
func TestKernelPlaneS3Detached(t *testing.T) {
	needKernelPlane(t)
	srv := s3Server(t)
	src, url, _ := kernelS3Set(t, srv, "detached", 200)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			mnt := mountKernelS3(t, url, filepath.Join(t.TempDir(), "cache"), "")
			keeper, daemon := daemonPID(t, mnt), servingPID(t, mnt)
			files := fileList(t, src)
			f, err := os.Open(filepath.Join(mnt, files[0]))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			syscall.Kill(keeper, sig)
			for end := time.Now().Add(5 * time.Second); isMounted(mnt); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(end) {
					t.Fatalf("%s is still mounted 5 s after %v to the keeper", mnt, sig)
				}
			}
			time.Sleep(200 * time.Millisecond) // past the daemon's end, if it ended with the file open
			got, err := io.ReadAll(f)
			want, _ := os.ReadFile(filepath.Join(src, files[0]))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("reading a file of the detached plane: %v (%d bytes, want the source's %d)", err, len(got), len(want))
			}
			if waitExit(daemon, 300*time.Millisecond) {
				t.Errorf("the daemon ended while a file of the plane was open")
			}
			f.Close()
			if !waitExit(daemon, 10*time.Second) || !waitExit(keeper, 10*time.Second) {
				t.Errorf("the mount's processes did not end once the last file of the detached plane was closed")
			}
		})
	}
}

// TestKernelPlaneS3Plan: a plan sent to the kernel plane over S3 has its samples filled from S3
// ahead of their reads (the daemon's reads ahead raise the pre-content events, counted apart
// from the readers'; with prefetch_shards=on the plan's chunks are also staged by the Filler),
// so reading them then fills nothing on demand.
func TestKernelPlaneS3Plan(t *testing.T) {
	needKernelPlane(t)
	srv := s3Server(t)
	src, url, _ := kernelS3Set(t, srv, "plan", 600)
	for _, opts := range []string{"", ",prefetch_shards=on"} {
		t.Run(map[string]string{"": "plain", ",prefetch_shards=on": "staged"}[opts], func(t *testing.T) { // no comma in a path of -o
			mnt := mountKernelS3(t, url, filepath.Join(t.TempDir(), "cache"), opts)
			files := fileList(t, src)
			planned := files[:6]
			planFile := filepath.Join(t.TempDir(), "plan")
			writeFile(t, planFile, []byte(plan.HeaderPaths+"\n"+strings.Join(planned, "\n")+"\n"))
			mustAifs(t, "plan", mnt, planFile)
			for end := time.Now().Add(10 * time.Second); fillStat(t, mnt, "ahead_chunks") == 0 || readStats(t, filepath.Dir(plan.Control(mnt))).Prefetch.Stored < uint64(len(planned)); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(end) {
					t.Fatalf("the plan's samples were not read ahead in 10 s: ahead_chunks %d", fillStat(t, mnt, "ahead_chunks"))
				}
			}
			for _, f := range planned {
				sameFile(t, src, mnt, f)
			}
			if n := fillStat(t, mnt, "demand_chunks"); n != 0 {
				t.Errorf("reading the planned samples filled %d chunks on demand, want 0 (filled ahead)", n)
			}
		})
	}
}

// TestKernelPlaneS3Upgrade: aifs upgrade mid-epoch on the kernel plane over S3 is refused with
// the reason (a new daemon adopting the Filler while the old one still took events left the
// reads the old one held when killed waiting for ever: found under GOMAXPROCS=1), and the
// daemon serving goes on: no reader errs or waits.
func TestKernelPlaneS3Upgrade(t *testing.T) {
	needKernelPlane(t)
	srv := s3Server(t)
	src, url, _ := kernelS3Set(t, srv, "upgrade", 2000)
	mnt := mountKernelS3(t, url, filepath.Join(t.TempDir(), "cache"), "")
	old := servingPID(t, mnt)
	var upgraded atomic.Bool
	errs, _, longest := epochUnder(t, src, mnt, func(k int) {
		if k != 3 || upgraded.Swap(true) {
			return
		}
		out, err := exec.Command(aifsBin, "upgrade", mnt).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "not supported on the kernel plane over S3") {
			t.Errorf("aifs upgrade on the kernel plane over S3: %v: %s; want a refusal saying why", err, out)
		}
	})
	for _, err := range errs {
		t.Errorf("a reader: %v", err)
	}
	if now := servingPID(t, mnt); now != old {
		t.Errorf("after a refused upgrade the daemon is pid %d, was %d", now, old)
	}
	t.Logf("refused upgrade mid-epoch; the longest read %v", longest)
}
