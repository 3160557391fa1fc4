package s3

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/aifs/aifs/backend"
	"github.com/aifs/aifs/backend/s3/s3test"
	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/layout/pack"
)

// sourceTree writes n files of assorted sizes (some empty) into nested directories of a new
// directory, plus one file of big bytes if big > 0, and returns the directory.
func sourceTree(t *testing.T, seed uint64, n, big int) string {
	t.Helper()
	src := t.TempDir()
	rng := rand.New(rand.NewPCG(seed, 11))
	dirs := []string{"", "a", "a/b c", "ünï", "z"}
	for i := range n {
		dir := filepath.Join(src, dirs[i%len(dirs)])
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		size := rng.IntN(150 << 10)
		if i%7 == 0 {
			size = 0
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d.bin", i)), randomBytes(size, seed*1000+uint64(i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if big > 0 {
		if err := os.WriteFile(filepath.Join(src, "a", "big.bin"), randomBytes(big, seed), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return src
}

// pack packs src into prefix through NewSink(force).
func packSet(t *testing.T, b *Backend, src string, force bool, opt pack.Options) (pack.Result, error) {
	t.Helper()
	sink, err := b.NewSink(t.Context(), force)
	if err != nil {
		return pack.Result{}, err
	}
	return pack.PackTo(t.Context(), src, sink, opt)
}

// checkSet reads the shard set at prefix back through a new Backend: every file of src is read
// byte for byte, and each shard's version in the index is the ETag of its object.
func checkSet(t *testing.T, srv *s3test.Server, prefix, src string) *layout.Index {
	t.Helper()
	b := open(t, srv.Bucket, prefix, Options{PartSize: 256 << 10})
	buf, err := b.ReadIndex(t.Context())
	if err != nil {
		t.Fatalf("ReadIndex: %v", err)
	}
	x, err := layout.Parse(buf)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	var shards []backend.Shard
	for _, s := range x.Shards() {
		info, err := srv.Client().StatObject(t.Context(), srv.Bucket, prefix+"/"+s.Name, minio.StatObjectOptions{})
		if err != nil {
			t.Fatalf("stat %s: %v", s.Name, err)
		}
		if s.Version == "" || s.Version != info.ETag {
			t.Errorf("%s: the index records version %q, the object's ETag is %q", s.Name, s.Version, info.ETag)
		}
		sh, err := b.Open(t.Context(), s)
		if err != nil {
			t.Fatalf("Open(%s): %v", s.Name, err)
		}
		t.Cleanup(func() { sh.Close() })
		if v := sh.(backend.Versioned).Version(); v != s.Version {
			t.Errorf("%s: Version() = %q, the index says %q", s.Name, v, s.Version)
		}
		shards = append(shards, sh)
	}
	files := 0
	filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		rel, _ := filepath.Rel(src, path)
		id, err := x.LookupPath(filepath.ToSlash(rel))
		if err != nil {
			t.Errorf("%s is missing from the index", rel)
			return nil
		}
		want, _ := os.ReadFile(path)
		e := x.Entry(id)
		got := make([]byte, e.Size)
		if err := shards[e.Shard].ReadAt(t.Context(), got, int64(e.Offset)); err != nil {
			t.Errorf("read %s: %v", rel, err)
		} else if !bytes.Equal(got, want) {
			t.Errorf("%s: the %d bytes read back differ from the source", rel, len(got))
		}
		return nil
	})
	if files == 0 {
		t.Fatalf("no files in %s", src)
	}
	return x
}

// setKeys returns the keys a shard set of n shards at prefix consists of.
func setKeys(prefix string, n int) []string {
	keys := []string{prefix + "/" + layout.IndexName}
	for i := range n {
		keys = append(keys, prefix+"/"+layout.ShardName(i))
	}
	slices.Sort(keys)
	return keys
}

// TestPackRoundTrip packs a tree into S3 (small shards with one PUT each, one large shard in a
// multipart upload) and reads every file back.
func TestPackRoundTrip(t *testing.T) {
	srv := start(t)
	src := sourceTree(t, 1, 40, 17<<20+5)
	b := open(t, srv.Bucket, "sets/round", Options{})
	res, err := packSet(t, b, src, false, pack.Options{ShardSize: 256 << 10})
	if err != nil {
		t.Fatalf("PackTo: %v", err)
	}
	if res.Shards < 4 {
		t.Fatalf("packed into %d shards, want several", res.Shards)
	}
	if got, want := keys(t, srv, "sets/"), setKeys("sets/round", res.Shards); !slices.Equal(got, want) {
		t.Errorf("objects after the pack: %v, want %v", got, want)
	}
	x := checkSet(t, srv, "sets/round", src)
	multipart := false
	for _, s := range x.Shards() {
		multipart = multipart || strings.Contains(s.Version, "-")
	}
	if !multipart {
		t.Errorf("no shard was uploaded in parts (no ETag of the form MD5-N)")
	}
	if _, err := os.Stat(filepath.Join(srv.Dir, srv.Bucket, ".sgwtmp", "multipart")); err == nil {
		if ents, _ := os.ReadDir(filepath.Join(srv.Dir, srv.Bucket, ".sgwtmp", "multipart")); len(ents) > 0 {
			t.Errorf("multipart uploads left behind: %v", ents)
		}
	}
}

// TestPackEmptyRoot packs into the bucket's root, with a set of only empty files (one empty
// shard).
func TestPackEmptyRoot(t *testing.T) {
	srv := start(t)
	src := t.TempDir()
	for _, name := range []string{"a", "b"} {
		os.WriteFile(filepath.Join(src, name), nil, 0o644)
	}
	b := open(t, srv.Bucket, "", Options{})
	if _, err := packSet(t, b, src, false, pack.Options{}); err != nil {
		t.Fatalf("PackTo: %v", err)
	}
	if got, want := keys(t, srv, ""), []string{layout.IndexName, layout.ShardName(0)}; !slices.Equal(got, want) {
		t.Errorf("objects after the pack: %v, want %v", got, want)
	}
	buf, err := b.ReadIndex(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	x, err := layout.Parse(buf)
	if err != nil {
		t.Fatal(err)
	}
	if s := x.Shards(); len(s) != 1 || s[0].Size != 0 || s[0].Version == "" {
		t.Errorf("shards of a set of empty files: %+v", s)
	}
}

// TestPackForce: --force rules, what replacing a set deletes, and what it never touches.
func TestPackForce(t *testing.T) {
	srv := start(t)
	b := open(t, srv.Bucket, "set", Options{})
	srcA, srcB := sourceTree(t, 2, 30, 0), sourceTree(t, 3, 8, 0)
	resA, err := packSet(t, b, srcA, false, pack.Options{ShardSize: 200 << 10})
	if err != nil {
		t.Fatal(err)
	}
	put(t, srv, "set/sub/other", []byte("another set's object"))
	put(t, srv, "settle", []byte("a sibling of the prefix"))
	before := keys(t, srv, "")

	_, err = packSet(t, b, srcB, false, pack.Options{})
	if want := "s3://" + srv.Bucket + "/set already holds a shard set; use --force to replace it"; err == nil || err.Error() != want {
		t.Errorf("pack onto a set without force: %v, want %q", err, want)
	}
	if got := keys(t, srv, ""); !slices.Equal(got, before) {
		t.Errorf("a refused pack changed the objects: %v, was %v", got, before)
	}

	// Force removes the old index at once; an abort then leaves the old shards (it did not
	// write them) but no index: the old set is invalid from the start of a forced pack.
	sink, err := b.NewSink(t.Context(), true)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(keys(t, srv, "set/"), "set/"+layout.IndexName) {
		t.Errorf("the old index is still there after NewSink with force")
	}
	sink.Abort()
	want := slices.DeleteFunc(slices.Clone(before), func(k string) bool { return k == "set/"+layout.IndexName })
	if got := keys(t, srv, ""); !slices.Equal(got, want) {
		t.Errorf("after an aborted forced pack: %v, want %v", got, want)
	}

	resB, err := packSet(t, b, srcB, true, pack.Options{ShardSize: 200 << 10})
	if err != nil {
		t.Fatalf("pack with force: %v", err)
	}
	if resB.Shards >= resA.Shards {
		t.Fatalf("the second set has %d shards, the first %d: want fewer", resB.Shards, resA.Shards)
	}
	want = append(setKeys("set", resB.Shards), "set/sub/other", "settle")
	slices.Sort(want)
	if got := keys(t, srv, ""); !slices.Equal(got, want) {
		t.Errorf("after replacing the set: %v, want %v (old shards gone, nothing else touched)", got, want)
	}
	checkSet(t, srv, "set", srcB)

	put(t, srv, "set/notes.txt", []byte("not a shard"))
	for _, force := range []bool{false, true} {
		_, err := packSet(t, b, srcB, force, pack.Options{})
		if want := "s3://" + srv.Bucket + "/set is not empty (it holds notes.txt, which is not part of a shard set)"; err == nil || err.Error() != want {
			t.Errorf("pack (force %v) onto a prefix holding another object: %v, want %q", force, err, want)
		}
	}

	// Leftover shards of an interrupted pack, and no index.
	put(t, srv, "left/"+layout.ShardName(7), []byte("leftover"))
	lb := open(t, srv.Bucket, "left", Options{})
	_, err = packSet(t, lb, srcB, false, pack.Options{})
	if want := "s3://" + srv.Bucket + "/left holds leftovers of an interrupted pack; use --force to replace them"; err == nil || err.Error() != want {
		t.Errorf("pack onto leftovers without force: %v, want %q", err, want)
	}
	res, err := packSet(t, lb, srcB, true, pack.Options{})
	if err != nil {
		t.Fatalf("pack onto leftovers with force: %v", err)
	}
	if got, want := keys(t, srv, "left/"), setKeys("left", res.Shards); !slices.Equal(got, want) {
		t.Errorf("after packing over leftovers: %v, want %v", got, want)
	}
}

// TestAbort: Abort removes every shard object the sink wrote, whether uploads were finished,
// half written or in a multipart upload, and never leaves an index; after Commit it does
// nothing.
func TestAbort(t *testing.T) {
	srv := start(t)
	b := open(t, srv.Bucket, "abort", Options{})
	ctx := t.Context()

	sink, err := b.NewSink(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	w, err := sink.CreateShard(ctx, layout.ShardName(0), 1000)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(randomBytes(1000, 1))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w, err = sink.CreateShard(ctx, layout.ShardName(1), 40<<20) // a multipart upload
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(randomBytes(20<<20, 2)); err != nil { // the first part is sent
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !hasUpload(t, srv, "abort/"+layout.ShardName(1)) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	sink.Abort()
	if _, err := w.Write([]byte("more")); err == nil {
		t.Errorf("Write after Abort succeeded")
	}
	w.Close()
	sink.Abort() // idempotent
	if got := keys(t, srv, "abort/"); len(got) != 0 {
		t.Errorf("objects after Abort: %v", got)
	}
	if hasUpload(t, srv, "abort/"+layout.ShardName(1)) {
		t.Errorf("the multipart upload was not aborted")
	}
	if _, err := sink.CreateShard(ctx, layout.ShardName(2), 1); err == nil {
		t.Errorf("CreateShard after Abort succeeded")
	}

	// Everything uploaded, then Abort instead of Commit: no index, no shards.
	sink, err = b.NewSink(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		w, err := sink.CreateShard(ctx, layout.ShardName(i), 5000)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(randomBytes(5000, uint64(i)))
		w.Close()
	}
	versions, err := sink.Finish(ctx)
	if err != nil || len(versions) != 3 || versions[0] == "" {
		t.Fatalf("Finish: %v, %v", versions, err)
	}
	if got := keys(t, srv, "abort/"); len(got) != 3 {
		t.Errorf("objects after Finish: %v, want the 3 shards", got)
	}
	sink.Abort()
	if got := keys(t, srv, "abort/"); len(got) != 0 {
		t.Errorf("objects after Abort: %v", got)
	}

	// After Commit, Abort does nothing.
	sink, err = b.NewSink(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	w, _ = sink.CreateShard(ctx, layout.ShardName(0), 3)
	w.Write([]byte("abc"))
	w.Close()
	if _, err := sink.Finish(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sink.Commit(ctx, []byte("index")); err != nil {
		t.Fatal(err)
	}
	sink.Abort()
	if got := keys(t, srv, "abort/"); !slices.Equal(got, setKeys("abort", 1)) {
		t.Errorf("objects after Commit and Abort: %v", got)
	}
}

// hasUpload reports whether a multipart upload of key is in progress.
func hasUpload(t *testing.T, srv *s3test.Server, key string) bool {
	for u := range srv.Client().ListIncompleteUploads(t.Context(), srv.Bucket, key, true) {
		if u.Err != nil {
			t.Fatalf("list multipart uploads: %v", u.Err)
		}
		if u.Key == key {
			return true
		}
	}
	return false
}

// TestShardWriterSizes: a shard written short or long fails rather than storing other bytes.
func TestShardWriterSizes(t *testing.T) {
	srv := start(t)
	b := open(t, srv.Bucket, "sizes", Options{})
	sink, err := b.NewSink(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Abort()
	w, err := sink.CreateShard(t.Context(), layout.ShardName(0), 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(make([]byte, 11)); err == nil {
		t.Errorf("writing 11 bytes into a 10-byte shard succeeded")
	}
	w.Write(make([]byte, 5))
	if err := w.Close(); err == nil || !strings.Contains(err.Error(), "5 of its 10 bytes") {
		t.Errorf("Close after 5 of 10 bytes: %v", err)
	}
	if _, err := sink.Finish(t.Context()); err == nil {
		t.Errorf("Finish after a short shard succeeded")
	}
	if _, err := sink.CreateShard(t.Context(), "index.aifs", 1); err == nil {
		t.Errorf("CreateShard of index.aifs succeeded")
	}
}

// TestPackCancelled: a pack cancelled midway leaves nothing behind.
func TestPackCancelled(t *testing.T) {
	srv := start(t)
	src := sourceTree(t, 4, 60, 0)
	b := open(t, srv.Bucket, "cancelled", Options{})
	sink, err := b.NewSink(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	_, err = pack.PackTo(ctx, src, sink, pack.Options{ShardSize: 100 << 10, Jobs: 2, Progress: func(p pack.Progress) {
		if p.Files == 40 {
			cancel()
		}
	}})
	if err == nil {
		t.Fatalf("a cancelled pack succeeded")
	}
	if got := keys(t, srv, "cancelled/"); len(got) != 0 {
		t.Errorf("objects after a cancelled pack: %v", got)
	}
}

// TestUploadsInFlight: a shard's Close does not wait for its upload, and at most two shards
// upload at once.
func TestUploadsInFlight(t *testing.T) {
	srv := start(t)
	var (
		mu       sync.Mutex
		inFlight = map[string]bool{}
		most     int
	)
	endpoint := faultProxy(t, srv, func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodPut || !strings.Contains(r.URL.Path, "shard-") {
			return false
		}
		mu.Lock()
		inFlight[r.URL.Path] = true
		most = max(most, len(inFlight))
		mu.Unlock()
		time.Sleep(100 * time.Millisecond) // a slow server
		mu.Lock()
		delete(inFlight, r.URL.Path)
		mu.Unlock()
		return false
	}, nil)
	b := open(t, srv.Bucket, "slow", Options{Endpoint: endpoint})
	src := sourceTree(t, 5, 12, 0)
	res, err := packSet(t, b, src, false, pack.Options{ShardSize: 50 << 10})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if most != 2 || res.Shards < 4 {
		t.Errorf("%d shards were uploaded, at most %d at once; want 2 at once", res.Shards, most)
	}
}
