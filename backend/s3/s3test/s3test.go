// Package s3test runs a real S3 server for tests, listening on 127.0.0.1 only, one process per
// start: versitygw with its posix backend (Start), or MinIO erasure-coding over four drives
// (StartMinIO). Both hand back the same *Server, whose bucket is created and empty.
//
// The binaries are found through $AIFS_VERSITYGW or $AIFS_MINIO, then PATH, then
// $(go env GOPATH)/bin; install them with InstallVersityGW and InstallMinIO (scripts/test.sh
// does). A missing binary fails the test rather than skipping it. Each server runs with fixed
// test keys and an otherwise empty environment (nothing of the caller's VGW_*, MINIO_*, AWS_*
// or CI), with HOME=Dir.
//
// # versitygw
//
// github.com/versity/versitygw v1.8.0 runs as `versitygw --port 127.0.0.1:PORT --quiet
// --keep-alive posix DIR`, in single-account mode with the keys passed as
// ROOT_ACCESS_KEY/ROOT_SECRET_KEY. Without --keep-alive versitygw closes every connection after
// one response.
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
// # MinIO
//
// github.com/minio/minio at MinIOVersion (MinIO tags no semver releases, so the pin is a
// pseudo-version of a commit) runs as one process over four drive directories, `minio server
// --quiet --address 127.0.0.1:PORT Dir/d{1...4}` (MinIO expands the braces itself): one erasure
// set of 4 drives, by default 2 data and 2 parity shards, as a production MinIO on one host
// with four disks. Its environment: the keys as MINIO_ROOT_USER/MINIO_ROOT_PASSWORD;
// MINIO_BROWSER=off, so there is no console and no second port; and MINIO_CI_CD=1, without
// which MinIO refuses drives on the root filesystem (it logs "drive not found, will be retried"
// for ever) and which also caps its buffer pool at 256 MiB. It answers about half a second after
// it is started (more on a busy machine), with some 110 MB resident. Besides 127.0.0.1:PORT it
// listens on [::1]:PORT.
//
// Dir is the parent of the drives d1..d4 (and of .minio, MinIO's certificate folder under
// HOME). Tests must not rely on how MinIO stores objects: each drive holds its shard of an
// object with bitrot checksums beside the metadata file xl.meta, small objects live inside
// xl.meta, and none of it is a plain copy of the object's bytes. See and alter objects through
// S3 only.
//
// # Both
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

	"github.com/aifs/aifs/internal/testenv"
)

// Fixed credentials of the test server's root account, distinctive enough that a test can look
// for the secret in messages that must not show it.
const (
	accessKey = "aifs-test-access-key"
	secretKey = "aifs-test-secret-5a17e0c9d3"
	bucket    = "aifs-test"
	region    = "us-east-1"
)

// The commands that install the servers' binaries; scripts/setup.sh pins the same versions.
const (
	InstallVersityGW = "go install github.com/versity/versitygw/cmd/versitygw@v1.8.0"
	InstallMinIO     = "go install github.com/minio/minio@" + MinIOVersion
)

// MinIOVersion is the version of github.com/minio/minio that StartMinIO is tested with.
const MinIOVersion = "v0.0.0-20260212201848-7aac2a2c5b7c"

// A program is an S3 server that s3test can run.
type program struct {
	name    string // of the binary, and in messages
	envVar  string // may hold the binary's path
	install string // the command that installs the binary
	// command returns the arguments and the environment variables (beyond PATH and HOME) that
	// run s.
	command func(s *Server) (args, env []string)
}

var (
	versitygw = program{name: "versitygw", envVar: "AIFS_VERSITYGW", install: InstallVersityGW,
		command: func(s *Server) ([]string, []string) {
			return []string{"--port", s.addr, "--quiet", "--keep-alive", "posix", s.Dir},
				[]string{"ROOT_ACCESS_KEY=" + s.AccessKey, "ROOT_SECRET_KEY=" + s.SecretKey}
		}}
	minioServer = program{name: "minio", envVar: "AIFS_MINIO", install: InstallMinIO,
		command: func(s *Server) ([]string, []string) {
			return []string{"server", "--quiet", "--address", s.addr, filepath.Join(s.Dir, "d{1...4}")},
				[]string{"MINIO_ROOT_USER=" + s.AccessKey, "MINIO_ROOT_PASSWORD=" + s.SecretKey,
					"MINIO_BROWSER=off", "MINIO_CI_CD=1"}
		}}
)

// Server is a running (or stopped) S3 server. Its fields are fixed for its lifetime, but for the
// keys, which RotateKeys changes. Its methods must be called from the test's goroutine (they may
// call t.Fatal).
type Server struct {
	Endpoint  string // "http://127.0.0.1:PORT"
	AccessKey string
	SecretKey string
	Bucket    string // created by Start, empty
	// versitygw: the posix root, where object K of Bucket is the file Dir/Bucket/K; MinIO: the
	// parent of the drives Dir/d1..Dir/d4, whose layout is MinIO's own.
	Dir string

	t    testing.TB
	prog program
	bin  string
	addr string        // 127.0.0.1:PORT
	out  lockedBuffer  // the server's output, shown when it fails to start
	cmd  *exec.Cmd     // nil while stopped
	done chan struct{} // closed when cmd has exited
}

// Start starts versitygw with an empty bucket Bucket and registers its end with t.Cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	return startServer(t, versitygw)
}

// StartMinIO starts MinIO over four drives with an empty bucket Bucket and registers its end
// with t.Cleanup.
func StartMinIO(t testing.TB) *Server {
	t.Helper()
	return startServer(t, minioServer)
}

func startServer(t testing.TB, p program) *Server {
	t.Helper()
	testenv.Need(t, "the S3 server "+p.name)
	s := &Server{AccessKey: accessKey, SecretKey: secretKey, Bucket: bucket, Dir: t.TempDir(), t: t, prog: p, bin: findBinary(t, p)}
	t.Cleanup(s.Stop)
	// The free port is found by binding and releasing it, so another process may take it
	// before the server binds it; try a few.
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

// RotateKeys restarts the server accepting only the given root keys, as a store whose keys are
// rotated: requests signed with the old ones are refused from then on.
func (s *Server) RotateKeys(accessKey, secretKey string) {
	s.t.Helper()
	s.Stop()
	s.AccessKey, s.SecretKey = accessKey, secretKey
	s.Start()
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
	args, env := s.prog.command(s)
	cmd := exec.Command(s.bin, args...)
	// A clean environment: nothing of the caller's (VGW_*, MINIO_*, AWS_*, CI) reaches the server.
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + s.Dir}, env...)
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
			return fmt.Errorf("%s on %s exited: %s", s.prog.name, s.addr, strings.TrimSpace(s.out.String()))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("%s on %s did not answer within 15 s (last error: %v): %s", s.prog.name, s.addr, err, s.out.String())
		}
	}
}

// findBinary returns the path of p's binary or fails the test saying how to install it.
func findBinary(t testing.TB, p program) string {
	if path := os.Getenv(p.envVar); path != "" {
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("s3test: %s=%s: %v; install the server with: %s", p.envVar, path, err, p.install)
		}
		return path
	}
	if path, err := exec.LookPath(p.name); err == nil {
		return path
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, dir := range filepath.SplitList(strings.TrimSpace(string(out))) {
			path := filepath.Join(dir, "bin", p.name)
			if _, err := os.Stat(path); err == nil {
				return path
			}
		}
	}
	t.Fatalf("s3test: the S3 server %s is not installed (looked in $%s, PATH and $(go env GOPATH)/bin); install it with: %s", p.name, p.envVar, p.install)
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
