package s3

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/aifs/aifs/backend"
	"github.com/aifs/aifs/backend/backendtest"
	"github.com/aifs/aifs/backend/s3/s3test"
	"github.com/aifs/aifs/layout"
)

// metadata is the fake EC2 instance metadata service that every test's instance-role lookup goes
// to (TestMain points AWS_EC2_METADATA_SERVICE_ENDPOINT at it), so that no test reaches
// 169.254.169.254.
var metadata fakeMetadata

func TestMain(m *testing.M) {
	// Nothing of the environment may send a test to AWS or to the caller's credentials: clear
	// every AWS_* variable, point the credential files nowhere, and make the default endpoint a
	// port where nothing listens.
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "AWS_") {
			os.Unsetenv(k)
		}
	}
	os.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aifs-test/credentials")
	os.Setenv("AWS_CONFIG_FILE", "/nonexistent/aifs-test/config")
	os.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
	srv := httptest.NewServer(&metadata)
	os.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", srv.URL)
	code := m.Run()
	srv.Close()
	os.Exit(code)
}

// fakeMetadata answers the IMDSv2 requests of minio-go's IAM provider with the role credentials
// set by serve, or 404 when none are set. It counts the requests.
type fakeMetadata struct {
	mu          sync.Mutex
	key, secret string
	requests    atomic.Int64
}

// serve makes f answer with the role credentials key and secret (none if key is "") until the
// end of the test.
func (f *fakeMetadata) serve(t *testing.T, key, secret string) {
	set := func(key, secret string) {
		f.mu.Lock()
		f.key, f.secret = key, secret
		f.mu.Unlock()
	}
	set(key, secret)
	t.Cleanup(func() { set("", "") })
}

func (f *fakeMetadata) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	f.mu.Lock()
	key, secret := f.key, f.secret
	f.mu.Unlock()
	const roles = "/latest/meta-data/iam/security-credentials/"
	switch {
	case key == "":
		http.NotFound(w, r)
	case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token":
		fmt.Fprint(w, "token")
	case r.URL.Path == roles:
		fmt.Fprint(w, "aifs-role\n")
	case r.URL.Path == roles+"aifs-role":
		json.NewEncoder(w).Encode(map[string]any{"Code": "Success", "AccessKeyId": key, "SecretAccessKey": secret,
			"Expiration": time.Now().Add(time.Hour)})
	default:
		http.NotFound(w, r)
	}
}

// start starts an S3 server and sets the AWS_* variables of the test to it, as a user would.
func start(t *testing.T) *s3test.Server {
	srv := s3test.Start(t)
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	return srv
}

// open returns a Backend for prefix on the server of the environment (start), closed by Cleanup.
func open(t *testing.T, bucket, prefix string, opt Options) *Backend {
	t.Helper()
	if opt.Logger == nil {
		opt.Logger = zaptest.NewLogger(t)
	}
	b, err := New(t.Context(), Location{Bucket: bucket, Prefix: prefix}, opt)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// put stores an object with the server's own client and returns its ETag.
func put(t *testing.T, srv *s3test.Server, key string, data []byte) string {
	t.Helper()
	// An empty aws-chunked body upsets versitygw (see sink.put).
	opts := minio.PutObjectOptions{DisableContentSha256: len(data) == 0}
	info, err := srv.Client().PutObject(context.Background(), srv.Bucket, key, bytes.NewReader(data), int64(len(data)), opts)
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	return info.ETag
}

// keys lists the objects under prefix (recursively).
func keys(t *testing.T, srv *s3test.Server, prefix string) []string {
	t.Helper()
	var keys []string
	for o := range srv.Client().ListObjects(context.Background(), srv.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			t.Fatalf("list %s: %v", prefix, o.Err)
		}
		keys = append(keys, o.Key)
	}
	return keys
}

