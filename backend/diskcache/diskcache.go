// Package diskcache is the local NVMe tier under a remote Backend (S3): a decorator
// backend.Backend that keeps chunks of the shards it reads in files of a local directory and
// serves later reads of them from there, with O_DIRECT.
//
// # Design
//
// A shard is cut into aligned chunks of Options.ChunkSize bytes (4 MiB by default; the last
// chunk of a shard is shorter). A chunk's identity is a hash of the namespace, the shard's
// name, size and CRC32C, its version (the ETag the inner shard reports through
// backend.Versioned, else layout.Shard.Version), the chunk size and the chunk index; it names
// the chunk's file, so bytes of another or a re-uploaded object are never served, and a cache
// directory outlives the process: a remount reads what the previous mount fetched. When Open
// meets a shard whose other versions have files, it deletes them.
//
// A read covers one or more chunks. A chunk in the set is read from its file: only the aligned
// window around the bytes asked for (a 110 KB sample costs a 112-116 KiB read, not 4 MiB),
// through an fd cache (files.go). A chunk being written is read from memory. A missing chunk
// the cache would keep is fetched whole, adjacent ones of one read in one inner ReadAt, once
// however many readers want it (internal/flight); a reader whose context ends stops waiting but
// the fetch, owned by the Cache, goes on for the others. A missing chunk the cache would not
// keep (outside the stable subset, see below) is read through: only the bytes asked for, so
// a cache smaller than the data costs no read amplification on the chunks it does not hold.
//
// The function set by OnArrived is told of each run of chunks fetched, with its bytes, once its readers are
// woken (fs pushes the other samples in it into the kernel's page cache; docs/s3.md). A fetch
// reads into a new buffer whose whole huge pages are advised for transparent huge pages
// (newChunkBuffer, buffer.go: half the page faults of a cold epoch).
//
// Fetched chunks go to disk through a bounded queue served by six writer goroutines
// (writer.go): a temporary file written with O_DIRECT from aligned buffers (local.WriteFile),
// fdatasync (except where the filesystem's journal orders a direct write before the rename:
// ext4, XFS), rename into place, so a file under a chunk's name is complete, or shorter than
// its name says and never served (the size is checked at open); a crash
// leaves at most temporary files, removed by the next New once a minute old. The reader that
// needed a chunk never waits for its write. A chunk's place in the queue (128 MiB) is reserved
// when its fetch starts, so a chunk fetched to be kept always is; while the fetches in flight
// and the chunks waiting fill the queue, missing chunks are read through (checking for room
// only when a chunk arrived fetched whole chunks that were then turned away). A failed write (ENOSPC,
// EIO) is counted in Stats.WriteErrors, logged once, and the chunk is read from the inner
// Backend next time.
//
// # Budget and eviction
//
// The chunks held or being written never exceed Options.Size bytes. The policy is the stable
// subset of package prefetch, not LRU: each chunk ranks by a hash of its key; while there is
// room every chunk is kept, and when the budget is full a chunk is kept only if it ranks below
// the highest-ranked chunk held, which is deleted. The cache converges on the lowest-ranked
// chunks that fit, whatever the order of the reads, so with a budget of a fraction c of the
// data a shuffled epoch hits about c of its reads (LRU: about c²/2), and when all the data fits
// all of it is kept.
//
// New scans the directory to rebuild the set (file names carry their sizes, so no stat per
// file). Two processes may share a directory: each keeps its own set within Size; a miss
// looks for the chunk's file before fetching (the other process may have written it); a chunk
// file the other deleted is a miss (an open descriptor keeps reading). Each process rescans
// the directory every 30 s (longer when a scan is slow: 20 times its duration) or sooner,
// once it has admitted Size/8 bytes, adopting the other's files and deleting what ranks beyond
// its budget; since both rank alike, both converge on the same subset. Between rescans the
// directory can exceed Size by what the other processes admitted since: about (P-1)·Size/8
// for P processes. Processes sharing a directory should use the same Size and ChunkSize.
// Chunks of shards no longer opened stay until evicted by rank; remove the directory to
// reclaim them at once.
//
// # Staging
//
// With Options.StageShards, one background stager fetches the chunks asked for, shard by shard
// in the order shards were first asked for, each shard's in order, up to 8 MiB per inner read,
// one read at a time, using at most half of the write queue, skipping chunks the full budget
// would turn away. What is asked for: the chunks holding the samples of the plans the trainers
// send (Shard.Stage, called by the prefetch Loader), so that a node of a cluster stages only
// its own range of the set; until a plan comes, every chunk of a shard on its first read.
// Close stops it.
//
// # Trade-offs
//
// Chunk size sets the granularity of everything: a miss of a 110 KB sample the cache keeps
// fetches a whole chunk, repaid by the samples after it in the same chunk; the subset is kept
// by chunk; the set costs about 200 bytes of memory per chunk; each chunk is one GET, one file
// and one write. A hit reads only the aligned window, so the chunk size does not change what a
// hit costs. 4 MiB is the default: a cold epoch over S3 pays per chunk, and 4 MiB ran fastest,
// for twice the memory of 1 MiB (docs/s3.md, "Chunk size, writers and buffers: the
// measurements").
//
// This package imports backend, backend/local, layout, zap and the standard library.
package diskcache

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/aifs/aifs/backend"
	"github.com/aifs/aifs/backend/local"
	"github.com/aifs/aifs/internal/bitset"
	"github.com/aifs/aifs/internal/flight"
	"github.com/aifs/aifs/layout"
)

