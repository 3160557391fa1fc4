//go:build integration

package integration

import (
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aifs/aifs/backend/s3/s3test"
)

// s3Server starts a real S3 server (versitygw) on 127.0.0.1 and points the aifs processes this
// test starts at it through the environment, as a user would.
func s3Server(t *testing.T) *s3test.Server {
	t.Helper()
	srv := s3test.Start(t)
	setS3Env(t, srv)
	return srv
}

// setS3Env sets the environment of the test (and of the aifs commands it runs) to srv's
// endpoint and credentials.
func setS3Env(t *testing.T, srv *s3test.Server) {
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// storageStat returns one figure of the storage section of a mount's stats ("s3", "bytes").
func storageStat(t testing.TB, mnt, name, field string) int64 {
	t.Helper()
	s := readStats(t, mnt)
	fields, ok := s.Storage[name].(map[string]any)
	if !ok {
		t.Fatalf("the stats file has no storage.%s: %v", name, s.Storage)
	}
	v, ok := fields[field].(float64)
	if !ok {
		t.Fatalf("the stats file has no storage.%s.%s: %v", name, field, fields)
	}
	return int64(v)
}

// TestS3PackMountTree uploads the edge-case tree with aifs pack, lists and verifies it in the
// bucket, mounts it and compares everything a reader sees with the source.
func TestS3PackMountTree(t *testing.T) {
	srv := s3Server(t)
	src := edgeTree(t)
	url := "s3://" + srv.Bucket + "/sets/edge"
	mustAifs(t, "pack", "--quiet", "--shard-size", "256K", src, url)
	if r := aifs(t, "pack", "--quiet", src, url); r.code != 1 || !strings.Contains(r.stderr, "--force") {
		t.Errorf("a second pack to the same prefix without --force: %s", r)
	}
	if r := mustAifs(t, "verify", url); !strings.Contains(r.stdout, "ok:") {
		t.Errorf("aifs verify %s: %s", url, r)
	}
	if r := mustAifs(t, "ls", url); !strings.Contains(r.stdout, "/") {
		t.Errorf("aifs ls %s lists no directory: %s", url, r)
	}
	mnt := mountSet(t, url, "--s3-endpoint", srv.Endpoint)
	want, got := sourceEntries(t, src, true), sourceEntries(t, mnt, true)
	compareEntries(t, "S3 mount", want, got)
	if digest(want) != digest(got) {
		t.Errorf("content digest of the S3 mount differs from the source")
	}
	if n := storageStat(t, mnt, "s3", "requests"); n == 0 {
		t.Errorf("the stats file counts no S3 requests after reading every file")
	}
}

// s3JPEGSet uploads the JPEG tree to prefix in small shards and returns its source and URL.
func s3JPEGSet(t *testing.T, srv *s3test.Server, prefix string) (src, url string) {
	t.Helper()
	src, _ = jpegSet(t)
	url = "s3://" + srv.Bucket + "/" + prefix
	mustAifs(t, "pack", "--quiet", "--shard-size", "1M", src, url)
	return src, url
}

// TestS3CacheReuse reads an epoch through a mount with a disk cache, remounts (a new daemon,
// nothing in memory) through the mount(8) form of the options and reads another: the second
// epoch fetches nothing from S3. Two mounts sharing the cache directory read correct bytes.
func TestS3CacheReuse(t *testing.T) {
	srv := s3Server(t)
	src, url := s3JPEGSet(t, srv, "jpeg")
	want := digest(sourceEntries(t, src, true))
	cache := filepath.Join(t.TempDir(), "cache")

	mnt := mountSet(t, url, "--cache-dir", cache, "--cache-size", "1G")
	if d := digest(sourceEntries(t, mnt, true)); d != want {
		t.Fatalf("first epoch: content digest differs from the source")
	}
	if n := storageStat(t, mnt, "s3", "bytes"); n == 0 {
		t.Errorf("first epoch fetched nothing from S3")
	}
	unmount(t, mnt, daemonPID(t, mnt))

	opts := "cache_dir=" + cache + ",cache_size=1G,s3_endpoint=" + srv.Endpoint
	mnt2 := mountSet(t, url, "-o", opts)
	before := storageStat(t, mnt2, "s3", "bytes")
	if d := digest(sourceEntries(t, mnt2, true)); d != want {
		t.Fatalf("second epoch from the cache: content digest differs from the source")
	}
	if n := storageStat(t, mnt2, "s3", "bytes") - before; n != 0 {
		t.Errorf("second epoch fetched %d bytes from S3, want 0 (all in the disk cache)", n)
	}
	if hits := storageStat(t, mnt2, "disk_cache", "hits"); hits == 0 {
		t.Errorf("second epoch: no disk cache hits")
	}

	// A second mount of the same set on the same cache, read at the same time.
	mnt3 := mountSet(t, url, "-o", opts)
	done := make(chan [32]byte)
	go func() { done <- digest(sourceEntries(t, mnt3, true)) }()
	if d := digest(sourceEntries(t, mnt2, true)); d != want {
		t.Errorf("concurrent mounts on one cache: first mount's digest differs")
	}
	if d := <-done; d != want {
		t.Errorf("concurrent mounts on one cache: second mount's digest differs")
	}
}

// TestS3PushChunks reads a shuffled epoch through a mount with a disk cache after listing the
// tree as ImageFolder does (names and types only, no stat: READDIRPLUS tells the kernel of
// every file): with push_chunks=auto (on, for a
// set this small) the samples of each chunk fetched go into the page cache as it arrives, so
// most files are read with no READ at all, and they count as read in the epoch; with
// push_chunks=off every file is a READ (or read ahead, when the planner takes some reads for a
// sequential run). The bytes are the source's either way.
func TestS3PushChunks(t *testing.T) {
	srv := s3Server(t)
	src, url := s3JPEGSet(t, srv, "push")
	var files []string
	for _, e := range sourceEntries(t, src, false) {
		if !e.dir {
			files = append(files, e.path)
		}
	}
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(files), func(i, j int) { files[i], files[j] = files[j], files[i] })
	for _, mode := range []string{"auto", "off"} {
		t.Run(mode, func(t *testing.T) {
			mnt := mountSet(t, url, "--cache-dir", filepath.Join(t.TempDir(), "cache"), "-o", "push_chunks="+mode)
			listNames(t, mnt)
			for _, rel := range files {
				sameFile(t, src, mnt, rel)
			}
			s := readStats(t, mnt)
			reads, arrived := s.Ops["read"].Count, s.Prefetch.Arrived
			t.Logf("%d files: %d READs, %d samples pushed as their chunk arrived, %d read ahead into the page cache, epoch %d coverage %.2f, misses %d hits %d", len(files), reads, arrived, s.Prefetch.Stored, s.Epoch.Number, s.Epoch.Coverage, s.Cache.Misses, s.Cache.Hits)
			switch {
			case mode == "off" && (arrived != 0 || reads+s.Prefetch.Stored < uint64(len(files))):
				t.Errorf("push_chunks=off: %d pushed, %d READs and %d read ahead for %d files; want none pushed, each file a READ or read ahead",
					arrived, reads, s.Prefetch.Stored, len(files))
			case mode == "auto" && (arrived < uint64(len(files))/2 || reads > uint64(len(files))/2):
				t.Errorf("push_chunks=auto: %d pushed, %d READs for %d files; want most pushed and read with no READ", arrived, reads, len(files))
			case mode == "auto" && s.Epoch.Coverage < 1:
				t.Errorf("push_chunks=auto: epoch coverage %.2f after reading every file, want 1 (pushed samples count as read)", s.Epoch.Coverage)
			}
		})
	}
}

