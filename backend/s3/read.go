package s3

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	"go.uber.org/zap"

	"github.com/aifs/aifs/backend"
)

// shard implements backend.Shard and backend.Versioned for one object. Its fields are fixed at
// Open, so reads share it without locks.
type shard struct {
	b       *Backend
	key     string // object key
	url     string // s3://bucket/key, for messages
	size    int64
	version string // the ETag seen at Open, unquoted; "" if the server sent none

	closed atomic.Bool
}

func (s *shard) Size() int64 { return s.size }

// Version implements backend.Versioned: the object's ETag at Open, without quotes.
func (s *shard) Version() string { return s.version }

// Close implements backend.Shard. Reads in flight finish; they only ever write the caller's
// buffer. It is idempotent.
func (s *shard) Close() error {
	s.closed.Store(true)
	return nil
}

// ReadAt implements backend.Shard with ranged GETs: one for up to PartSize bytes, else parts
// of PartSize read in parallel. Every answer must carry the ETag of Open and exactly the bytes
// asked for; otherwise the read fails (ErrMismatch for another ETag).
func (s *shard) ReadAt(ctx context.Context, p []byte, off int64) error {
	var err error
	switch {
	case s.closed.Load():
		err = fs.ErrClosed
	case off < 0 || off > s.size || int64(len(p)) > s.size-off:
		err = backend.ErrOutOfRange
	case ctx.Err() != nil:
		err = ctx.Err()
	case len(p) > 0:
		// A failure is not logged here: the error names the object and range, and the FUSE
		// edge logs it once per sample (fs/errno.go); the stats count it (errors).
		if err = s.read(ctx, p, off); err != nil {
			err = describe(err)
		}
	}
	if err != nil {
		return fmt.Errorf("s3: read %s [%d,+%d): %w", s.url, off, len(p), err)
	}
	return nil
}

// read fills p from [off, off+len(p)), splitting it into parts of PartSize read by up to
// Parallel goroutines. The first part to fail cancels the others and its error is returned.
func (s *shard) read(ctx context.Context, p []byte, off int64) error {
	ps := s.b.partSize
	if int64(len(p)) <= ps {
		return s.get(ctx, p, off)
	}
	parts := (int64(len(p)) + ps - 1) / ps
	ctx, cancel := context.WithCancel(ctx) // cancelled by the first failure
	defer cancel()
	var (
		next  atomic.Int64 // the next part to read
		once  sync.Once
		first error
	)
	// Each worker takes the next part until none is left or one has failed; this goroutine
	// is one of them.
	work := func() {
		for {
			i := next.Add(1) - 1
			if i >= parts {
				return
			}
			lo := i * ps
			hi := min(lo+ps, int64(len(p)))
			if err := s.get(ctx, p[lo:hi], off+lo); err != nil {
				once.Do(func() { first = err; cancel() })
				return
			}
		}
	}
	var wg sync.WaitGroup
	for range min(parts, int64(s.b.parallel)) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
	return first
}

// get reads [off, off+len(p)) with one ranged GET per attempt.
func (s *shard) get(ctx context.Context, p []byte, off int64) error {
	return s.b.do(ctx, s.key, func(ctx context.Context) error {
		opts := minio.GetObjectOptions{}
		opts.SetRange(off, off+int64(len(p))-1)
		if s.version != "" {
			opts.SetMatchETag(s.version) // a replaced object sends 412, not its bytes
		}
		body, info, _, err := s.b.core.GetObject(ctx, s.b.loc.Bucket, s.key, opts)
		if err != nil {
			if statusOf(err) == http.StatusPreconditionFailed {
				return permanent{fmt.Errorf("the object was replaced after it was opened (its ETag is no longer %s): %w", s.version, backend.ErrMismatch)}
			}
			return err
		}
		defer body.Close()
		// Servers that ignore If-Match (or serve another version) are caught here.
		if v := trimETag(info.ETag); s.version != "" && v != s.version {
			return permanent{fmt.Errorf("the object was replaced after it was opened (ETag %s, opened with %s): %w", v, s.version, backend.ErrMismatch)}
		}
		if info.Size != int64(len(p)) { // Content-Length: a server that ignored the range
			return permanent{fmt.Errorf("the server answered a %d-byte range with %d bytes", len(p), info.Size)}
		}
		n, err := io.ReadFull(body, p)
		s.b.bytes.Add(int64(n))
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // a short body: retried
		}
		return err
	})
}

