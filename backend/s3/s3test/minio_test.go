package s3test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/minio/minio-go/v7"
)

// TestMinIO checks that StartMinIO runs MinIO erasure-coding over four drives, that objects
// make a PUT and ranged GET round trip, and that a stopped server comes back with its objects.
// Unlike the tests that use s3test, it looks at MinIO's own layout on the drives, to see that
// the server is really what the package doc says.
func TestMinIO(t *testing.T) {
	srv := StartMinIO(t)
	drives := []string{"d1", "d2", "d3", "d4"}

	// Each drive's format.json names the one erasure set of all four drives.
	var format struct {
		Format string `json:"format"`
		XL     struct {
			This string     `json:"this"`
			Sets [][]string `json:"sets"`
		} `json:"xl"`
	}
	this := map[string]bool{}
	for _, d := range drives {
		b, err := os.ReadFile(filepath.Join(srv.Dir, d, ".minio.sys", "format.json"))
		if err != nil {
			t.Fatalf("drive %s: %v", d, err)
		}
		if err := json.Unmarshal(b, &format); err != nil {
			t.Fatalf("drive %s: format.json: %v", d, err)
		}
		if format.Format != "xl" || len(format.XL.Sets) != 1 || len(format.XL.Sets[0]) != 4 {
			t.Fatalf("drive %s: format.json is not one erasure set of 4 drives: %s", d, b)
		}
		this[format.XL.This] = true
	}
	if len(this) != 4 {
		t.Fatalf("the 4 drives have %d distinct ids, want 4", len(this))
	}

	// An object of 2.5 erasure blocks (1 MiB each) is split into 2 data and 2 parity shards, one
	// part file a drive, each half the object plus a 32-byte bitrot checksum a block.
	data := make([]byte, 5<<19)
	rand.NewChaCha8([32]byte{1}).Read(data)
	const key = "dir/object"
	client := srv.Client()
	ctx := context.Background()
	if _, err := client.PutObject(ctx, srv.Bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatalf("put: %v", err)
	}
	for _, d := range drives {
		parts, err := filepath.Glob(filepath.Join(srv.Dir, d, srv.Bucket, key, "*", "part.1"))
		if err != nil || len(parts) != 1 {
			t.Fatalf("drive %s: part files of %s: %v %v, want one", d, key, parts, err)
		}
		fi, err := os.Stat(parts[0])
		if err != nil {
			t.Fatal(err)
		}
		if n, half := fi.Size(), int64(len(data))/2; n < half || n > half+4096 {
			t.Errorf("drive %s: %s has %d bytes, want a shard of half the object's %d", d, parts[0], n, len(data))
		}
	}

	// Ranged GETs: within the first block, across shard and block boundaries, to the end.
	get := func(off, end int64) {
		t.Helper()
		var opts minio.GetObjectOptions
		if err := opts.SetRange(off, end); err != nil {
			t.Fatal(err)
		}
		obj, err := client.GetObject(ctx, srv.Bucket, key, opts)
		if err != nil {
			t.Fatalf("get [%d,%d]: %v", off, end, err)
		}
		defer obj.Close()
		got, err := io.ReadAll(obj)
		if err != nil {
			t.Fatalf("get [%d,%d]: %v", off, end, err)
		}
		if !bytes.Equal(got, data[off:end+1]) {
			t.Fatalf("get [%d,%d]: %d bytes differ from those put", off, end, len(got))
		}
	}
	get(0, 99)
	get(1<<19-10, 3<<19+10)
	get(int64(len(data))-1000, int64(len(data))-1)

	srv.Stop()
	if c, err := net.Dial("tcp", srv.addr); err == nil {
		c.Close()
		t.Fatalf("%s still accepts connections after Stop", srv.addr)
	}
	srv.Start()
	get(12345, 1<<20)
}