// TestS3StaleCache re-uploads the set with different bytes of the same sizes (new ETags) and
// remounts over the old cache: the new bytes are served, never the cached old ones. A shard
// replaced behind the index's back is refused at mount time, naming the object.
func TestS3StaleCache(t *testing.T) {
	srv := s3Server(t)
	src, url := s3JPEGSet(t, srv, "stale")
	cache := filepath.Join(t.TempDir(), "cache")
	mnt := mountSet(t, url, "--cache-dir", cache, "--cache-size", "1G")
	sourceEntries(t, mnt, true) // fills the cache
	unmount(t, mnt, daemonPID(t, mnt))

	// The same tree with every file's bytes changed and sizes and mtimes kept.
	changed := filepath.Join(t.TempDir(), "changed")
	if out, err := exec.Command("cp", "-a", src, changed).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	filepath.WalkDir(changed, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, _ := d.Info()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		writeFile(t, p, b)
		return os.Chtimes(p, fi.ModTime(), fi.ModTime())
	})
	mustAifs(t, "pack", "--quiet", "--force", "--shard-size", "1M", changed, url)
	mnt = mountSet(t, url, "--cache-dir", cache, "--cache-size", "1G")
	if got, want := digest(sourceEntries(t, mnt, true)), digest(sourceEntries(t, changed, true)); got != want {
		t.Fatalf("after re-uploading the set, the mount serves other bytes than the new tree (stale cache?)")
	}
	if n := storageStat(t, mnt, "s3", "bytes"); n == 0 {
		t.Errorf("after re-uploading the set, nothing was fetched from S3: the old cache was served")
	}
	unmount(t, mnt, daemonPID(t, mnt))

	// One shard object replaced under the index (same name and size, other bytes and ETag): copy
	// the first shard of an upload of the original tree over the changed set's, in the server's
	// storage, its xattrs (where versitygw keeps the ETag) included.
	s3JPEGSet(t, srv, "original")
	obj := func(prefix string) string { return filepath.Join(srv.Dir, srv.Bucket, prefix, "shard-000000.dat") }
	if out, err := exec.Command("cp", "--preserve=all", obj("original"), obj("stale")).CombinedOutput(); err != nil {
		t.Fatalf("replacing the shard object: %v: %s", err, out)
	}
	mnt = filepath.Join(t.TempDir(), "mnt")
	mkdir(t, mnt)
	r := aifs(t, "mount", url, mnt)
	if r.code != 1 || !strings.Contains(r.stderr, "shard-000000.dat") || !strings.Contains(r.stderr, "replaced") {
		t.Errorf("mounting a set whose shard was replaced: want exit 1 naming the object as replaced: %s", r)
	}
	if isMounted(mnt) {
		t.Errorf("a mount was left at %s", mnt)
		syscall.Unmount(mnt, syscall.MNT_DETACH)
	}
}