// Options configure a Cache.
type Options struct {
	// Dir is the cache directory; required. It is created if missing. Two processes (two
	// mounts) may share one Dir safely (see the package doc).
	Dir string
	// Size is the byte budget of cached chunk data on disk; required, > 0.
	Size int64
	// ChunkSize is the unit of caching: shards are cut into aligned chunks of this many bytes.
	// A power of two from 4096 to 64 MiB; default 4 MiB (see Trade-offs in the package doc).
	ChunkSize int64
	// Namespace names the source, e.g. "s3://bucket/prefix"; part of every chunk's key, so
	// two sources never share a chunk. Default "".
	Namespace string
	// StageShards stages shards in the background (-o prefetch_shards=on): what plans name
	// (Shard.Stage) once one has, else whole shards in the order they are first read.
	// Default off.
	StageShards bool
	// Logger receives the notices (O_DIRECT refused, the first write error); per-read detail
	// only at Debug. Default: a no-op logger.
	Logger *zap.Logger
}

// DefaultChunkSize is Options.ChunkSize when not set.
const DefaultChunkSize = 4 << 20

// Stats are the Cache's counters since New. "Chunk reads" count each chunk a read touches.
type Stats struct {
	Hits         int64 `json:"hits"`          // chunk reads served from disk or from a chunk waiting to be written
	Misses       int64 `json:"misses"`        // chunk reads that fetched from the inner Backend or waited for a fetch
	HitBytes     int64 `json:"hit_bytes"`     // bytes served by hits
	FetchedBytes int64 `json:"fetched_bytes"` // bytes read from the inner Backend, StagedBytes included
	WrittenBytes int64 `json:"written_bytes"` // bytes of chunk files written
	Evictions    int64 `json:"evictions"`     // chunks evicted for chunks of lower rank
	WriteErrors  int64 `json:"write_errors"`  // chunk writes that failed (ENOSPC, EIO, ...)
	StagedBytes  int64 `json:"staged_bytes"`  // bytes fetched by the stager (Options.StageShards)
	UsedBytes    int64 `json:"used_bytes"`    // bytes of the chunks held or being written, as this process sees them
	Budget       int64 `json:"budget"`        // Options.Size
}

// writers is the number of writer goroutines: writers in parallel drain the queue faster, and a
// full queue turns chunks away (read through), whose other samples then fetch again. 6 ran
// faster than 2 and than 12 (docs/s3.md, "Chunk size, writers and buffers: the measurements").
const writers = 6

