// Package s3 reads (and, through NewSink, writes) a shard set kept in an S3-compatible object
// store: the objects PREFIX/index.aifs and PREFIX/shard-NNNNNN.dat of one bucket, named by a
// Location such as s3://bucket/prefix. It is the only package of aifs that imports minio-go;
// docs/s3.md explains the design.
//
// A Backend holds one minio-go client over a tuned HTTP transport (many idle connections per
// host, since dozens of readers share one endpoint). New picks the credentials' source: the
// first that has them of the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN), the shared credentials file (~/.aws/credentials or
// $AWS_SHARED_CREDENTIALS_FILE, and ~/.aws/config) with Options.Profile, and the instance role
// (EC2/ECS metadata, or a web identity token file: AWS_WEB_IDENTITY_TOKEN_FILE and
// AWS_ROLE_ARN, as Kubernetes service accounts get), asked only when neither of the others has
// credentials; with none, requests are anonymous. Credentials are read again from that source as
// they expire, when the shared file changes, and when the server refuses them (creds.go).
// Secrets appear in no error, log line or String.
//
// Every request runs in one retry loop (minio-go's own retries are off): each attempt under its
// own Options.Timeout, retried after exponential backoff with full jitter on 5xx, throttling
// (429, SlowDown), refused credentials (after reading them again) and connection errors
// (refused, reset, EOF, timeouts), never on other 403s, 404, 412 or a done context. Throttled
// answers do not count against Retries but end within (Retries+1)×Timeout, and halve an
// adaptive limit on the requests in flight (limit.go). A read therefore fails within
// (Retries+1)×Timeout plus backoff. The one exception is the parts of a multipart upload
// (NewSink), which stream from the packer and cannot be replayed by that loop: minio-go retries
// them, Retries times.
//
// Open checks an object's size against the index and, where the index records one, its ETag;
// each Shard remembers the ETag it saw, sends it with every ranged GET (If-Match) and checks
// it in every answer, so a Shard never returns bytes of an object replaced after Open: the
// read fails with backend.ErrMismatch. SDK errors become backend sentinels here: a missing
// object wraps backend.ErrNotExist, a replaced one backend.ErrMismatch.
//
// Ownership: the caller closes the Backend and each Shard; Close of a Backend does not close
// its Shards. A Sink from NewSink owns the goroutines of its uploads and ends them in Finish
// or Abort.
package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"
	"go.uber.org/zap"

	"github.com/aifs/aifs/backend"
	"github.com/aifs/aifs/layout"
)

// Location is a shard set in a bucket: the objects Prefix+"/index.aifs" and
// Prefix+"/shard-NNNNNN.dat" (with no slash when Prefix is "").
type Location struct{ Bucket, Prefix string }

// IsURL reports whether s names a shard set in S3: it has the s3:// scheme.
func IsURL(s string) bool { return len(s) >= 5 && strings.EqualFold(s[:5], "s3://") }

// ParseURL parses "s3://bucket" or "s3://bucket/prefix" (trailing slashes trimmed). It rejects
// an empty or invalid bucket name and a prefix with empty, "." or ".." segments, NUL, or bytes
// that are not UTF-8.
func ParseURL(s string) (Location, error) {
	if !IsURL(s) {
		return Location{}, fmt.Errorf("%q is not an s3:// URL", s)
	}
	bucket, prefix, _ := strings.Cut(s[5:], "/")
	prefix = strings.TrimRight(prefix, "/")
	if bucket == "" {
		return Location{}, fmt.Errorf("%s: no bucket name (want s3://BUCKET/PREFIX)", s)
	}
	if err := s3utils.CheckValidBucketName(bucket); err != nil {
		return Location{}, fmt.Errorf("%s: invalid bucket name %q: %v", s, bucket, err)
	}
	if !utf8.ValidString(prefix) || strings.ContainsRune(prefix, 0) {
		return Location{}, fmt.Errorf("%s: the prefix is not valid UTF-8 text", s)
	}
	if prefix != "" {
		for seg := range strings.SplitSeq(prefix, "/") {
			if seg == "" || seg == "." || seg == ".." {
				return Location{}, fmt.Errorf("%s: the prefix has an empty, \".\" or \"..\" segment", s)
			}
		}
	}
	if len(prefix)+len("/"+layout.ShardName(0)) > 1024 { // S3 keys are at most 1024 bytes
		return Location{}, fmt.Errorf("%s: the prefix is too long", s)
	}
	return Location{Bucket: bucket, Prefix: prefix}, nil
}