// TestS3Outage stops the server mid-epoch: reads of samples not yet fetched fail with EIO
// within the configured timeout and retries, the mount keeps answering everything else, and
// the same reads succeed once the server is back.
func TestS3Outage(t *testing.T) {
	srv := s3Server(t)
	src, url := s3JPEGSet(t, srv, "outage")
	mnt := mountSet(t, url, "--s3-timeout", "2s", "--s3-retries", "2", "-o", "kernel_cache=off,mem_cache=1M")
	var files []string
	for _, e := range sourceEntries(t, src, false) {
		if !e.dir {
			files = append(files, e.path)
		}
	}
	rand.New(rand.NewPCG(3, 3)).Shuffle(len(files), func(i, j int) { files[i], files[j] = files[j], files[i] })
	for _, f := range files[:10] {
		sameFile(t, src, mnt, f)
	}

	srv.Stop()
	victim := files[len(files)-1]
	start := time.Now()
	_, err := os.ReadFile(filepath.Join(mnt, victim))
	took := time.Since(start)
	if !errors.Is(err, syscall.EIO) {
		t.Errorf("reading %s with the server stopped: %v, want EIO", victim, err)
	}
	// 3 attempts of at most 2 s each plus backoff (capped at 2 s each).
	if took > 15*time.Second {
		t.Errorf("the failed read took %v, beyond the configured timeout and retries", took)
	}
	t.Logf("read with the server stopped failed after %v: %v", took.Round(time.Millisecond), err)
	// Everything that needs no S3 keeps working meanwhile.
	if _, err := os.Stat(filepath.Join(mnt, victim)); err != nil {
		t.Errorf("stat during the outage: %v", err)
	}
	if len(names(t, mnt)) == 0 {
		t.Errorf("listing during the outage is empty")
	}
	if s := readStats(t, mnt); s.Ops["read"].Errors == 0 {
		t.Errorf("the stats file counts no read errors after the failed read")
	}

	srv.Start()
	sameFile(t, src, mnt, victim)
	for _, f := range files[10:20] {
		sameFile(t, src, mnt, f)
	}
}