// Retry timing: the n-th retry waits a random time in [0, min(backoffCap, backoffBase×2ⁿ)).
const (
	backoffBase = 50 * time.Millisecond
	backoffCap  = 2 * time.Second
)

// errTimedOut: an attempt got no complete answer within Options.Timeout. It is not a context
// error, so that callers do not take it for their own cancellation.
var errTimedOut = errors.New("no answer in time")

// permanent marks an error that retrying cannot fix.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// do runs op until it succeeds, fails with an error that retrying cannot fix, or has used the
// Backend's retry budget. Each attempt takes a slot of the Backend's limiter (limit.go) and gets
// its own context with the Backend's Timeout. key names the object in Debug lines. The error
// returned is op's last one (or ctx's, once ctx is done), not yet translated by describe.
//
// The retry budget: Retries retries of failures, and throttled answers (throttled) retried
// without counting against them for as long as (Retries+1)×Timeout from the first attempt, the
// longest a request may take anyway; a throttling storm therefore slows reads down, and fails
// them (EIO) only past that time.
func (b *Backend) do(ctx context.Context, key string, op func(ctx context.Context) error) error {
	return b.doFor(ctx, key, b.timeout, op)
}

// doFor is do with another time limit per attempt.
func (b *Backend) doFor(ctx context.Context, key string, timeout time.Duration, op func(ctx context.Context) error) error {
	begin, failures := time.Now(), 0
	for attempt := 0; ; attempt++ {
		if err := b.limit.acquire(ctx); err != nil {
			return err
		}
		actx, cancel := context.WithTimeout(ctx, timeout)
		err := op(actx)
		cancel()
		slow := err != nil && throttled(err)
		b.limit.release(slow)
		if err == nil {
			return nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr // the caller's cancellation, not a failure of the storage
		}
		// Only the attempt's own deadline is left to have ended it.
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			err = fmt.Errorf("%w (%v)", errTimedOut, timeout)
		}
		refused := authError(err)
		switch {
		case slow:
			b.throttled.Add(1)
		case refused && b.refreshCreds():
			// new credentials from their source: worth a try that counts against nothing
		default:
			failures++
		}
		budget := time.Duration(b.retries+1) * timeout
		if failures > b.retries || slow && time.Since(begin) >= budget || !refused && !retryable(err) {
			b.errs.Add(1)
			return err
		}
		b.retried.Add(1)
		wait := time.Duration(rand.Int64N(int64(min(backoffCap, backoffBase<<min(attempt, 16))))) + 1
		if ce := b.log.Check(zap.DebugLevel, "s3 request failed; retrying"); ce != nil {
			ce.Write(zap.String("key", key), zap.Int("attempt", attempt+1), zap.Bool("throttled", slow), zap.Duration("backoff", wait), zap.Error(err))
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// authError reports whether err is the server refusing the request's credentials as unknown,
// wrong or expired: the credentials may have changed at their source (rotated keys, a renewed
// token) since they were read. Such a request is sent again after refreshCreds, counting against
// the retries unless the credentials changed: a key rotated on the server a moment before its
// clients' files heals within the retries.
func authError(err error) bool {
	var er minio.ErrorResponse
	if !errors.As(err, &er) {
		return false
	}
	switch er.Code {
	case "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken", "TokenRefreshRequired",
		"XAdminUserNotFound": // versitygw's answer (a 404) to an unknown access key
		return true
	}
	return false
}

// throttled reports whether err is the server asking for fewer requests: 503 SlowDown and its
// kin, 429. The limiter halves on it, and it does not count against the retries.
func throttled(err error) bool {
	var er minio.ErrorResponse
	if !errors.As(err, &er) {
		return false
	}
	switch er.Code {
	case "SlowDown", "SlowDownRead", "SlowDownWrite", "Throttling", "ThrottlingException", "RequestLimitExceeded", "RequestThrottled":
		return true
	}
	return er.StatusCode == http.StatusServiceUnavailable || er.StatusCode == http.StatusTooManyRequests
}

// retryable reports whether err may go away on its own: 5xx answers, throttling, an attempt's
// time limit, a request that failed below HTTP (connection refused, reset or closed) unless TLS
// or DNS says it cannot succeed, and a body cut short.
func retryable(err error) bool {
	if errors.As(err, &permanent{}) {
		return false
	}
	var er minio.ErrorResponse
	if errors.As(err, &er) {
		switch er.Code {
		case "SlowDown", "SlowDownRead", "SlowDownWrite", "Throttling", "ThrottlingException", "RequestTimeout",
			"RequestLimitExceeded", "RequestThrottled", "InternalError", "ServiceUnavailable":
			return true
		}
		return er.StatusCode >= 500 || er.StatusCode == http.StatusTooManyRequests || er.StatusCode == http.StatusRequestTimeout
	}
	var (
		ue   *url.Error
		dns  *net.DNSError
		cert *tls.CertificateVerificationError
		rec  tls.RecordHeaderError
		ne   net.Error
	)
	switch {
	case errors.As(err, &dns):
		return dns.IsTimeout || dns.IsTemporary
	case errors.As(err, &cert) || errors.As(err, &rec) || errors.As(err, &x509.UnknownAuthorityError{}) ||
		errors.As(err, &x509.HostnameError{}) || errors.As(err, &x509.CertificateInvalidError{}):
		return false
	case errors.As(err, &ue):
		// minio-go turns EOF into "Connection closed by foreign host"; Go reports a TLS
		// client talking to a plain HTTP server in words too.
		return !strings.Contains(ue.Err.Error(), "server gave HTTP response to HTTPS client")
	}
	return errors.Is(err, errTimedOut) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.As(err, &ne) && ne.Timeout()
}

// statusOf returns the HTTP status of the server's answer that err reports, or 0.
func statusOf(err error) int {
	var er minio.ErrorResponse
	if errors.As(err, &er) {
		return er.StatusCode
	}
	return 0
}

// notFound reports whether err is the server saying that the object (or bucket) is missing.
func notFound(err error) bool { return statusOf(err) == http.StatusNotFound }

// describe translates an error from minio-go into one of this package, at its boundary: an
// answer of the server becomes "STATUS CODE: message" (so that no SDK type leaks out), wrapping
// backend.ErrNotExist for a 404 and backend.ErrMismatch for a 412. A failure below HTTP
// (connection refused or reset, no answer in time) keeps its text and wraps only
// backend.ErrUnavailable, so that no network errno reaches a reader. The caller's
// cancellation and this package's permanent errors are returned as they are.
func describe(err error) error {
	var er minio.ErrorResponse
	if !errors.As(err, &er) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &permanent{}) {
			return err
		}
		msg := err.Error()
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			msg = ue.Err.Error() // its text repeats the request's URL
		}
		return fmt.Errorf("%s: %w", msg, backend.ErrUnavailable)
	}
	msg := fmt.Sprintf("%d %s", er.StatusCode, er.Code)
	if er.Message != "" {
		msg += ": " + er.Message
	}
	switch er.StatusCode {
	case http.StatusNotFound:
		return fmt.Errorf("%s: %w", msg, backend.ErrNotExist)
	case http.StatusPreconditionFailed:
		return fmt.Errorf("%s: %w", msg, backend.ErrMismatch)
	}
	return errors.New(msg)
}