// String returns "s3://bucket/prefix", or "s3://bucket" for an empty prefix.
func (l Location) String() string {
	if l.Prefix == "" {
		return "s3://" + l.Bucket
	}
	return "s3://" + l.Bucket + "/" + l.Prefix
}

// key returns the object key of name (index.aifs or a shard) in the set.
func (l Location) key(name string) string {
	if l.Prefix == "" {
		return name
	}
	return l.Prefix + "/" + name
}

// shardKey returns the object key of shard s: a packed shard's name under the prefix; a tar's
// path resolved against the prefix (layout.ShardPath), from the bucket's root if absolute. A
// relative path may not climb above the bucket's root.
func (l Location) shardKey(s layout.Shard) (string, error) {
	if s.Kind != layout.ShardTar {
		if !layout.ValidName([]byte(s.Name)) {
			return "", fmt.Errorf("s3: open %q: not a shard name: %w", s.Name, backend.ErrNotExist)
		}
		return l.key(s.Name), nil
	}
	key := strings.TrimPrefix(layout.ShardPath("/"+l.Prefix, s), "/")
	if key == "" || key == ".." || strings.HasPrefix(key, "../") {
		return "", fmt.Errorf("s3: tar %q lies above the root of bucket %s: %w", s.Name, l.Bucket, backend.ErrNotExist)
	}
	return key, nil
}

// Options configure a Backend. The zero value uses the defaults given on each field.
type Options struct {
	// Endpoint is the S3 server: "http://host:port" for plain HTTP, "https://host[:port]" or a
	// bare "host:port" for TLS. Default: $AWS_ENDPOINT_URL, else https://s3.amazonaws.com.
	Endpoint string
	// Region signs requests. Default: $AWS_REGION, else $AWS_DEFAULT_REGION, else us-east-1.
	Region string
	// Profile is the profile of the shared credentials file. Default: $AWS_PROFILE, else
	// "default".
	Profile string
	// Addressing is how requests name the bucket: "path" (endpoint/bucket/key), "virtual"
	// (bucket.endpoint/key) or "auto" (virtual for AWS and Google endpoints, path elsewhere).
	// Default "auto".
	Addressing string
	// PartSize splits reads: a read longer than this becomes ranged GETs of this size, run in
	// parallel. Default 8 MiB.
	PartSize int64
	// Parallel is the number of parts of one ReadAt in flight. Default 8.
	Parallel int
	// Retries is the number of retries of a failed request after its first attempt. 0 means
	// the default, 5; a negative value means none.
	Retries int
	// Timeout bounds each attempt of a request (for an upload of a large shard, each part's
	// wait for the server's answer). Default 30 s.
	Timeout time.Duration
	// Logger receives a Debug line per retry and a Warn line when a read fails after its
	// retries (at most one per shard per minute). Default: zap.NewNop().
	Logger *zap.Logger
}

const (
	defaultEndpoint = "https://s3.amazonaws.com"
	defaultRegion   = "us-east-1"
	defaultPartSize = 8 << 20
	defaultParallel = 8
	defaultRetries  = 5
	defaultTimeout  = 30 * time.Second
	// maxIndexSize bounds the index read into memory by ReadIndex.
	maxIndexSize = 4 << 30
)