// listNames lists the tree under root as torchvision's ImageFolder does: directory entries
// and their types, no stat of the files.
func listNames(t *testing.T, root string) {
	t.Helper()
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range ents {
		if de.IsDir() && de.Name() != ".aifs" {
			listNames(t, filepath.Join(root, de.Name()))
		}
	}
}

// sameFile checks that rel reads the same through the mount as in the source.
func sameFile(t *testing.T, src, mnt, rel string) {
	t.Helper()
	want, err := os.ReadFile(filepath.Join(src, rel))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(mnt, rel))
	if err != nil {
		t.Errorf("read %s: %v", rel, err)
		return
	}
	if string(got) != string(want) {
		t.Errorf("%s: %d bytes differ from the source's %d", rel, len(got), len(want))
	}
}

// TestS3MountRefusals: wrong credentials, a missing bucket, a prefix holding no shard set and a
// stopped server each get a one-line error at mount time and no mount; the secret key appears
// in no message.
func TestS3MountRefusals(t *testing.T) {
	srv := s3Server(t)
	_, url := s3JPEGSet(t, srv, "refusals")
	mnt := filepath.Join(t.TempDir(), "mnt")
	mkdir(t, mnt)
	const badSecret = "not-the-secret-key-0123456789"
	cases := []struct {
		name, url, want string
		env             []string
	}{
		{"wrong secret", url, "access denied", []string{"AWS_SECRET_ACCESS_KEY=" + badSecret}},
		{"wrong key id", url, "access denied", []string{"AWS_ACCESS_KEY_ID=nobody"}},
		{"missing bucket", "s3://no-such-bucket/x", "does not exist", nil},
		{"no shard set", "s3://" + srv.Bucket + "/nothing-here", "not a shard set", nil},
		{"bad url", "s3:///x", "bucket", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, kv := range c.env {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			r := aifs(t, "mount", c.url, mnt)
			if r.code != 1 || !strings.Contains(r.stderr, c.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Errorf("want exit 1 and one line containing %q: %s", c.want, r)
			}
			if strings.Contains(r.stderr, badSecret) || strings.Contains(r.stderr, srv.SecretKey) {
				t.Errorf("the error shows a secret key: %s", r.stderr)
			}
			if isMounted(mnt) {
				t.Errorf("a mount was left at %s", mnt)
				syscall.Unmount(mnt, syscall.MNT_DETACH)
			}
		})
	}
	// The disk cache is for S3 sets; its size needs a directory.
	_, local := jpegSet(t)
	if r := aifs(t, "mount", "--cache-dir", t.TempDir(), local, mnt); r.code != 1 || !strings.Contains(r.stderr, "S3") {
		t.Errorf("--cache-dir with a local set: %s", r)
	}
	if r := aifs(t, "mount", "-o", "cache_size=1G", url, mnt); r.code != 2 || !strings.Contains(r.stderr, "mem_cache") {
		t.Errorf("cache_size without cache_dir: %s", r)
	}
	if r := aifs(t, "mount", "-o", "push_chunks=on", url, mnt); r.code != 2 || !strings.Contains(r.stderr, "cache_dir") {
		t.Errorf("push_chunks=on without cache_dir: %s", r)
	}
	if r := aifs(t, "mount", "-o", "push_chunks=on,kernel_cache=off", "--cache-dir", t.TempDir(), url, mnt); r.code != 2 || !strings.Contains(r.stderr, "kernel_cache=on") {
		t.Errorf("push_chunks=on with kernel_cache=off: %s", r)
	}
	if r := aifs(t, "mount", "-o", "push_chunks=yes", url, mnt); r.code != 2 || !strings.Contains(r.stderr, "push_chunks=yes") {
		t.Errorf("push_chunks=yes: %s", r)
	}
	srv.Stop()
	start := time.Now()
	if r := aifs(t, "mount", "--s3-timeout", "1s", "--s3-retries", "1", url, mnt); r.code != 1 || !strings.Contains(r.stderr, "reach") {
		t.Errorf("mount with the server stopped: want exit 1 saying it cannot reach it: %s", r)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("mount with the server stopped took %v to fail", took)
	}
}