// Bounds of the background work.
const (
	pendingBytes = 128 << 20        // chunks being fetched to be kept or waiting for the writers (at least 4 chunks)
	stageRun     = 8 << 20          // bytes per inner read of the stager (at least one chunk)
	stageQueue   = 1024             // shards waiting for the stager; more wait for their next Stage
	maxOpenFiles = 1024             // chunk files the fd cache keeps open
	rescanEvery  = 30 * time.Second // the longest time between rescans (see the package doc)
	tmpDir       = "tmp"            // temporary files, in Dir
	tmpMaxAge    = time.Minute      // a temporary file older than this is a leftover
)

// Cache is a backend.Backend that caches the shards of an inner Backend in a local
// directory. It is safe for concurrent use. Its Shards implement backend.Viewer.
type Cache struct {
	inner  backend.Backend
	opt    Options
	chunk  int64
	direct bool // Dir takes O_DIRECT (local.ProbeDirect)
	log    *zap.Logger

	set     set
	flights flight.Group[chunkKey, src]
	files   fdCache
	pend    pending
	jobs    chan *entry                                                // chunks to write; never blocks, see pending
	room    chan struct{}                                              // a writer finished a job (the stager waits for room)
	arrived atomic.Pointer[func(shard string, off int64, data []byte)] // OnArrived's
	wake    chan struct{}                                              // doomed files to delete
	doomMu  sync.Mutex                                                 // guards doomed
	doomed  []*entry                                                   // evicted chunks whose files the writers delete
	stageQ  chan *shard
	planned atomic.Bool // Stage was called: reads no longer stage whole shards
	rescanQ chan struct{}

	versionsMu sync.Mutex                        // guards versions
	versions   map[uint64]map[[2]uint64]struct{} // name hash → version hashes with files, from the last scan

	ctx     context.Context // cancelled by Close: fetches, staging, rescans
	cancel  context.CancelFunc
	closing atomic.Bool  // Close has begun: reads and Opens fail
	closeMu sync.RWMutex // guards closed; read-held to add to bg or send to jobs
	closed  bool
	bg      sync.WaitGroup // fetches, the stager, the scanner
	wr      sync.WaitGroup // the writers
	once    sync.Once
	err     error // of the inner Backend's Close

	hits, misses, hitBytes, fetched, written, writeErrors, staged atomic.Int64
	sinceScan                                                     atomic.Int64 // bytes admitted since the last scan
	writeErrLogged                                                atomic.Bool
}

var _ backend.Backend = (*Cache)(nil)

// New returns a Cache of inner's shards in opt.Dir. It scans Dir (removing leftover temporary
// files and chunk files beyond the budget) before it returns. On error inner is left open;
// otherwise the Cache owns it: Close closes it.
func New(inner backend.Backend, opt Options) (*Cache, error) {
	if opt.ChunkSize == 0 {
		opt.ChunkSize = DefaultChunkSize
	}
	switch {
	case opt.Dir == "":
		return nil, errors.New("diskcache: no directory")
	case opt.Size <= 0:
		return nil, fmt.Errorf("diskcache: size %d: must be > 0", opt.Size)
	case opt.ChunkSize < 4096 || opt.ChunkSize > 64<<20 || opt.ChunkSize&(opt.ChunkSize-1) != 0:
		return nil, fmt.Errorf("diskcache: chunk size %d: must be a power of two from 4096 to 64 MiB", opt.ChunkSize)
	}
	if opt.Logger == nil {
		opt.Logger = zap.NewNop()
	}
	if err := os.MkdirAll(filepath.Join(opt.Dir, tmpDir), 0o755); err != nil {
		return nil, fmt.Errorf("diskcache: %w", err)
	}
	c := &Cache{inner: inner, opt: opt, chunk: opt.ChunkSize, log: opt.Logger,
		room: make(chan struct{}, 1), wake: make(chan struct{}, 1), rescanQ: make(chan struct{}, 1)}
	if err := local.ProbeDirect(filepath.Join(opt.Dir, tmpDir)); err != nil {
		c.log.Info("the cache directory refuses O_DIRECT; chunk files go through the page cache",
			zap.String("dir", opt.Dir), zap.Error(err))
	} else {
		c.direct = true
	}
	c.set.init(opt.Size)
	c.flights.Init(func(k chunkKey) uint { return uint(k.part()) })
	c.files.init(maxOpenFiles)
	c.pend.init(max(pendingBytes, 4*c.chunk), c.chunk)
	c.jobs = make(chan *entry, c.pend.maxJobs)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if err := c.rescan(); err != nil {
		c.cancel()
		return nil, fmt.Errorf("diskcache: %w", err)
	}
	c.wr.Add(writers)
	for range writers {
		go c.writer()
	}
	if opt.StageShards {
		c.stageQ = make(chan *shard, stageQueue)
		c.start(c.stager)
	}
	c.start(c.scanner)
	return c, nil
}