// Stats are a Backend's counters since New.
type Stats struct {
	Requests int64 `json:"requests"` // HTTP requests sent: every attempt, uploads' included
	Bytes    int64 `json:"bytes"`    // body bytes received by GETs of shards and the index
	Retries  int64 `json:"retries"`  // attempts that repeated a failed one
	Errors   int64 `json:"errors"`   // requests that failed after their retries (not counting cancellations)
	// Throttled counts the answers that asked for fewer requests (503 SlowDown, 429);
	// InFlight and Limit are the requests in flight now and the adaptive bound on them
	// (limit.go: halved on throttling, grown by one at a time on success).
	Throttled int64 `json:"throttled"`
	InFlight  int   `json:"in_flight"`
	Limit     int   `json:"in_flight_limit"`
	// CredentialRefreshes counts the times the server refused the credentials and their
	// source gave new ones (creds.go), with which the request was sent again.
	CredentialRefreshes int64 `json:"credential_refreshes"`
}

// Backend reads the shard set at one Location. It implements backend.Backend and is safe for
// concurrent use.
type Backend struct {
	loc       Location
	endpoint  string // the endpoint URL, for messages: scheme://host[:port]
	client    *minio.Client
	core      minio.Core      // client's low-level API: one GET, body and headers
	upClient  *minio.Client   // client for shard uploads: minio-go retries their buffered parts
	transport *http.Transport // shared by both clients; Close drops its idle connections
	log       *zap.Logger

	partSize int64
	parallel int
	retries  int
	timeout  time.Duration

	limit *limiter                 // requests in flight, adapted to throttling
	creds *credentials.Credentials // of both clients; read again when the server refuses them

	requests, bytes, retried, errs, throttled, credRefreshes atomic.Int64
	closed                                                   atomic.Bool
}

var _ backend.Backend = (*Backend)(nil)

