package pack

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/aifs/aifs/layout"
)

// Sink is where PackTo writes a shard set: a directory (Pack), or an object store (backend/s3).
// PackTo calls CreateShard for each shard in order, one at a time, writing exactly the planned
// size before closing it; then Finish, then Commit with the index. The shard set must not be
// valid (no index at the destination) before Commit; Commit makes it valid in one step.
type Sink interface {
	// CreateShard starts shard name, which will receive exactly size bytes in order. Close
	// ends it: the bytes are complete, though a sink that uploads may still be sending them
	// (Finish waits). An error from Write or Close fails the pack.
	CreateShard(ctx context.Context, name string, size int64) (io.WriteCloser, error)
	// Finish waits until every shard created is durable and returns each one's Version (an
	// S3 ETag; "" where the storage has none), in creation order.
	Finish(ctx context.Context) ([]string, error)
	// Commit stores index, making the new shard set valid, and removes what remains of a set
	// it replaces. It is called once, after Finish.
	Commit(ctx context.Context, index []byte) error
	// Abort removes what the sink wrote. It is idempotent, and does nothing after a
	// successful Commit.
	Abort()
}

// dirSink writes a shard set into a local directory: shards and index under temporary names,
// synced, then renamed into place with the index last, so a previous set (with Force) stays
// valid until the new data is complete.
type dirSink struct {
	dst       *dest
	mu        sync.Mutex // guards temps and shards
	temps     []string   // temporary files created, removed by Abort
	shards    []string   // names of the shards created, in order
	committed bool
}

func (d *dirSink) CreateShard(ctx context.Context, name string, size int64) (io.WriteCloser, error) {
	f, err := d.createTemp(name)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.shards = append(d.shards, name)
	d.mu.Unlock()
	return syncCloser{f}, nil
}

// syncCloser syncs the file before closing it: a shard is durable once closed.
type syncCloser struct{ *os.File }

func (f syncCloser) Close() error {
	err := f.Sync()
	if cerr := f.File.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", f.Name(), err)
	}
	return nil
}

func (d *dirSink) Finish(context.Context) ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return make([]string, len(d.shards)), nil
}

func (d *dirSink) createTemp(name string) (*os.File, error) {
	path := filepath.Join(d.dst.path, tmpPrefix+name)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	d.mu.Lock()
	d.temps = append(d.temps, path)
	d.mu.Unlock()
	return f, nil
}

// Commit makes the new shard set live: write the index under a temporary name, invalidate any
// previous set by removing its index, rename the shards into place, then rename the index.
func (d *dirSink) Commit(_ context.Context, index []byte) error {
	f, err := d.createTemp(layout.IndexName)
	if err != nil {
		return err
	}
	if err := writeSynced(f, index); err != nil {
		return err
	}
	if err := d.dst.removeOld(); err != nil {
		return err
	}
	for _, name := range append(d.shards, layout.IndexName) {
		from, to := filepath.Join(d.dst.path, tmpPrefix+name), filepath.Join(d.dst.path, name)
		if err := os.Rename(from, to); err != nil {
			return fmt.Errorf("rename into place: %w", err)
		}
	}
	d.mu.Lock()
	d.temps, d.committed = nil, true
	d.mu.Unlock()
	return syncDir(d.dst.path)
}

func (d *dirSink) Abort() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.committed {
		return
	}
	for _, t := range d.temps {
		os.Remove(t)
	}
	d.temps = nil
	d.dst.undo()
}

// writeSynced writes index into f, syncs and closes it.
func writeSynced(f *os.File, index []byte) error {
	_, err := f.Write(index)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	return nil
}

// WriteIndexFile writes index as dir/index.aifs in one step: under a temporary name, synced,
// then renamed over any index there, so that dir holds the old index or the new one, never a
// part. It is how aifs index writes beside tars, where nothing else is aifs's to replace.
func WriteIndexFile(dir string, index []byte) error {
	tmp := filepath.Join(dir, tmpPrefix+layout.IndexName)
	os.Remove(tmp) // an interrupted run's
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	if err := writeSynced(f, index); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, layout.IndexName)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("rename into place: %w", err)
	}
	return syncDir(dir)
}

func syncDir(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", path, err)
	}
	return nil
}
