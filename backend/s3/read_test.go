package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aifs/aifs/backend"
	"github.com/aifs/aifs/backend/s3/s3test"
	"github.com/aifs/aifs/layout"
)

// shardAt stores data as shard 0 of prefix and opens it through a new Backend with opt.
func shardAt(t *testing.T, srv *s3test.Server, prefix string, data []byte, opt Options) (*Backend, backend.Shard) {
	t.Helper()
	put(t, srv, prefix+"/"+layout.ShardName(0), data)
	b := open(t, srv.Bucket, prefix, opt)
	sh, err := b.Open(t.Context(), layout.Shard{Name: layout.ShardName(0), Size: uint64(len(data))})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { sh.Close() })
	return b, sh
}

func randomBytes(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// faultProxy starts a reverse proxy to srv on 127.0.0.1 and returns its URL. For each request,
// fault may answer it itself (returning true) instead of passing it on; modify, if not nil,
// may change the server's answers.
func faultProxy(t *testing.T, srv *s3test.Server, fault func(w http.ResponseWriter, r *http.Request) bool, modify func(*http.Response) error) string {
	target, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target) // keeps the Host header the client signed
	proxy.ModifyResponse = modify
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !fault(w, r) {
			proxy.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// s3Error answers like an S3 server refusing a request.
func s3Error(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected by the test</Message></Error>`, code)
}

// TestParts: a read longer than PartSize is split into parts of PartSize, one GET each.
func TestParts(t *testing.T) {
	srv := start(t)
	data := randomBytes(1<<20+100, 1)
	b, sh := shardAt(t, srv, "parts", data, Options{PartSize: 64 << 10, Parallel: 4})
	for _, c := range []struct {
		off, n int64
		gets   int64
	}{
		{0, 64 << 10, 1},
		{5, 100, 1},
		{1000, 64<<10 + 1, 2},
		{0, 1<<20 + 100, 17},
		{99, 1 << 20, 16},
	} {
		before := b.Stats()
		p := make([]byte, c.n)
		if err := sh.ReadAt(t.Context(), p, c.off); err != nil {
			t.Fatalf("ReadAt [%d,+%d): %v", c.off, c.n, err)
		}
		if !bytes.Equal(p, data[c.off:c.off+c.n]) {
			t.Errorf("ReadAt [%d,+%d): wrong bytes", c.off, c.n)
		}
		after := b.Stats()
		if n := after.Requests - before.Requests; n != c.gets {
			t.Errorf("ReadAt [%d,+%d) with 64 KiB parts: %d requests, want %d", c.off, c.n, n, c.gets)
		}
		if n := after.Bytes - before.Bytes; n != c.n {
			t.Errorf("ReadAt [%d,+%d): Stats counted %d bytes", c.off, c.n, n)
		}
	}
}

// TestReplacedAfterOpen: once the object changes, reads fail with ErrMismatch, whether the
// server checks If-Match or not.
func TestReplacedAfterOpen(t *testing.T) {
	srv := start(t)
	data := randomBytes(50000, 2)
	_, sh := shardAt(t, srv, "replaced", data, Options{PartSize: 16 << 10})
	p := make([]byte, 40000)
	if err := sh.ReadAt(t.Context(), p, 10); err != nil {
		t.Fatalf("ReadAt before the change: %v", err)
	}
	other := randomBytes(len(data), 3) // same size, other bytes
	put(t, srv, "replaced/"+layout.ShardName(0), other)
	for _, n := range []int{100, 40000} { // one GET, and parts
		err := sh.ReadAt(t.Context(), p[:n], 10)
		if !errors.Is(err, backend.ErrMismatch) || !strings.Contains(err.Error(), "replaced") {
			t.Errorf("ReadAt of %d bytes after the object was replaced: %v, want ErrMismatch", n, err)
		}
	}

	// An answer with another ETag than Open saw (a server that ignores If-Match, or serves
	// another version) fails the read too.
	put(t, srv, "replaced2/"+layout.ShardName(0), data)
	endpoint := faultProxy(t, srv, func(http.ResponseWriter, *http.Request) bool { return false }, func(r *http.Response) error {
		if r.Request.Method == http.MethodGet {
			r.Header.Set("ETag", `"0123456789abcdef0123456789abcdef"`)
		}
		return nil
	})
	b := open(t, srv.Bucket, "replaced2", Options{Endpoint: endpoint})
	sh, err := b.Open(t.Context(), layout.Shard{Name: layout.ShardName(0), Size: uint64(len(data))})
	if err != nil {
		t.Fatalf("Open through the proxy: %v", err)
	}
	defer sh.Close()
	err = sh.ReadAt(t.Context(), p[:100], 0)
	if !errors.Is(err, backend.ErrMismatch) || !strings.Contains(err.Error(), "ETag 0123456789abcdef0123456789abcdef") {
		t.Errorf("ReadAt answered with another ETag: %v, want ErrMismatch", err)
	}
	if s := b.Stats(); s.Retries != 0 {
		t.Errorf("a replaced object was retried %d times", s.Retries)
	}
}

// TestReplacedOnDisk replaces the object's file and ETag in the server's storage, as another
// upload would, and checks that Open with the index's version and reads see it.
func TestReplacedOnDisk(t *testing.T) {
	srv := start(t)
	data := randomBytes(3000, 4)
	etag := put(t, srv, "a/"+layout.ShardName(0), data)
	put(t, srv, "b/"+layout.ShardName(0), randomBytes(3000, 5))
	b := open(t, srv.Bucket, "a", Options{})
	s := layout.Shard{Name: layout.ShardName(0), Size: 3000, Version: etag}
	sh, err := b.Open(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	obj := func(prefix string) string { return filepath.Join(srv.Dir, srv.Bucket, prefix, layout.ShardName(0)) }
	if out, err := exec.Command("cp", "--preserve=all", obj("b"), obj("a")).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	if err := sh.ReadAt(t.Context(), make([]byte, 10), 0); !errors.Is(err, backend.ErrMismatch) {
		t.Errorf("ReadAt after the file was replaced: %v, want ErrMismatch", err)
	}
	if sh, err := b.Open(t.Context(), s); !errors.Is(err, backend.ErrMismatch) || !strings.Contains(err.Error(), "was replaced") {
		t.Errorf("Open after the file was replaced: %v, want ErrMismatch", err)
		if sh != nil {
			sh.Close()
		}
	}
}

// TestRetries: transient failures (503 SlowDown, a connection cut before the answer, a body
// cut short) are retried, each counted; a 403 is not. Throttling (503 SlowDown) does not count
// against the retries.
func TestRetries(t *testing.T) {
	srv := start(t)
	data := randomBytes(100000, 6)
	etag := put(t, srv, "retry/"+layout.ShardName(0), data)
	var faults atomic.Int64 // GETs of the shard still to fail
	var kind atomic.Value
	endpoint := faultProxy(t, srv, func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, layout.ShardName(0)) || faults.Add(-1) < 0 {
			return false
		}
		switch kind.Load() {
		case "503":
			s3Error(w, http.StatusServiceUnavailable, "SlowDown")
		case "500":
			s3Error(w, http.StatusInternalServerError, "InternalError")
		case "403":
			s3Error(w, http.StatusForbidden, "AccessDenied")
		case "cut":
			// Part of an answer, then the connection closes. (A connection closed before any
			// answer on a reused connection is retried by net/http itself, unseen.)
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Write([]byte("HTTP/1.1 200 OK\r\nContent-"))
				conn.Close()
			}
		case "short":
			w.Header().Set("ETag", `"`+etag+`"`)
			w.Header().Set("Content-Length", "100")
			w.Header().Set("Content-Range", "bytes 0-99/100000")
			w.WriteHeader(http.StatusPartialContent)
			w.Write(data[:50])
			// the handler returns: the server closes the connection after a short body
		}
		return true
	}, nil)
	b := open(t, srv.Bucket, "retry", Options{Endpoint: endpoint, Timeout: 5 * time.Second})
	sh, err := b.Open(t.Context(), layout.Shard{Name: layout.ShardName(0), Size: uint64(len(data))})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	for _, c := range []struct {
		kind    string
		n       int64
		retries int64
		fail    bool
	}{
		{"503", 3, 3, false},
		{"500", 1, 1, false},
		{"cut", 2, 2, false},
		{"short", 2, 2, false},
		{"503", 6, 6, false}, // throttling: retried past the 5 retries, within (5+1)×5 s
		{"500", 6, 5, true},  // more than the 5 retries
		{"403", 1, 0, true},
	} {
		kind.Store(c.kind)
		faults.Store(c.n)
		before := b.Stats()
		p := make([]byte, 100)
		err := sh.ReadAt(t.Context(), p, 0)
		after := b.Stats()
		if c.fail != (err != nil) {
			t.Errorf("%d × %s: ReadAt: %v, want failure %v", c.n, c.kind, err, c.fail)
		} else if !c.fail && !bytes.Equal(p, data[:100]) {
			t.Errorf("%d × %s: ReadAt returned wrong bytes", c.n, c.kind)
		}
		if n := after.Retries - before.Retries; n != c.retries {
			t.Errorf("%d × %s: %d retries, want %d", c.n, c.kind, n, c.retries)
		}
		if n := after.Errors - before.Errors; n != map[bool]int64{false: 0, true: 1}[c.fail] {
			t.Errorf("%d × %s: Stats counted %d errors", c.n, c.kind, n)
		}
	}
}

// TestThrottleBudget: a server that throttles every request fails a read only after the retry
// budget's time, (Retries+1)×Timeout, with every answer counted as throttled and the limit on
// requests in flight cut; once the throttling stops the same read succeeds.
func TestThrottleBudget(t *testing.T) {
	srv := start(t)
	data := randomBytes(100000, 9)
	put(t, srv, "slow/"+layout.ShardName(0), data)
	var throttling atomic.Bool
	throttling.Store(true)
	endpoint := faultProxy(t, srv, func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, layout.ShardName(0)) || !throttling.Load() {
			return false
		}
		s3Error(w, http.StatusServiceUnavailable, "SlowDown")
		return true
	}, nil)
	const timeout = 300 * time.Millisecond
	b := open(t, srv.Bucket, "slow", Options{Endpoint: endpoint, Timeout: timeout, Retries: 1})
	sh, err := b.Open(t.Context(), layout.Shard{Name: layout.ShardName(0), Size: uint64(len(data))})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	p := make([]byte, 100)
	begin := time.Now()
	err = sh.ReadAt(t.Context(), p, 0)
	took := time.Since(begin)
	st := b.Stats()
	if err == nil || took < 2*timeout || took > 2*timeout+backoffCap+time.Second {
		t.Errorf("ReadAt under constant throttling: %v after %v, want a failure after the budget of %v", err, took, 2*timeout)
	}
	if st.Throttled < 3 || st.Errors != 1 || st.Limit >= maxInFlight || st.InFlight != 0 {
		t.Errorf("stats under throttling: %+v, want 3+ throttled, 1 error, the limit cut, none in flight", st)
	}
	throttling.Store(false)
	if err := sh.ReadAt(t.Context(), p, 0); err != nil || !bytes.Equal(p, data[:100]) {
		t.Errorf("ReadAt after the throttling: %v", err)
	}
}

// TestOutage: with the server down a read fails within its attempts' time limits, with an error
// that is not the caller's cancellation; once the server is back the same read succeeds.
func TestOutage(t *testing.T) {
	srv := start(t)
	data := randomBytes(200000, 8)
	b, sh := shardAt(t, srv, "outage", data, Options{Timeout: time.Second, Retries: 2})
	p := make([]byte, 1000)
	if err := sh.ReadAt(t.Context(), p, 0); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	start := time.Now()
	err := sh.ReadAt(t.Context(), p, 5000)
	if !errors.Is(err, backend.ErrUnavailable) || errors.Is(err, syscall.ECONNREFUSED) || t.Context().Err() != nil {
		t.Errorf("ReadAt with the server stopped: %v, want ErrUnavailable without the network's errno", err)
	}
	if took := time.Since(start); took > 3*time.Second+2*backoffCap {
		t.Errorf("ReadAt with the server stopped took %v, beyond 3 attempts of 1 s and their backoff", took)
	}
	if s := b.Stats(); s.Errors != 1 || s.Retries != 2 {
		t.Errorf("after the failed read: %+v, want 1 error and 2 retries", s)
	}
	srv.Start()
	if err := sh.ReadAt(t.Context(), p, 5000); err != nil || !bytes.Equal(p, data[5000:6000]) {
		t.Errorf("ReadAt after the server came back: %v", err)
	}
}

// TestTimeout: a server that accepts requests but never answers costs each attempt its Timeout.
func TestTimeout(t *testing.T) {
	srv := start(t)
	data := randomBytes(1000, 9)
	put(t, srv, "hang/"+layout.ShardName(0), data)
	var hang atomic.Bool
	endpoint := faultProxy(t, srv, func(w http.ResponseWriter, r *http.Request) bool {
		if !hang.Load() || r.Method != http.MethodGet {
			return false
		}
		<-r.Context().Done() // the client gave up on the attempt
		return true
	}, nil)
	const timeout = 300 * time.Millisecond
	b := open(t, srv.Bucket, "hang", Options{Endpoint: endpoint, Timeout: timeout, Retries: 2})
	sh, err := b.Open(t.Context(), layout.Shard{Name: layout.ShardName(0), Size: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	hang.Store(true)
	start := time.Now()
	err = sh.ReadAt(t.Context(), make([]byte, 10), 0)
	took := time.Since(start)
	if !errors.Is(err, backend.ErrUnavailable) || !strings.Contains(err.Error(), "no answer in time") || errors.Is(err, t.Context().Err()) {
		t.Errorf("ReadAt from a server that does not answer: %v, want a time-out", err)
	}
	if took < 3*timeout || took > 3*timeout+2*backoffCap {
		t.Errorf("ReadAt took %v, want 3 attempts of %v plus backoff", took, timeout)
	}
	if s := b.Stats(); s.Retries != 2 {
		t.Errorf("Retries = %d, want 2", s.Retries)
	}
	// A caller's deadline shorter than the attempts ends the read with the caller's error.
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if err := sh.ReadAt(ctx, make([]byte, 10), 0); !errors.Is(err, ctx.Err()) || ctx.Err() == nil {
		t.Errorf("ReadAt with a 100 ms deadline: %v, want the context's error", err)
	}
}