// New returns a Backend for the shard set at loc. Before returning it checks the bucket with one
// request (retried like any other; a second one when the bucket seems missing) and turns a
// failure into one line: "s3: bucket B does not exist at ENDPOINT", "s3: access denied to
// s3://B/P at ENDPOINT (...)", or "s3: cannot reach ENDPOINT: ...". It does not check that a
// shard set is there (ReadIndex does). ctx bounds New only.
func New(ctx context.Context, loc Location, opt Options) (*Backend, error) {
	loc, err := ParseURL(loc.String()) // checked and normalized
	if err != nil {
		return nil, fmt.Errorf("s3: %w", err)
	}
	host, secure, endpoint, err := parseEndpoint(firstOf(opt.Endpoint, os.Getenv("AWS_ENDPOINT_URL"), defaultEndpoint))
	if err != nil {
		return nil, fmt.Errorf("s3: %w", err)
	}
	lookup, err := bucketLookup(opt.Addressing)
	if err != nil {
		return nil, fmt.Errorf("s3: %w", err)
	}
	b := &Backend{limit: newLimiter(), loc: loc, endpoint: endpoint, log: opt.Logger, partSize: opt.PartSize, parallel: opt.Parallel,
		retries: opt.Retries, timeout: opt.Timeout}
	if b.log == nil {
		b.log = zap.NewNop()
	}
	if b.partSize <= 0 {
		b.partSize = defaultPartSize
	}
	if b.parallel <= 0 {
		b.parallel = defaultParallel
	}
	switch {
	case b.retries == 0:
		b.retries = defaultRetries
	case b.retries < 0:
		b.retries = 0
	}
	if b.timeout <= 0 {
		b.timeout = defaultTimeout
	}
	if b.transport, err = minio.DefaultTransport(secure); err != nil {
		return nil, fmt.Errorf("s3: %w", err)
	}
	b.transport.DialContext = (&net.Dialer{Timeout: b.timeout, KeepAlive: 30 * time.Second}).DialContext
	b.transport.MaxIdleConnsPerHost = 128 // up to 64 readers × parts hit one endpoint
	b.transport.ResponseHeaderTimeout = b.timeout
	b.transport.ExpectContinueTimeout = time.Second
	creds, source := b.credentials(ctx, opt.Profile)
	b.creds = creds
	b.log.Debug("s3 credentials", zap.String("source", source), zap.String("endpoint", endpoint))
	mopt := minio.Options{
		Creds:        creds,
		Secure:       secure,
		Transport:    counting{b.transport, &b.requests},
		Region:       firstOf(opt.Region, os.Getenv("AWS_REGION"), os.Getenv("AWS_DEFAULT_REGION"), defaultRegion),
		BucketLookup: lookup,
		MaxRetries:   1, // no retries: ours are the only ones
	}
	if b.client, err = minio.New(host, &mopt); err != nil {
		return nil, fmt.Errorf("s3: %w", err)
	}
	b.core = minio.Core{Client: b.client}
	mopt.MaxRetries = b.retries + 1
	if b.upClient, err = minio.New(host, &mopt); err != nil {
		return nil, fmt.Errorf("s3: %w", err)
	}
	if err := b.checkBucket(ctx); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// checkBucket asks whether the bucket exists (HEAD) and turns the answer into one clear line.
// A HEAD answer has no body, and some servers (versitygw) answer an unknown access key with 404
// as if the bucket were missing: a "missing" bucket is confirmed by listing it, whose error
// says which it is.
func (b *Backend) checkBucket(ctx context.Context) error {
	err := b.do(ctx, "", func(ctx context.Context) error {
		ok, err := b.client.BucketExists(ctx, b.loc.Bucket)
		if err != nil || ok {
			return err
		}
		// The first answer of a listing, and no more pages.
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		for obj := range b.client.ListObjects(ctx, b.loc.Bucket, minio.ListObjectsOptions{Prefix: b.loc.key(""), MaxKeys: 1}) {
			return obj.Err
		}
		return nil
	})
	var er minio.ErrorResponse
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("s3: check bucket %s at %s: %w", b.loc.Bucket, b.endpoint, err)
	case errors.As(err, &er):
		switch {
		case er.Code == "NoSuchBucket":
			return fmt.Errorf("s3: bucket %s does not exist at %s", b.loc.Bucket, b.endpoint)
		case er.StatusCode == http.StatusForbidden || er.Code == "InvalidAccessKeyId" || er.Code == "SignatureDoesNotMatch" ||
			er.Code == "AccessDenied" || er.Code == "XAdminUserNotFound":
			return fmt.Errorf("s3: access denied to %s at %s (check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or the profile)", b.loc, b.endpoint)
		case er.Region != "" && er.StatusCode == http.StatusMovedPermanently:
			return fmt.Errorf("s3: bucket %s is in region %s: set the region to that", b.loc.Bucket, er.Region)
		}
		return fmt.Errorf("s3: check bucket %s at %s: %w", b.loc.Bucket, b.endpoint, describe(err))
	}
	// Anything else happened below HTTP: connection, DNS, TLS, or no answer in time.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // its text repeats the request URL
	}
	return fmt.Errorf("s3: cannot reach %s: %w", b.endpoint, err)
}

