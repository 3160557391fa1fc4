package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"go.uber.org/zap"

	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/layout/pack"
)

// Uploads: a shard of up to uploadPartSize bytes is collected in memory and sent with one PUT
// (retried by our loop); a larger one streams into a multipart upload of uploadPartSize parts,
// uploadThreads of them in flight, each buffered part retried by minio-go (a stream cannot be
// replayed by our loop). At most maxUploads shards upload at once, so a pack holds at most
// maxUploads × uploadThreads × uploadPartSize = 128 MiB of upload buffers.
const (
	uploadPartSize = 16 << 20
	uploadThreads  = 4
	maxUploads     = 2
	contentType    = "application/octet-stream"
)

// NewSink returns a pack.Sink that uploads a new shard set to the Backend's location, for
// pack.PackTo. It first lists the location's own objects (direct children of Prefix+"/";
// deeper prefixes are other sets and are ignored) and refuses a location holding anything but
// index.aifs and shard objects, force or not. Without force it also refuses one holding a
// shard set or leftovers of an interrupted pack. With force it deletes the old index.aifs at
// once, before any upload: unlike a local pack, which renames into place at the end, the old
// set is invalid from the moment NewSink returns (an object store has no atomic rename of many
// objects). Commit deletes the old shards that the new set does not overwrite.
//
// The Sink's calls must not overlap (PackTo makes them one at a time). CreateShard waits while
// maxUploads shards are uploading; the writer it returns streams into the upload, and its
// Close returns without waiting for the upload to end (Finish waits). Abort cancels the
// uploads in flight, aborts their multipart uploads and deletes the shard objects this Sink
// created; the Sink deletes nothing else but the old set under force.
func (b *Backend) NewSink(ctx context.Context, force bool) (pack.Sink, error) {
	if b.closed.Load() {
		return nil, fmt.Errorf("s3: upload to %s: %w", b.loc, fs.ErrClosed)
	}
	dir := b.loc.key("")
	var names []string
	err := b.do(ctx, dir, func(ctx context.Context) error {
		names = names[:0]
		for obj := range b.client.ListObjects(ctx, b.loc.Bucket, minio.ListObjectsOptions{Prefix: dir}) {
			if obj.Err != nil {
				return obj.Err
			}
			if name := strings.TrimPrefix(obj.Key, dir); name != "" && !strings.HasSuffix(name, "/") {
				names = append(names, name)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("s3: list %s: %w", b.loc, describe(err))
	}
	k := &sink{b: b, slots: make(chan struct{}, maxUploads)}
	k.ctx, k.cancel = context.WithCancel(context.WithoutCancel(ctx))
	hasIndex := false
	for _, name := range names {
		switch {
		case name == layout.IndexName:
			hasIndex = true
		case isShardName(name):
			k.old = append(k.old, name)
		default:
			return nil, fmt.Errorf("%s is not empty (it holds %s, which is not part of a shard set)", b.loc, name)
		}
	}
	switch {
	case !force && hasIndex:
		return nil, fmt.Errorf("%s already holds a shard set; use --force to replace it", b.loc)
	case !force && len(k.old) > 0:
		return nil, fmt.Errorf("%s holds leftovers of an interrupted pack; use --force to replace them", b.loc)
	case hasIndex:
		if err := b.remove(ctx, layout.IndexName); err != nil {
			return nil, fmt.Errorf("s3: remove the index of the shard set being replaced: %w", err)
		}
	}
	return k, nil
}

// isShardName reports whether name has the form layout.ShardName gives.
func isShardName(name string) bool {
	var n int
	_, err := fmt.Sscanf(name, "shard-%06d.dat", &n)
	return err == nil && n >= 0 && layout.ShardName(n) == name
}

// remove deletes the object name of the set; a missing object is no error.
func (b *Backend) remove(ctx context.Context, name string) error {
	key := b.loc.key(name)
	err := b.do(ctx, key, func(ctx context.Context) error {
		return b.client.RemoveObject(ctx, b.loc.Bucket, key, minio.RemoveObjectOptions{})
	})
	if err != nil && !notFound(err) {
		return fmt.Errorf("s3: remove %s: %w", b.objectURL(name), describe(err))
	}
	return nil
}

// sink implements pack.Sink for NewSink.
type sink struct {
	b      *Backend
	old    []string      // shards of the set (or leftovers) found by NewSink, deleted by Commit
	slots  chan struct{} // a token per upload in flight
	ctx    context.Context
	cancel context.CancelFunc // cancels ctx, under which the uploads run: Abort

	mu        sync.Mutex // guards the fields below and each upload's etag and err
	uploads   []*upload  // in creation order
	err       error      // the first upload failure
	committed bool       // the index is stored: Abort does nothing
	aborted   bool
}

// upload is one shard being uploaded by its goroutine (sink.run).
type upload struct {
	name, key string
	size      int64
	pr        *io.PipeReader // the data, from the shardWriter
	done      chan struct{}  // closed when the upload has ended
	etag      string         // unquoted; set on success
	err       error
}

func (k *sink) CreateShard(ctx context.Context, name string, size int64) (io.WriteCloser, error) {
	if !isShardName(name) || size < 0 {
		return nil, fmt.Errorf("s3: %q of %d bytes is not a shard", name, size)
	}
	select {
	case k.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.usable(); err != nil {
		<-k.slots
		return nil, err
	}
	pr, pw := io.Pipe()
	u := &upload{name: name, key: k.b.loc.key(name), size: size, pr: pr, done: make(chan struct{})}
	k.uploads = append(k.uploads, u)
	// The upload outlives this call (Finish waits for it), so it runs under the sink's
	// context; ctx ends only the writing, failing the upload if the shard is not closed yet.
	url := k.b.objectURL(name)
	stop := context.AfterFunc(ctx, func() { pr.CloseWithError(context.Cause(ctx)) })
	go k.run(k.ctx, u)
	return &shardWriter{pw: pw, stop: stop, url: url, size: size}, nil
}

// usable fails if the sink can take no more work: aborted, committed, or an upload failed
// (which fails the pack early). k.mu is held.
func (k *sink) usable() error {
	switch {
	case k.aborted:
		return fmt.Errorf("s3: %w", errAborted)
	case k.committed:
		return errors.New("s3: the shard set is already committed")
	}
	return k.err
}

// run uploads u, records the outcome and frees u's slot.
func (k *sink) run(ctx context.Context, u *upload) {
	etag, err := k.put(ctx, u, u.pr)
	if err != nil {
		err = fmt.Errorf("s3: upload %s: %w", k.b.objectURL(u.name), describe(err))
		u.pr.CloseWithError(err) // the writer's next Write fails with it
	} else {
		u.pr.CloseWithError(fmt.Errorf("s3: %s: write after the upload ended", k.b.objectURL(u.name)))
	}
	k.mu.Lock()
	u.etag, u.err = etag, err
	if err != nil && k.err == nil {
		k.err = err
	}
	k.mu.Unlock()
	<-k.slots
	close(u.done)
}

// put sends the u.size bytes read from r and returns the object's ETag.
func (k *sink) put(ctx context.Context, u *upload, r io.Reader) (string, error) {
	b := k.b
	var info minio.UploadInfo
	var err error
	if u.size <= uploadPartSize {
		buf := make([]byte, u.size)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		// versitygw misreads an empty aws-chunked body (the streaming signature minio-go uses
		// over plain HTTP); an empty body has nothing to sign.
		opts := minio.PutObjectOptions{ContentType: contentType, DisableContentSha256: u.size == 0}
		err = b.do(ctx, u.key, func(ctx context.Context) (err error) {
			info, err = b.client.PutObject(ctx, b.loc.Bucket, u.key, bytes.NewReader(buf), u.size, opts)
			return err
		})
	} else {
		info, err = b.upClient.PutObject(ctx, b.loc.Bucket, u.key, r, u.size, minio.PutObjectOptions{
			ContentType: contentType, PartSize: uploadPartSize, NumThreads: uploadThreads, ConcurrentStreamParts: true})
	}
	if err == nil && info.Size != u.size {
		err = fmt.Errorf("the server stored %d bytes, not %d", info.Size, u.size)
	}
	return trimETag(info.ETag), err
}

func (k *sink) Finish(ctx context.Context) ([]string, error) {
	k.mu.Lock()
	uploads := slices.Clone(k.uploads)
	k.mu.Unlock()
	for _, u := range uploads {
		select {
		case <-u.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("s3: waiting for the uploads: %w", ctx.Err())
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err != nil {
		return nil, k.err
	}
	versions := make([]string, len(uploads))
	for i, u := range uploads {
		versions[i] = u.etag
	}
	return versions, nil
}

// Commit stores the index, then deletes the shards of a replaced set that the new one did not
// overwrite. If only that deletion fails, the new set is valid and Commit says so.
func (k *sink) Commit(ctx context.Context, index []byte) error {
	k.mu.Lock()
	err := k.usable()
	created := map[string]bool{}
	for _, u := range k.uploads {
		select {
		case <-u.done:
		default:
			if err == nil {
				err = fmt.Errorf("s3: commit before the upload of %s ended", u.name)
			}
		}
		created[u.name] = true
	}
	k.mu.Unlock()
	if err != nil {
		return err
	}
	b := k.b
	if err := b.putIndex(ctx, index); err != nil {
		return err
	}
	k.mu.Lock()
	k.committed = true
	k.mu.Unlock()
	k.cancel() // the uploads are over
	for _, name := range k.old {
		if created[name] {
			continue
		}
		if err := b.remove(ctx, name); err != nil {
			return fmt.Errorf("the new shard set at %s is complete, but removing a shard of the set it replaced failed: %w", b.loc, err)
		}
	}
	return nil
}

// putIndex uploads index as the set's index object, replacing any.
func (b *Backend) putIndex(ctx context.Context, index []byte) error {
	key := b.loc.key(layout.IndexName)
	// Allow at least 1 MiB/s for a large index on top of the usual time limit.
	timeout := b.timeout + time.Duration(len(index)>>20)*time.Second
	err := b.doFor(ctx, key, timeout, func(ctx context.Context) error {
		_, err := b.client.PutObject(ctx, b.loc.Bucket, key, bytes.NewReader(index), int64(len(index)), minio.PutObjectOptions{
			ContentType: contentType, PartSize: uploadPartSize, NumThreads: uploadThreads})
		return err
	})
	if err != nil {
		return fmt.Errorf("s3: upload %s: %w", b.objectURL(layout.IndexName), describe(err))
	}
	return nil
}

// Abort cancels the uploads, waits for them to end and deletes every shard object this sink
// created. Failures are logged (Warn): Abort runs after another error, which is the one to
// report.
func (k *sink) Abort() {
	k.mu.Lock()
	if k.committed || k.aborted {
		k.mu.Unlock()
		return
	}
	k.aborted = true
	uploads := slices.Clone(k.uploads)
	k.mu.Unlock()
	k.cancel() // ends the requests in flight
	for _, u := range uploads {
		u.pr.CloseWithError(errAborted) // and waits for a writer's next bytes
	}
	for _, u := range uploads {
		<-u.done
	}
	b := k.b
	ctx := context.Background()
	for _, u := range uploads {
		if u.err != nil && u.size > uploadPartSize {
			// minio-go aborts the multipart upload it started; this also catches one whose
			// creation was cut short before minio-go learned its id.
			rctx, cancel := context.WithTimeout(ctx, b.timeout)
			if err := b.upClient.RemoveIncompleteUpload(rctx, b.loc.Bucket, u.key); err != nil && !notFound(err) {
				b.log.Warn("s3: abort the multipart upload", zap.String("object", b.objectURL(u.name)), zap.Error(describe(err)))
			}
			cancel()
		}
		if err := b.remove(ctx, u.name); err != nil {
			b.log.Warn("s3: remove a shard of an aborted pack", zap.Error(err))
		}
	}
}

// errAborted ends the uploads of an aborted Sink.
var errAborted = errors.New("the upload was aborted")

// shardWriter is the writer of one upload: a pipe into sink.run, checked against the size
// declared to CreateShard. Its calls must not overlap.
type shardWriter struct {
	pw     *io.PipeWriter
	stop   func() bool // stops the watch on CreateShard's context
	url    string
	size   int64
	n      int64 // bytes written
	closed bool
}

func (w *shardWriter) Write(p []byte) (int, error) {
	if w.closed {
		return 0, fmt.Errorf("s3: %s: write after close: %w", w.url, fs.ErrClosed)
	}
	if int64(len(p)) > w.size-w.n {
		return 0, fmt.Errorf("s3: %s: more than the %d bytes declared", w.url, w.size)
	}
	n, err := w.pw.Write(p)
	w.n += int64(n)
	return n, err
}

// Close ends the shard's data; a shard closed short fails its upload (and the pack) rather than
// storing a short object. It does not wait for the upload.
func (w *shardWriter) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	w.stop()
	if w.n < w.size {
		err := fmt.Errorf("closed after %d of its %d bytes", w.n, w.size)
		w.pw.CloseWithError(err) // the upload fails with it
		return fmt.Errorf("s3: %s: %w", w.url, err)
	}
	return w.pw.Close()
}