// Open implements backend.Backend. It opens the shard in the inner Backend first and returns
// its errors as they are (ErrNotExist, ErrMismatch, ...). The Shard owns the inner shard and
// closes it. If the directory holds chunks of other versions of the shard (an object
// re-uploaded since), Open deletes them.
func (c *Cache) Open(ctx context.Context, s layout.Shard) (backend.Shard, error) {
	if c.closing.Load() {
		return nil, fmt.Errorf("diskcache: open %s: %w", s.Name, fs.ErrClosed)
	}
	in, err := c.inner.Open(ctx, s)
	if err != nil {
		return nil, err
	}
	version := s.Version
	if v, ok := in.(backend.Versioned); ok {
		version = v.Version()
	}
	sh := &shard{c: c, inner: in, name: s.Name, size: in.Size()}
	sh.nameID, sh.ver = shardIDs(c.opt.Namespace, s.Name, sh.size, s.CRC, version, c.chunk)
	if c.stageQ != nil {
		sh.want = bitset.NewAtomic(int(sh.chunks()))
	}
	c.removeStale(sh.nameID, sh.ver)
	return sh, nil
}

// Close stops the Cache: it cancels the fetches and the staging in flight and waits for
// them, lets the writers finish the chunks queued (at most 128 MiB, so that the next New
// finds them), closes the cached files, and closes the inner Backend, returning its error.
// Reads of the Cache's Shards fail after Close (fs.ErrClosed). Close is idempotent.
func (c *Cache) Close() error {
	c.once.Do(func() {
		c.closing.Store(true)
		c.closeMu.Lock()
		c.closed = true
		c.closeMu.Unlock()
		c.cancel()
		c.bg.Wait()
		close(c.jobs)
		c.wr.Wait()
		c.files.closeAll()
		if err := c.inner.Close(); err != nil {
			c.err = fmt.Errorf("diskcache: close: %w", err)
		}
	})
	return c.err
}

// Stats returns a snapshot of the counters; it takes no lock.
func (c *Cache) Stats() Stats {
	return Stats{
		Hits: c.hits.Load(), Misses: c.misses.Load(), HitBytes: c.hitBytes.Load(),
		FetchedBytes: c.fetched.Load(), WrittenBytes: c.written.Load(),
		Evictions: c.set.evictions.Load(), WriteErrors: c.writeErrors.Load(),
		StagedBytes: c.staged.Load(), UsedBytes: c.set.used.Load(), Budget: c.opt.Size,
	}
}

// path returns the file of chunk k of size bytes.
func (c *Cache) path(k chunkKey, size int64) string {
	return filepath.Join(fanDir(c.opt.Dir, k.name), fileName(k, size))
}

// start runs f on a goroutine of bg, unless the Cache is closed: then it reports false.
func (c *Cache) start(f func()) bool {
	c.closeMu.RLock()
	defer c.closeMu.RUnlock()
	if c.closed {
		return false
	}
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		f()
	}()
	return true
}

// OnArrived sets fn to be called with the bytes of each run of chunks fetched to be kept, at
// offset off of the shard named shard, once the readers waiting for them were woken, on the
// goroutine of the fetch (a mount pushes the other samples in them into the kernel's page cache:
// prefetch.Loader.Arrived, which is made after the Cache it reads through). data is immutable;
// fn must not keep it. Call it once, before the Cache serves reads; until then nothing is told.
func (c *Cache) OnArrived(fn func(shard string, off int64, data []byte)) { c.arrived.Store(&fn) }