// credentials returns the credentials of the first source that has some (see the package
// doc) and names that source.
func (b *Backend) credentials(ctx context.Context, profile string) (*credentials.Credentials, string) {
	if firstOf(os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_ACCESS_KEY")) != "" &&
		firstOf(os.Getenv("AWS_SECRET_ACCESS_KEY"), os.Getenv("AWS_SECRET_KEY")) != "" {
		return credentials.New(&credentials.EnvAWS{}), "environment"
	}
	// Each source is asked with its own time limit; the instance role's metadata endpoint is
	// link-local and must not go through a proxy.
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	direct := &http.Client{Timeout: b.timeout, Transport: &http.Transport{
		DialContext: (&net.Dialer{Timeout: b.timeout}).DialContext, DisableKeepAlives: true}}
	cc := &credentials.CredContext{Client: direct, Context: ctx}
	file := &sharedFile{FileAWSCredentials: credentials.FileAWSCredentials{Profile: profile}}
	if v, err := file.RetrieveWithCredContext(cc); err == nil && v.AccessKeyID != "" && v.SecretAccessKey != "" {
		return credentials.New(file), "shared credentials file"
	}
	// The instance metadata endpoint: $AWS_EC2_METADATA_SERVICE_ENDPOINT, as the AWS SDKs read
	// it, else minio-go's default (http://169.254.169.254).
	role := &credentials.IAM{Client: direct, Endpoint: os.Getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT")}
	if os.Getenv("AWS_WEB_IDENTITY_TOKEN_FILE") != "" {
		// A web identity (a Kubernetes service account's token file, read again at each
		// renewal): the endpoint is STS's, $AWS_ENDPOINT_URL_STS as the AWS SDKs read it, else
		// minio-go's regional default.
		role.Endpoint = os.Getenv("AWS_ENDPOINT_URL_STS")
	}
	if v, err := role.RetrieveWithCredContext(cc); err == nil && v.AccessKeyID != "" {
		return credentials.New(role), "instance role"
	}
	return credentials.NewStatic("", "", "", credentials.SignatureAnonymous), "none (anonymous requests)"
}

// parseEndpoint splits an endpoint into minio-go's host[:port] and TLS flag, and the URL shown
// in messages. A user name or password in the URL is refused without being repeated.
func parseEndpoint(s string) (host string, secure bool, display string, err error) {
	if !strings.Contains(s, "://") {
		s = "https://" + s
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "", false, "", fmt.Errorf("invalid endpoint: %w", err)
	case u.User != nil:
		return "", false, "", errors.New("invalid endpoint: credentials must not be part of the URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return "", false, "", fmt.Errorf("invalid endpoint %s: the scheme must be http or https", s)
	case u.Host == "" || u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "":
		return "", false, "", fmt.Errorf("invalid endpoint %s: want http://HOST:PORT or https://HOST[:PORT]", s)
	}
	return u.Host, u.Scheme == "https", u.Scheme + "://" + u.Host, nil
}

func bucketLookup(addressing string) (minio.BucketLookupType, error) {
	switch addressing {
	case "", "auto":
		return minio.BucketLookupAuto, nil
	case "path":
		return minio.BucketLookupPath, nil
	case "virtual":
		return minio.BucketLookupDNS, nil
	}
	return 0, fmt.Errorf("invalid addressing %q (want auto, path or virtual)", addressing)
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// counting is the transport of both clients: it counts every request sent.
type counting struct {
	http.RoundTripper
	n *atomic.Int64
}

func (c counting) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.RoundTripper.RoundTrip(r)
}

// String returns the location, s3://bucket/prefix.
func (b *Backend) String() string { return b.loc.String() }

// Stats returns the counters; it is cheap (atomic loads) and safe for concurrent use.
func (b *Backend) Stats() Stats {
	inFlight, limit := b.limit.state()
	return Stats{Requests: b.requests.Load(), Bytes: b.bytes.Load(), Retries: b.retried.Load(), Errors: b.errs.Load(),
		Throttled: b.throttled.Load(), InFlight: inFlight, Limit: limit, CredentialRefreshes: b.credRefreshes.Load()}
}

// Close implements backend.Backend: later calls of Open, ReadIndex and NewSink fail with
// fs.ErrClosed and idle connections are closed. Open Shards keep working. It is idempotent.
func (b *Backend) Close() error {
	if b.closed.CompareAndSwap(false, true) {
		b.transport.CloseIdleConnections()
	}
	return nil
}

// objectURL returns s3://bucket/key of name, for messages.
func (b *Backend) objectURL(name string) string {
	return "s3://" + b.loc.Bucket + "/" + b.loc.key(name)
}

// Open implements backend.Backend with one HEAD request. Besides the contract's errors, a shard
// whose ETag differs from s.Version (when the index records one) fails with ErrMismatch. The
// Shard implements backend.Versioned.
func (b *Backend) Open(ctx context.Context, s layout.Shard) (backend.Shard, error) {
	if b.closed.Load() {
		return nil, fmt.Errorf("s3: open %s: %w", s.Name, fs.ErrClosed)
	}
	key, err := b.loc.shardKey(s)
	if err != nil {
		return nil, err
	}
	sh := &shard{b: b, key: key, url: "s3://" + b.loc.Bucket + "/" + key}
	var info minio.ObjectInfo
	err = b.do(ctx, sh.key, func(ctx context.Context) (err error) {
		info, err = b.client.StatObject(ctx, b.loc.Bucket, sh.key, minio.StatObjectOptions{})
		return err
	})
	switch {
	case notFound(err):
		return nil, fmt.Errorf("s3: open %s: %w", sh.url, backend.ErrNotExist)
	case err != nil:
		return nil, fmt.Errorf("s3: open %s: %w", sh.url, describe(err))
	}
	sh.size, sh.version = info.Size, trimETag(info.ETag)
	if uint64(sh.size) != s.Size {
		return nil, fmt.Errorf("s3: %s has %d bytes, the index says %d: %w", sh.url, sh.size, s.Size, backend.ErrMismatch)
	}
	if want := trimETag(s.Version); want != "" && sh.version != want {
		return nil, fmt.Errorf("s3: %s was replaced (ETag %s, the index says %s): %w", sh.url, sh.version, want, backend.ErrMismatch)
	}
	return sh, nil
}

// ReadIndex returns the bytes of the set's index object. A missing index fails with an error
// wrapping backend.ErrNotExist ("s3://B/P is not a shard set (no index.aifs)"); an index over
// 4 GiB is refused. A small index costs one GET; a larger one is read in parallel parts like a
// shard, each checked against the ETag of the first.
func (b *Backend) ReadIndex(ctx context.Context) ([]byte, error) {
	if b.closed.Load() {
		return nil, fmt.Errorf("s3: read index of %s: %w", b.loc, fs.ErrClosed)
	}
	ix := &shard{b: b, key: b.loc.key(layout.IndexName), url: b.objectURL(layout.IndexName)}
	var buf []byte
	err := b.do(ctx, ix.key, func(ctx context.Context) error {
		opts := minio.GetObjectOptions{}
		opts.SetRange(0, b.partSize-1)
		body, info, h, err := b.core.GetObject(ctx, b.loc.Bucket, ix.key, opts)
		if statusOf(err) == http.StatusRequestedRangeNotSatisfiable {
			buf = []byte{} // an empty object has no range 0-…
			return nil
		}
		if err != nil {
			return err
		}
		defer body.Close()
		total := info.Size
		if _, after, ok := strings.Cut(h.Get("Content-Range"), "/"); ok {
			fmt.Sscan(after, &total)
		}
		if total > maxIndexSize {
			return permanent{fmt.Errorf("the index is %d bytes, more than the %d this aifs reads", total, int64(maxIndexSize))}
		}
		if info.Size != min(total, b.partSize) {
			return permanent{fmt.Errorf("the server sent %d bytes for the first %d of the index", info.Size, min(total, b.partSize))}
		}
		buf = make([]byte, total)
		n, err := io.ReadFull(body, buf[:info.Size])
		b.bytes.Add(int64(n))
		ix.size, ix.version = total, trimETag(info.ETag)
		return err
	})
	if err == nil && ix.size > b.partSize {
		err = ix.read(ctx, buf[b.partSize:], b.partSize)
	}
	switch {
	case notFound(err):
		return nil, &quiet{fmt.Sprintf("%s is not a shard set (no %s)", b.loc, layout.IndexName), backend.ErrNotExist}
	case err != nil:
		return nil, fmt.Errorf("s3: read %s: %w", ix.url, describe(err))
	}
	return buf, nil
}

// quiet is an error that wraps err without repeating its text.
type quiet struct {
	msg string
	err error
}

func (e *quiet) Error() string { return e.msg }
func (e *quiet) Unwrap() error { return e.err }

// trimETag strips the quotes S3 puts around ETags.
func trimETag(etag string) string { return strings.Trim(etag, `"`) }