func TestSuite(t *testing.T) {
	srv := start(t)
	n := 0
	backendtest.Run(t, func(t *testing.T, files map[string][]byte) backend.Backend {
		n++
		prefix := fmt.Sprintf("suite/%d", n)
		for name, data := range files {
			put(t, srv, prefix+"/"+name, data)
		}
		// Small parts, so that the suite's larger reads are split.
		b, err := New(t.Context(), Location{Bucket: srv.Bucket, Prefix: prefix}, Options{PartSize: 1 << 20, Logger: zaptest.NewLogger(t)})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return b
	})
}

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		url  string
		want Location
		err  string // a part of the error, or "" for success
	}{
		{"s3://bucket", Location{"bucket", ""}, ""},
		{"s3://bucket/", Location{"bucket", ""}, ""},
		{"s3://bucket/a/b/", Location{"bucket", "a/b"}, ""},
		{"s3://bucket/a/b//", Location{"bucket", "a/b"}, ""},
		{"S3://my.bucket-1/train", Location{"my.bucket-1", "train"}, ""},
		{"s3://bucket/dataset v2/ünï", Location{"bucket", "dataset v2/ünï"}, ""},
		{"s3://", Location{}, "no bucket"},
		{"s3:///x", Location{}, "no bucket"},
		{"s3://ab/x", Location{}, "invalid bucket name"},
		{"s3://bu$ket/x", Location{}, "invalid bucket name"},
		{"s3://192.168.1.1/x", Location{}, "invalid bucket name"},
		{"s3://a..b/x", Location{}, "invalid bucket name"},
		{"s3://bucket/a/../b", Location{}, `".."`},
		{"s3://bucket/..", Location{}, `".."`},
		{"s3://bucket/./a", Location{}, `"."`},
		{"s3://bucket/a//b", Location{}, "empty"},
		{"s3://bucket//a", Location{}, "empty"},
		{"s3://bucket/a\x00b", Location{}, "UTF-8"},
		{"s3://bucket/\xff", Location{}, "UTF-8"},
		{"s3://bucket/" + strings.Repeat("x", 1020), Location{}, "too long"},
		{"/data/set", Location{}, "not an s3:// URL"},
		{"http://bucket/x", Location{}, "not an s3:// URL"},
	} {
		got, err := ParseURL(c.url)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", c.url, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("ParseURL(%q) = %+v, %v; want an error containing %q", c.url, got, err, c.err)
		case c.err != "" && strings.Contains(err.Error(), "\n"):
			t.Errorf("ParseURL(%q): the error has more than one line: %q", c.url, err)
		}
		if c.err == "" && IsURL(c.url) != true {
			t.Errorf("IsURL(%q) = false", c.url)
		}
	}
	for _, s := range []string{"", "s3:/x", "./s3://x", "/mnt/s3://x"} {
		if IsURL(s) {
			t.Errorf("IsURL(%q) = true", s)
		}
	}
	for _, c := range []struct {
		loc  Location
		want string
	}{{Location{"bkt", ""}, "s3://bkt"}, {Location{"bkt", "x/y"}, "s3://bkt/x/y"}} {
		if got := c.loc.String(); got != c.want {
			t.Errorf("%+v.String() = %q, want %q", c.loc, got, c.want)
		}
		if back, err := ParseURL(c.want); err != nil || back != c.loc {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", c.want, back, err, c.loc)
		}
	}
}

func TestParseEndpoint(t *testing.T) {
	for _, c := range []struct {
		in, host, display string
		secure            bool
		err               string
	}{
		{"http://127.0.0.1:7070", "127.0.0.1:7070", "http://127.0.0.1:7070", false, ""},
		{"http://127.0.0.1:7070/", "127.0.0.1:7070", "http://127.0.0.1:7070", false, ""},
		{"https://s3.example.com", "s3.example.com", "https://s3.example.com", true, ""},
		{"minio.local:9000", "minio.local:9000", "https://minio.local:9000", true, ""},
		{"ftp://host", "", "", false, "scheme"},
		{"http://host/bucket", "", "", false, "want http"},
		{"http://", "", "", false, "want http"},
		{"http://key:hunter2@host", "", "", false, "credentials"},
	} {
		host, secure, display, err := parseEndpoint(c.in)
		switch {
		case c.err == "" && (err != nil || host != c.host || secure != c.secure || display != c.display):
			t.Errorf("parseEndpoint(%q) = %q, %v, %q, %v; want %q, %v, %q", c.in, host, secure, display, err, c.host, c.secure, c.display)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("parseEndpoint(%q): %v, want an error containing %q", c.in, err, c.err)
		case err != nil && strings.Contains(err.Error(), "hunter2"):
			t.Errorf("parseEndpoint(%q) shows the password: %v", c.in, err)
		}
	}
}

func TestStatsJSON(t *testing.T) {
	out, err := json.Marshal(Stats{Requests: 1, Bytes: 2, Retries: 3, Errors: 4, Throttled: 5, InFlight: 6, Limit: 7})
	if want := `{"requests":1,"bytes":2,"retries":3,"errors":4,"throttled":5,"in_flight":6,"in_flight_limit":7,"credential_refreshes":0}`; err != nil || string(out) != want {
		t.Errorf("json.Marshal(Stats) = %s, %v; want %s", out, err, want)
	}
}

