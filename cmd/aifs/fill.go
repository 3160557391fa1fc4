package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/aifs/aifs/backend"
	"github.com/aifs/aifs/backend/diskcache"
	"github.com/aifs/aifs/kernel"
	"github.com/aifs/aifs/layout"
)

// s3Fill is the filling half of the kernel plane over a set in S3 (docs/kernel.md, "The plane
// over S3"): sparse local copies of the shards in the cache directory, the plane's devices,
// filled from S3 by a kernel.Filler before any read of a hole proceeds, and kept within the
// cache's size by punching chunks out again.
type s3Fill struct {
	dir    string // the copies, their records of filled chunks, the image and the lock
	paths  []string
	sizes  []int64
	shards []backend.Shard // the objects, opened once: every GET carries the ETag seen then
	lock   *os.File
	filler *kernel.Filler
}

// errCopiesInUse: another mount holds the kernel plane's copies of the set in this cache
// directory (data=auto then mounts FUSE).
var errCopiesInUse = errors.New("the kernel plane's copies of the set are in use by another mount")

// fillLockName is the file in a plane's copies directory that one daemon at a time holds
// (flock): two Fillers over the same copies would each fill and record them.
const fillLockName = ".lock"

// copiesDir returns the directory of the copies of set name in the cache directory dir.
func copiesDir(dir, name string) string {
	h := sha256.Sum256([]byte(name))
	return filepath.Join(dir, "kernel", hex.EncodeToString(h[:8]))
}

// fillRefusal returns why the kernel plane cannot serve src, a set in S3, with c's options in
// this process, or "".
func (c *mountConfig) fillRefusal(src *source) string {
	switch {
	case c.cacheDir == "":
		return "the shards are in S3, and the kernel plane keeps their local copies in --cache-dir, which is not set"
	case os.Getenv(keeperEnv) == "":
		return "restart=off: the kernel plane over S3 needs the keeper to hold its fanotify group across daemon restarts (without it, a killed daemon's readers could read a hole's zeros)"
	}
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil && uint64(len(src.x.Shards()))*2+1024 > rl.Cur {
		return fmt.Sprintf("the set has %d shards, and the kernel plane over S3 holds a descriptor of each (twice, with the keeper) within the limit of %d (ulimit -n)", len(src.x.Shards()), rl.Cur)
	}
	if err := holesWork(c.cacheDir); err != nil {
		return err.Error()
	}
	return ""
}

// holesWork checks that the file system of dir can punch holes in files
// (FALLOC_FL_PUNCH_HOLE), which keeping the copies within the cache's size takes.
func holesWork(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("--cache-dir: %w", err)
	}
	f, err := os.CreateTemp(dir, ".holes-*")
	if err != nil {
		return fmt.Errorf("--cache-dir: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if _, err := f.Write(make([]byte, 8192)); err != nil {
		return fmt.Errorf("--cache-dir: %w", err)
	}
	if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, 4096); err != nil {
		return fmt.Errorf("--cache-dir %s cannot punch holes in files (%v), which the kernel plane over S3 needs", dir, err)
	}
	return nil
}

