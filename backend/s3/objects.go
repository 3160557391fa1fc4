package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/aifs/aifs/backend"
	"github.com/aifs/aifs/layout"
)

// Object is an object of the bucket as a listing or a HEAD request sees it: the tars that
// aifs index reads in place.
type Object struct {
	Key   string
	Size  int64
	ETag  string // quotes stripped
	MTime time.Time
}

// List returns the objects whose keys lie under the location's prefix (every object of the
// bucket for an empty prefix), sorted by key.
func (b *Backend) List(ctx context.Context) ([]Object, error) {
	if b.closed.Load() {
		return nil, fmt.Errorf("s3: list %s: %w", b.loc, fs.ErrClosed)
	}
	dir := b.loc.key("")
	var objs []Object
	err := b.do(ctx, dir, func(ctx context.Context) error {
		objs = objs[:0]
		for obj := range b.client.ListObjects(ctx, b.loc.Bucket, minio.ListObjectsOptions{Prefix: dir, Recursive: true}) {
			if obj.Err != nil {
				return obj.Err
			}
			if !strings.HasSuffix(obj.Key, "/") {
				objs = append(objs, Object{Key: obj.Key, Size: obj.Size, ETag: trimETag(obj.ETag), MTime: obj.LastModified})
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("s3: list %s: %w", b.loc, describe(err))
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].Key < objs[j].Key })
	return objs, nil
}

// Stat returns the object key of the location's bucket; a missing one fails with an error
// wrapping backend.ErrNotExist.
func (b *Backend) Stat(ctx context.Context, key string) (Object, error) {
	url := "s3://" + b.loc.Bucket + "/" + key
	var info minio.ObjectInfo
	err := b.do(ctx, key, func(ctx context.Context) (err error) {
		info, err = b.client.StatObject(ctx, b.loc.Bucket, key, minio.StatObjectOptions{})
		return err
	})
	switch {
	case notFound(err):
		return Object{}, fmt.Errorf("s3: %s: %w", url, backend.ErrNotExist)
	case err != nil:
		return Object{}, fmt.Errorf("s3: %s: %w", url, describe(err))
	}
	return Object{Key: key, Size: info.Size, ETag: trimETag(info.ETag), MTime: info.LastModified}, nil
}

// OpenObject returns the bytes of object key of the location's bucket from the first, read
// with one GET that fails if the object's ETag is no longer etag (it was replaced). The reader
// implements io.Seeker (a seek starts another GET at the new offset); the caller closes it.
func (b *Backend) OpenObject(ctx context.Context, key, etag string) (io.ReadCloser, error) {
	opts := minio.GetObjectOptions{}
	if err := opts.SetMatchETag(etag); err != nil {
		return nil, fmt.Errorf("s3: s3://%s/%s: %w", b.loc.Bucket, key, err)
	}
	obj, err := b.client.GetObject(ctx, b.loc.Bucket, key, opts)
	if err != nil {
		return nil, fmt.Errorf("s3: s3://%s/%s: %w", b.loc.Bucket, key, describe(err))
	}
	return describedObject{obj, "s3://" + b.loc.Bucket + "/" + key}, nil
}

// describedObject reports the errors of an object's reads with its URL, translated.
type describedObject struct {
	*minio.Object
	url string
}

func (o describedObject) Read(p []byte) (int, error) {
	n, err := o.Object.Read(p)
	if err != nil && err != io.EOF {
		if statusOf(err) == http.StatusPreconditionFailed {
			err = fmt.Errorf("%w (the object was replaced while it was read)", backend.ErrMismatch)
		}
		return n, fmt.Errorf("s3: read %s: %w", o.url, describe(err))
	}
	return n, err
}

// PutIndex stores index as the index object of the set at the location, whatever else lies
// under the prefix (aifs index writes only the index, beside tars or anywhere). An index
// already there is replaced only with force; one that describes packed shards never is, since
// its shards would be left orphaned.
func (b *Backend) PutIndex(ctx context.Context, index []byte, force bool) error {
	if b.closed.Load() {
		return fmt.Errorf("s3: upload to %s: %w", b.loc, fs.ErrClosed)
	}
	// Checked by name, not by reading the old index (tens of MB for a large set).
	_, err := b.Stat(ctx, b.loc.key(layout.IndexName))
	switch {
	case err == nil && !force:
		return fmt.Errorf("%s already holds a shard set; use --force to replace its index", b.loc)
	case err == nil:
		if _, err := b.Stat(ctx, b.loc.key(layout.ShardName(0))); err == nil {
			return fmt.Errorf("%s holds a packed shard set; write the index somewhere else", b.loc)
		}
	case !errors.Is(err, backend.ErrNotExist):
		return err
	}
	return b.putIndex(ctx, index)
}