// TestNewErrors: each way New can fail is one line that says what is wrong, and no secret key
// appears in it or in any log line.
func TestNewErrors(t *testing.T) {
	srv := start(t)
	free := func() string { // a port where nothing listens
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return "http://" + l.Addr().String()
	}()
	const badSecret = "wrong-secret-0f8e7d6c5b"
	for _, c := range []struct {
		name, bucket, endpoint, want string
		env                          []string
	}{
		{"missing bucket", "no-such-bucket", srv.Endpoint, "s3: bucket no-such-bucket does not exist at " + srv.Endpoint, nil},
		{"wrong secret", srv.Bucket, srv.Endpoint, "s3: access denied to s3://" + srv.Bucket + "/p at " + srv.Endpoint, []string{"AWS_SECRET_ACCESS_KEY", badSecret}},
		{"wrong key id", srv.Bucket, srv.Endpoint, "s3: access denied to s3://" + srv.Bucket + "/p", []string{"AWS_ACCESS_KEY_ID", "nobody"}},
		{"nothing listening", srv.Bucket, free, "s3: cannot reach " + free + ": ", nil},
		{"https to plain HTTP", srv.Bucket, strings.Replace(srv.Endpoint, "http:", "https:", 1), "s3: cannot reach https://", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.env != nil {
				t.Setenv(c.env[0], c.env[1])
			}
			core, logs := observer.New(zap.DebugLevel)
			start := time.Now()
			b, err := New(t.Context(), Location{Bucket: c.bucket, Prefix: "p"}, Options{Endpoint: c.endpoint, Timeout: time.Second, Retries: 2, Logger: zap.New(core)})
			if err == nil {
				b.Close()
				t.Fatalf("New succeeded, want an error containing %q", c.want)
			}
			msg := err.Error()
			if !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
				t.Errorf("New: %q, want one line containing %q", msg, c.want)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("New took %v to fail with 3 attempts of at most 1 s", took)
			}
			for _, e := range logs.All() {
				line := fmt.Sprint(e.Message, e.ContextMap())
				msg += "\n" + line
			}
			if strings.Contains(msg, srv.SecretKey) || strings.Contains(msg, badSecret) {
				t.Errorf("a secret key appears in the error or the logs: %s", msg)
			}
		})
	}
	if _, err := New(t.Context(), Location{Bucket: srv.Bucket}, Options{Endpoint: srv.Endpoint, Addressing: "dns"}); err == nil || !strings.Contains(err.Error(), "addressing") {
		t.Errorf("New with Addressing dns: %v, want an error about the addressing", err)
	}
	if _, err := New(t.Context(), Location{Bucket: "x"}, Options{Endpoint: srv.Endpoint}); err == nil || !strings.Contains(err.Error(), "bucket") {
		t.Errorf("New with bucket x: %v, want an error about the bucket name", err)
	}
}

// TestCredentialChain: the environment comes first, then the shared credentials file, and the
// instance role is asked only when neither has credentials.
func TestCredentialChain(t *testing.T) {
	srv := start(t)
	check := func(t *testing.T, opt Options, wantIMDS bool) {
		t.Helper()
		before := metadata.requests.Load()
		opt.Endpoint = srv.Endpoint
		b := open(t, srv.Bucket, "", opt)
		if _, err := b.NewSink(t.Context(), false); err != nil { // a signed request beyond New's check
			t.Errorf("NewSink: %v", err)
		}
		if asked := metadata.requests.Load() > before; asked != wantIMDS {
			t.Errorf("instance role asked: %v, want %v", asked, wantIMDS)
		}
	}
	metadata.serve(t, "wrong-role-key", "wrong-role-secret")
	t.Run("environment", func(t *testing.T) { check(t, Options{}, false) })

	dir := t.TempDir()
	file := filepath.Join(dir, "credentials")
	os.WriteFile(file, []byte(fmt.Sprintf("[default]\naws_access_key_id = nobody\naws_secret_access_key = nothing\n\n"+
		"[aifs]\naws_access_key_id = %s\naws_secret_access_key = %s\n", srv.AccessKey, srv.SecretKey)), 0o600)
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", file)
	t.Run("file with Profile", func(t *testing.T) { check(t, Options{Profile: "aifs"}, false) })
	t.Run("file with AWS_PROFILE", func(t *testing.T) {
		t.Setenv("AWS_PROFILE", "aifs")
		check(t, Options{}, false)
	})
	t.Run("environment before file", func(t *testing.T) {
		t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
		t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
		check(t, Options{Profile: "default"}, false) // the default profile's keys are wrong
	})

	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "none"))
	metadata.serve(t, srv.AccessKey, srv.SecretKey)
	t.Run("instance role", func(t *testing.T) { check(t, Options{}, true) })

	metadata.serve(t, "", "")
	t.Run("anonymous", func(t *testing.T) {
		_, err := New(t.Context(), Location{Bucket: srv.Bucket}, Options{Endpoint: srv.Endpoint})
		if err == nil || !strings.Contains(err.Error(), "access denied") {
			t.Errorf("New with no credentials anywhere: %v, want access denied", err)
		}
	})
}

