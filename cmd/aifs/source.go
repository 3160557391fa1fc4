package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/aifs/aifs/backend"
	"github.com/aifs/aifs/backend/local"
	"github.com/aifs/aifs/backend/s3"
	"github.com/aifs/aifs/layout"
)

// s3Config holds the object-store settings that every command taking a shard set accepts, as
// flags (--s3-endpoint) and, for mount, as -o options (s3_endpoint=) for fstab.
type s3Config struct {
	endpoint, region, addressing string
	timeout                      time.Duration
	retries                      int
}

const s3Help = `
A shard set in an object store is named s3://BUCKET/PREFIX (objects PREFIX/index.aifs and
PREFIX/shard-NNNNNN.dat). Credentials come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
AWS_SESSION_TOKEN, else from ~/.aws/credentials (profile AWS_PROFILE, default "default"), else
from the instance role. The endpoint defaults to AWS_ENDPOINT_URL, else AWS S3; the region to
AWS_REGION or AWS_DEFAULT_REGION, else us-east-1. TLS is used unless the endpoint says http://.`

func (c *s3Config) register(flags *flag.FlagSet) {
	flags.StringVar(&c.endpoint, "s3-endpoint", "", "S3 endpoint URL, e.g. https://minio.example:9000 or http://127.0.0.1:7070 (default: $AWS_ENDPOINT_URL, else AWS)")
	flags.StringVar(&c.region, "s3-region", "", "S3 region (default: $AWS_REGION, $AWS_DEFAULT_REGION, else us-east-1)")
	flags.StringVar(&c.addressing, "s3-addressing", "auto", "bucket addressing: path (endpoint/bucket/key), virtual (bucket.endpoint/key) or auto")
	flags.DurationVar(&c.timeout, "s3-timeout", 30*time.Second, "time limit of one S3 request attempt")
	flags.IntVar(&c.retries, "s3-retries", 5, "retries of a failed S3 request (5xx, throttling, connection errors), with exponential backoff and jitter; after them a read fails with EIO")
}

// set applies an -o option of the s3 settings; it reports whether key was one.
func (c *s3Config) set(key, val string) (bool, error) {
	switch key {
	case "s3_endpoint":
		c.endpoint = val
	case "s3_region":
		c.region = val
	case "s3_addressing":
		c.addressing = val
	case "s3_timeout":
		d, err := time.ParseDuration(val)
		if err != nil || d <= 0 {
			return true, fmt.Errorf("invalid s3_timeout=%q (want a duration such as 30s)", val)
		}
		c.timeout = d
	case "s3_retries":
		n, err := strconv.Atoi(val)
		if err != nil || n < 0 {
			return true, fmt.Errorf("invalid s3_retries=%q (want a number ≥ 0)", val)
		}
		c.retries = n
	default:
		return false, nil
	}
	return true, nil
}

// check refuses the values s3.Options would take for its defaults (addressing is s3.New's to
// check).
func (c *s3Config) check() error {
	if c.timeout <= 0 {
		return fmt.Errorf("the S3 timeout must be positive")
	}
	if c.retries < 0 {
		return fmt.Errorf("the S3 retries must be 0 or more")
	}
	return nil
}

func (c *s3Config) options(log *zap.Logger) s3.Options {
	retries := c.retries
	if retries == 0 {
		retries = -1 // s3.Options: 0 means the default, negative none
	}
	return s3.Options{Endpoint: c.endpoint, Region: c.region, Addressing: c.addressing, Timeout: c.timeout, Retries: retries, Logger: log}
}

// source is a shard set opened for reading: its index and the backend holding its shards.
type source struct {
	name       string // the directory's absolute path or the s3:// URL, for messages and stats
	x          *layout.Index
	be         backend.Backend // closed by the caller
	s3         *s3.Backend     // be, when the set is in an object store
	indexBytes int64
}

// openSource loads and checks the index of the shard set src (a directory or an s3:// URL) and
// opens its backend. Shards are opened later, by their users.
func openSource(ctx context.Context, src string, s3c *s3Config, log *zap.Logger) (*source, error) {
	if !s3.IsURL(src) {
		dir, err := filepath.Abs(src)
		if err != nil {
			return nil, err
		}
		x, err := layout.Load(dir)
		if err != nil {
			return nil, err
		}
		var size int64
		if fi, err := os.Stat(filepath.Join(dir, layout.IndexName)); err == nil {
			size = fi.Size()
		}
		be, err := local.New(dir, local.Options{Logger: func(msg string) { log.Warn(msg) }})
		if err != nil {
			return nil, err
		}
		return &source{name: dir, x: x, be: be, indexBytes: size}, nil
	}
	be, err := openS3(ctx, src, s3c, log)
	if err != nil {
		return nil, err
	}
	buf, err := be.ReadIndex(ctx)
	if err != nil {
		be.Close()
		return nil, err
	}
	x, err := layout.Parse(buf)
	if err != nil {
		be.Close()
		return nil, fmt.Errorf("%s/%s: %w", be, layout.IndexName, err)
	}
	return &source{name: be.String(), x: x, be: be, s3: be, indexBytes: int64(len(buf))}, nil
}

// openS3 connects to the bucket of the s3:// URL src, checking that it exists and that the
// credentials are accepted.
func openS3(ctx context.Context, src string, s3c *s3Config, log *zap.Logger) (*s3.Backend, error) {
	loc, err := s3.ParseURL(src)
	if err != nil {
		return nil, err
	}
	if err := s3c.check(); err != nil {
		return nil, err
	}
	return s3.New(ctx, loc, s3c.options(log.Named("s3")))
}

// backendShards adapts a backend to layout.Verify: shards read through the backend, a missing
// one reported as missing.
func backendShards(be backend.Backend) func(ctx context.Context, s layout.Shard) (layout.ShardFile, error) {
	return func(ctx context.Context, s layout.Shard) (layout.ShardFile, error) {
		sh, err := be.Open(ctx, s)
		if errors.Is(err, backend.ErrNotExist) {
			return nil, fmt.Errorf("%w: %w", err, os.ErrNotExist)
		}
		if err != nil {
			return nil, err
		}
		return shardFile{ctx: ctx, Shard: sh}, nil
	}
}

// shardFile is a backend.Shard as an io.ReaderAt (backend reads have no short reads).
type shardFile struct {
	ctx context.Context
	backend.Shard
}

func (f shardFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.Shard.ReadAt(f.ctx, p, off); err != nil {
		return 0, err
	}
	return len(p), nil
}