// openFill opens src's objects and their copies in c's cache directory, removing the copies of
// objects replaced since (their names hold the ETag), and starts or (with h, a daemon taking
// over: keeper.go) adopts their Filler. Nothing is read from S3 but the objects' heads.
func (c *mountConfig) openFill(ctx context.Context, log *zap.Logger, src *source, h *handover) (_ *s3Fill, err error) {
	f := &s3Fill{dir: copiesDir(c.cacheDir, src.name)}
	defer func() {
		if err != nil {
			f.close()
		}
	}()
	if err := os.MkdirAll(f.dir, 0o700); err != nil {
		return nil, fmt.Errorf("--cache-dir: %w", err)
	}
	if f.lock, err = os.OpenFile(filepath.Join(f.dir, fillLockName), os.O_RDWR|os.O_CREATE, 0o600); err != nil {
		return nil, fmt.Errorf("--cache-dir: %w", err)
	}
	if err = unix.Flock(int(f.lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil && h == nil {
		return nil, fmt.Errorf("%w: %s in %s (%v)", errCopiesInUse, src.name, f.dir, err)
	}
	if err != nil {
		// Taking over: the holder is the daemon this one replaces, dying or (aifs upgrade)
		// ending once this one serves. The lock is this daemon's once it has ended.
		go unix.Flock(int(f.lock.Fd()), unix.LOCK_EX)
		err = nil
	}
	keep := map[string]bool{fillLockName: true}
	for i, s := range src.x.Shards() {
		sh, err := src.be.Open(ctx, s)
		if err != nil {
			return nil, err
		}
		f.shards = append(f.shards, sh)
		var version string
		if v, ok := sh.(backend.Versioned); ok {
			version = v.Version()
		}
		sum := sha256.New()
		for _, part := range []string{s.Name, version} {
			sum.Write(binary.BigEndian.AppendUint64(nil, uint64(len(part))))
			sum.Write([]byte(part))
		}
		sum.Write(binary.BigEndian.AppendUint64(nil, uint64(s.Size)))
		name := fmt.Sprintf("%06d-%x.shard", i, sum.Sum(nil)[:8])
		f.paths = append(f.paths, filepath.Join(f.dir, name))
		f.sizes = append(f.sizes, int64(s.Size))
		keep[name], keep[name+kernel.FilledSuffix] = true, true
	}
	if h == nil {
		removeStaleCopies(log, f.dir, keep)
	}
	budget, err := diskCacheSize(log, c.cacheDir, c.cacheSize, copiesBytes(f.dir))
	if err != nil {
		return nil, err
	}
	opt := kernel.FillOptions{Chunk: diskcache.DefaultChunkSize, Budget: budget, StageShards: c.prefetchShards, Fetch: f.fetcher(log)}
	if h != nil && h.fill != nil {
		// The Filler gets its own descriptor of the group: the File's would close with it.
		fan, err := unix.FcntlInt(h.fill.fan.Fd(), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("kernel plane: taking over the copies: %w", err)
		}
		if f.filler, err = kernel.AdoptFiller(fan, h.fill.copies, f.paths, f.sizes, opt); err != nil {
			unix.Close(fan)
			return nil, fmt.Errorf("kernel plane: taking over the copies: %w", err)
		}
		h.fill.fan.Close()
		h.fill = nil // the Filler's now
		return f, nil
	}
	if f.filler, err = kernel.NewFiller(f.paths, f.sizes, opt); err != nil {
		return nil, fmt.Errorf("kernel plane: %w", err)
	}
	return f, nil
}

// fetcher returns the Filler's Fetch: a ranged read of the object, whose GETs carry the ETag
// seen at the mount (a replaced object fails, and its reads with it, with EIO); a shard's
// failures are logged once in 10 s (the page cache tries a failed read again at once).
func (f *s3Fill) fetcher(log *zap.Logger) kernel.Fetch {
	warned := make([]atomic.Int64, len(f.shards)) // when each shard's failure was last logged, Unix s
	return func(ctx context.Context, shard int, off int64, p []byte) error {
		err := f.shards[shard].ReadAt(ctx, p, off)
		if now := time.Now().Unix(); err != nil && ctx.Err() == nil && now-warned[shard].Swap(now) >= 10 {
			log.Warn("kernel plane: a chunk could not be fetched; its readers get EIO", zap.Int("shard", shard),
				zap.Int64("offset", off), zap.Error(err))
		}
		return err
	}
}

// removeStaleCopies removes the files in dir that keep does not name: the copies of objects
// replaced or of another index of the set, and temporary files.
func removeStaleCopies(log *zap.Logger, dir string, keep map[string]bool) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !keep[e.Name()] && !e.IsDir() && !strings.HasPrefix(e.Name(), ".aifs-erofs-") {
			log.Debug("removing a stale copy", zap.String("file", e.Name()))
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// copiesBytes returns the bytes the copies in dir take on disk (their blocks, not their size).
func copiesBytes(dir string) int64 {
	var n int64
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		var st syscall.Stat_t
		if strings.HasSuffix(e.Name(), ".shard") && syscall.Stat(filepath.Join(dir, e.Name()), &st) == nil {
			n += st.Blocks * 512
		}
	}
	return n
}

// persist records the filled chunks every few seconds until ctx is done.
func (f *s3Fill) persist(ctx context.Context, log *zap.Logger) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := f.filler.Persist(); err != nil {
			log.Warn("kernel plane: recording the filled chunks", zap.Error(err))
		}
	}
}

// close ends the Filler (recording what is filled) and closes the objects and the lock. Reads of
// holes after it get zeros unless the keeper holds the group: call it only once the plane's
// superblock has ended.
func (f *s3Fill) close() error {
	var err error
	if f.filler != nil {
		err = f.filler.Close()
	}
	for _, s := range f.shards {
		s.Close()
	}
	if f.lock != nil {
		f.lock.Close()
	}
	return err
}

// staging returns be, the control mount's backend, with shards that stage through the Filler
// (backend.Stager), so that with prefetch_shards=on the Loader's plans fill the copies of the
// samples they name, in the background and ahead of their reads, as far as the budget goes.
func (f *s3Fill) staging(be backend.Backend, x *layout.Index) backend.Backend {
	index := make(map[string]int, len(x.Shards()))
	for i, s := range x.Shards() {
		index[s.Name] = i
	}
	return stagingBackend{Backend: be, filler: f.filler, index: index}
}

// stagingBackend is a Backend whose shards stage through a Filler.
type stagingBackend struct {
	backend.Backend
	filler *kernel.Filler
	index  map[string]int // a shard's number by name
}

func (b stagingBackend) Open(ctx context.Context, s layout.Shard) (backend.Shard, error) {
	sh, err := b.Backend.Open(ctx, s)
	if err != nil {
		return nil, err
	}
	return stagingShard{Shard: sh, filler: b.filler, shard: b.index[s.Name]}, nil
}

// stagingShard is a Shard that stages through a Filler.
type stagingShard struct {
	backend.Shard
	filler *kernel.Filler
	shard  int
}

// Stage implements backend.Stager.
func (s stagingShard) Stage(off, n int64) { s.filler.Stage(s.shard, off, n) }