// TestOpen: a missing object, another size or another ETag than the index records are caught
// at Open with the right sentinel; Version is the object's ETag.
func TestOpen(t *testing.T) {
	srv := start(t)
	data := []byte("the bytes of a shard")
	etag := put(t, srv, "set/"+layout.ShardName(0), data)
	b := open(t, srv.Bucket, "set", Options{})
	name := layout.ShardName(0)
	url := "s3://" + srv.Bucket + "/set/" + name
	size := uint64(len(data))
	for _, c := range []struct {
		shard layout.Shard
		want  error
		text  string
	}{
		{layout.Shard{Name: layout.ShardName(1), Size: size}, backend.ErrNotExist, "s3://" + srv.Bucket + "/set/" + layout.ShardName(1)},
		{layout.Shard{Name: name, Size: size + 1}, backend.ErrMismatch, url + " has 20 bytes, the index says 21"},
		{layout.Shard{Name: name, Size: size, Version: "0123456789abcdef0123456789abcdef"}, backend.ErrMismatch,
			url + " was replaced (ETag " + etag + ", the index says 0123456789abcdef0123456789abcdef)"},
	} {
		sh, err := b.Open(t.Context(), c.shard)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) {
			t.Errorf("Open(%+v): %v, want %v saying %q", c.shard, err, c.want, c.text)
		}
		if sh != nil {
			sh.Close()
		}
	}
	for _, version := range []string{"", etag, `"` + etag + `"`} {
		sh, err := b.Open(t.Context(), layout.Shard{Name: name, Size: size, Version: version})
		if err != nil {
			t.Fatalf("Open with version %q: %v", version, err)
		}
		if v := sh.(backend.Versioned).Version(); v != etag {
			t.Errorf("Version() = %q, want the ETag %q", v, etag)
		}
		sh.Close()
	}
	if got := b.String(); got != "s3://"+srv.Bucket+"/set" {
		t.Errorf("String() = %q", got)
	}
}

// TestReadIndex: the index comes back whole, from one GET or in parts; a prefix without one
// is not a shard set.
func TestReadIndex(t *testing.T) {
	srv := start(t)
	small := []byte("a small index")
	big := bytes.Repeat([]byte("0123456789abcdef"), 5000) // 80000 bytes: 10 parts of 8000
	put(t, srv, "small/index.aifs", small)
	put(t, srv, "big/index.aifs", big)
	put(t, srv, "empty/index.aifs", nil)
	for _, c := range []struct {
		prefix   string
		want     []byte
		requests int64
	}{{"small", small, 1}, {"big", big, 10}, {"empty", []byte{}, 1}} {
		b := open(t, srv.Bucket, c.prefix, Options{PartSize: 8000, Parallel: 3})
		before := b.Stats().Requests
		got, err := b.ReadIndex(t.Context())
		if err != nil || !bytes.Equal(got, c.want) {
			t.Errorf("ReadIndex of %s: %d bytes, %v; want %d bytes", c.prefix, len(got), err, len(c.want))
		}
		if n := b.Stats().Requests - before; n != c.requests {
			t.Errorf("ReadIndex of %s took %d requests, want %d", c.prefix, n, c.requests)
		}
		if n := b.Stats().Bytes; n != int64(len(c.want)) {
			t.Errorf("ReadIndex of %s counted %d bytes, want %d", c.prefix, n, len(c.want))
		}
	}
	b := open(t, srv.Bucket, "nothing", Options{})
	_, err := b.ReadIndex(t.Context())
	want := "s3://" + srv.Bucket + "/nothing is not a shard set (no index.aifs)"
	if !errors.Is(err, backend.ErrNotExist) || err.Error() != want {
		t.Errorf("ReadIndex of a prefix without an index: %v, want ErrNotExist saying %q", err, want)
	}
	b.Close()
	if _, err := b.ReadIndex(t.Context()); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("ReadIndex after Close: %v, want fs.ErrClosed", err)
	}
	if _, err := b.NewSink(t.Context(), false); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("NewSink after Close: %v, want fs.ErrClosed", err)
	}
}
