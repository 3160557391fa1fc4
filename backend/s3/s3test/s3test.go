// Package s3test runs a real S3 server for tests: versitygw (github.com/versity/versitygw,
// v1.8.0) with its posix backend, listening on 127.0.0.1 only, one process per Start.
//
// The binary is found through $AIFS_VERSITYGW, then PATH, then $(go env GOPATH)/bin; install it
// with `go install github.com/versity/versitygw/cmd/versitygw@v1.8.0` (scripts/test.sh does).
// It runs as `versitygw --port 127.0.0.1:PORT --quiet --keep-alive posix DIR`, in single-account
// mode with fixed test keys passed as ROOT_ACCESS_KEY/ROOT_SECRET_KEY and an otherwise empty
// environment. Without --keep-alive versitygw closes every connection after one response.
//
// How the posix backend stores things, which tests may rely on to see or alter objects behind
// the server's back:
//   - bucket B is the directory Dir/B, and object K of it the regular file Dir/B/K ("/" in keys
//     become subdirectories); the file holds exactly the object's bytes.
//   - metadata lives in extended attributes of that file: the ETag in user.etag, quoted as S3
//     sends it (an MD5 hex digest for a single PUT, "digest-N" for a multipart upload of N
//     parts), plus user.content-type and user.checksums. The ETag is never recomputed, so
//     rewriting a file's bytes in place keeps the stale ETag, while copying another object's
//     file with its xattrs (cp --preserve=all) replaces the object as a new upload would.
//   - multipart uploads in progress live under Dir/B/.sgwtmp/multipart, and Dir/.vgwlocks
//     holds lock files; neither is listed as objects.
//
// Quirks met with minio-go as the client: an unknown access key is answered with 404
// XAdminUserNotFound (so a HEAD of the bucket looks like a missing bucket) rather than 403
// InvalidAccessKeyId; a PUT of an empty body with minio-go's streaming signature (aws-chunked,
// used over plain HTTP) succeeds but is followed by a stray "400 Bad Request" on the same
// connection, which net/http logs as an unsolicited response, so empty objects are best put
// with DisableContentSha256; an upload's Content-Encoding aws-chunked is stored and sent back
// with the object. If-Match on GET is honoured (412 PreconditionFailed), a range past the end
// is clipped, and any range of an empty object is 416 InvalidRange.
//
// Stop kills the server at once, like a crash or a network outage; Start brings it back on the
// same port and directory.
package s3test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Fixed credentials of the test server's root account, distinctive enough that a test can look
// for the secret in messages that must not show it.
const (
	accessKey = "aifs-test-access-key"
	secretKey = "aifs-test-secret-5a17e0c9d3"
	bucket    = "aifs-test"
	region    = "us-east-1"
)

// Install is the command that installs the server binary.
const Install = "go install github.com/versity/versitygw/cmd/versitygw@v1.8.0"

// Server is a running (or stopped) versitygw. Its fields are fixed for its lifetime. Its methods
// must be called from the test's goroutine (they may call t.Fatal).
type Server struct {
	Endpoint  string // "http://127.0.0.1:PORT"
	AccessKey string
	SecretKey string
	Bucket    string // created by Start, empty
	Dir       string // the posix root: object K of Bucket is the file Dir/Bucket/K

	t    testing.TB
	bin  string
	addr string        // 127.0.0.1:PORT
	out  lockedBuffer  // the server's output, shown when it fails to start
	cmd  *exec.Cmd     // nil while stopped
	done chan struct{} // closed when cmd has exited
}

// Start starts a server with an empty bucket Bucket and registers its end with t.Cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{AccessKey: accessKey, SecretKey: secretKey, Bucket: bucket, Dir: t.TempDir(), t: t, bin: findBinary(t)}
	t.Cleanup(s.Stop)
	// The free port is found by binding and releasing it, so another process may take it
	// before versitygw binds it; try a few.
	var err error
	for range 5 {
		s.addr = freePort(t)
		s.Endpoint = "http://" + s.addr
		if err = s.start(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("s3test: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Client().MakeBucket(ctx, s.Bucket, minio.MakeBucketOptions{Region: region}); err != nil {
		t.Fatalf("s3test: create bucket %s: %v", s.Bucket, err)
	}
	return s
}

// Stop kills the server and waits for it to exit. It is idempotent.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Start restarts a stopped server on the same port and directory; it returns once the server
// answers. It does nothing if the server is running.
func (s *Server) Start() {
	s.t.Helper()
	if s.cmd != nil {
		return
	}
	if err := s.start(); err != nil {
		s.t.Fatalf("s3test: restart: %v", err)
	}
}

// Env returns the AWS_* variables that point an S3 client (aifs in a subprocess) at the server.
func (s *Server) Env() []string {
	return []string{
		"AWS_ENDPOINT_URL=" + s.Endpoint,
		"AWS_ACCESS_KEY_ID=" + s.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + s.SecretKey,
		"AWS_SESSION_TOKEN=",
		"AWS_REGION=" + region,
	}
}

// Client returns a minio-go client of the server, for tests that set up or inspect objects.
func (s *Server) Client() *minio.Client {
	c, err := minio.New(s.addr, &minio.Options{
		Creds:  credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		Region: region,
	})
	if err != nil {
		s.t.Fatalf("s3test: %v", err)
	}
	return c
}

// start runs the binary and waits until it answers S3 requests.
func (s *Server) start() error {
	cmd := exec.Command(s.bin, "--port", s.addr, "--quiet", "--keep-alive", "posix", s.Dir)
	// A clean environment: nothing of the caller's (VGW_*, AWS_*) reaches the server.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + s.Dir,
		"ROOT_ACCESS_KEY=" + s.AccessKey, "ROOT_SECRET_KEY=" + s.SecretKey}
	s.out.Reset()
	cmd.Stdout, cmd.Stderr = &s.out, &s.out
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done
	client := s.Client()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := client.ListBuckets(ctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-done:
			s.cmd = nil
			return fmt.Errorf("versitygw on %s exited: %s", s.addr, strings.TrimSpace(s.out.String()))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("versitygw on %s did not answer within 15 s (last error: %v): %s", s.addr, err, s.out.String())
		}
	}
}

// findBinary returns the path of versitygw or fails the test saying how to install it.
func findBinary(t testing.TB) string {
	if p := os.Getenv("AIFS_VERSITYGW"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("s3test: AIFS_VERSITYGW=%s: %v; install the server with: %s", p, err, Install)
		}
		return p
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, dir := range filepath.SplitList(strings.TrimSpace(string(out))) {
			p := filepath.Join(dir, "bin", "versitygw")
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	t.Fatalf("s3test: the S3 server versitygw is not installed (looked in $AIFS_VERSITYGW, PATH and $(go env GOPATH)/bin); install it with: %s", Install)
	return ""
}

func freePort(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("s3test: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

// lockedBuffer collects the output of a process: os/exec copies it from another goroutine.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *lockedBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}
