// Package pack writes a new shard set (layout's format) from a directory tree: it walks the tree
// (ListFiles), copies the files' bytes into shards in pack order, each on a multiple of
// Options.Align, and writes the index last, through a Sink (a local directory, or backend/s3's
// upload); WriteIndexFile replaces an index alone. It imports layout and the standard library.
package pack

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/aifs/aifs/layout"
)

// DefaultShardSize is the target shard size when Options.ShardSize is not set: 1 GiB.
const DefaultShardSize = 1 << 30

// DefaultAlign is the boundary each sample starts on when Options.Align is not set: 4 KiB, the
// block that the kernel's EROFS reads with directio over a disk of 4 KiB sectors
// (docs/bench/align.md has the space it costs).
const DefaultAlign = 4096

// Options configure Pack. The zero value packs with the defaults given on each field.
type Options struct {
	// ShardSize is the target shard size in bytes. Default 1 GiB.
	ShardSize int64
	// Align is the boundary, in bytes, that each non-empty sample starts on in its shard, zero
	// bytes padding the space before it: a power of two, or 1 to pack samples end to end, as
	// sets packed before alignment are. Default DefaultAlign (4096). A set aligned to 512 bytes or
	// more can be served by the kernel's EROFS (layout/erofsmeta).
	Align int64
	// Jobs is the number of source files read in parallel. Default 16.
	Jobs int
	// Force allows replacing an existing shard set at the destination, and removing leftovers of
	// an interrupted pack there. Other files in the destination are never touched. Default false.
	Force bool
	// FollowExternal follows symlinks whose targets lie outside the source tree. Default
	// false: such a symlink fails the pack, naming it, so that nothing from elsewhere is
	// packed unasked and nothing is silently left out.
	FollowExternal bool
	// Warn receives one line for each source entry skipped (sockets, FIFOs, devices, dangling
	// symlinks, symlink cycles). Default: discard.
	Warn func(msg string)
	// Progress, if set, is called from one goroutine after each file is written.
	Progress func(Progress)
}

// Progress is a snapshot of a running pack.
type Progress struct {
	Files, TotalFiles int
	Bytes, TotalBytes int64
}

// Result summarises a finished pack.
type Result struct {
	Files, Dirs, Shards int
	Bytes               int64
	Duration            time.Duration
}

const (
	// ownPrefix begins the names of aifs's own files in a shard set's directory: a pack's
	// temporary files (tmpPrefix) and the EROFS images layout/erofsmeta caches there
	// (erofsmeta.ImagePrefix). Replacing a set removes them.
	ownPrefix = ".aifs-"
	tmpPrefix = ".aifs-tmp-"
	// Files up to streamLimit are read whole by the parallel readers; larger ones are streamed by
	// the writer. With window slots of read-ahead this bounds pack memory to window×streamLimit.
	streamLimit = 4 << 20
	copyBufSize = 1 << 20
)

// Pack packs the tree at src into a new shard set in directory dst.
//
// Pack follows symlinks to files and directories inside the source tree as
// os.walk(followlinks=True) does, skipping a symlink that leads back to one of its own
// ancestors; a symlink out of the tree fails the pack unless FollowExternal. It skips sockets,
// FIFOs, devices and dangling symlinks, reporting each through Warn. It fails, naming the path,
// on an unreadable file, a file whose size changes while it is read, or a name that cannot be
// stored.
//
// Shards and index are written under temporary names; the index is renamed into place last, after
// everything else is on disk. On failure or cancellation Pack removes what it wrote, and an
// existing shard set at dst (with Force) stays valid until the new data is fully written.
func Pack(ctx context.Context, src, dst string, opt Options) (Result, error) {
	d, err := prepareDest(src, dst, opt.Force)
	if err != nil {
		return Result{}, err
	}
	return PackTo(ctx, src, &dirSink{dst: d}, opt)
}

// PackTo packs the tree at src like Pack, into sink (Pack's sink writes a directory; backend/s3
// has one that uploads). opt.Force is the sink's business and ignored here. On failure or
// cancellation PackTo aborts the sink; on success it has committed it.
func PackTo(ctx context.Context, src string, sink Sink, opt Options) (Result, error) {
	start := time.Now()
	if opt.ShardSize <= 0 {
		opt.ShardSize = DefaultShardSize
	}
	if opt.Jobs <= 0 {
		opt.Jobs = 16
	}
	if opt.Align <= 0 {
		opt.Align = DefaultAlign
	}
	if opt.Align&(opt.Align-1) != 0 {
		return Result{}, fmt.Errorf("alignment %d is not a power of two", opt.Align)
	}
	if opt.Warn == nil {
		opt.Warn = func(string) {}
	}
	p := &packer{opt: opt, sink: sink, w: walker{followExternal: opt.FollowExternal, warn: opt.Warn, statFiles: true}}
	res, err := p.run(ctx, src)
	if err != nil {
		sink.Abort()
		return Result{}, err
	}
	res.Duration = time.Since(start)
	return res, nil
}

// packer runs one PackTo. Its memory per file is the packTree's, 24 bytes and the name, held
// from the walk to the end, plus while it commits the index (47 bytes and the name, Sink.Commit
// takes it whole): about 110 bytes a file of a 20-byte name at the peak
// (docs/bench/layout-notes.md#pack-memory-per-file).
type packer struct {
	opt  Options
	sink Sink
	w    walker
}

func (p *packer) run(ctx context.Context, src string) (Result, error) {
	t, err := p.walkTree(ctx, src)
	if err != nil {
		return Result{}, err
	}
	var res Result
	place := p.placer()
	for id := range t.len() {
		if e := t.entries.at(layout.ID(id)); e.isDir() {
			res.Dirs++
		} else {
			res.Files++
			res.Bytes += int64(e.size)
			place.place(e.size)
		}
	}
	place.finish()
	shards := place.shards
	if err := p.writeData(ctx, src, t, res.Files, shards, res.Bytes); err != nil {
		return Result{}, err
	}
	versions, err := p.sink.Finish(ctx)
	if err != nil {
		return Result{}, err
	}
	if len(versions) != len(shards) {
		return Result{}, fmt.Errorf("internal error: sink finished %d shards, planned %d", len(versions), len(shards))
	}
	for i := range shards {
		shards[i].Version = versions[i]
	}
	index, err := t.encodeIndex(shards, p.placer())
	if err != nil {
		return Result{}, err
	}
	if err := p.sink.Commit(ctx, index); err != nil {
		return Result{}, err
	}
	res.Shards = len(shards)
	return res, nil
}

// placer returns a shardPlacer placing files as opt asks.
func (p *packer) placer() shardPlacer {
	return shardPlacer{target: uint64(p.opt.ShardSize), align: uint64(p.opt.Align)}
}

// unixMode converts to st_mode bits for a directory or regular file.
func unixMode(fi os.FileInfo) uint32 {
	m := uint32(fi.Mode().Perm())
	if fi.Mode()&os.ModeSetuid != 0 {
		m |= 0o4000
	}
	if fi.Mode()&os.ModeSetgid != 0 {
		m |= 0o2000
	}
	if fi.Mode()&os.ModeSticky != 0 {
		m |= 0o1000
	}
	if fi.IsDir() {
		return m | layout.ModeDir
	}
	return m | layout.ModeRegular
}

// slot carries one file from the dispatcher to a reader, and its content to the writer.
type slot struct {
	id    layout.ID // set by the dispatcher
	path  string    // set by the dispatcher
	size  uint64    // set by the dispatcher
	data  []byte
	crc   uint32
	err   error
	ready chan struct{}
}

// writeData reads the files of t (files of them, total bytes) with opt.Jobs parallel readers,
// at most window files ahead of the writer, and writes them in order into the shards planned.
func (p *packer) writeData(ctx context.Context, src string, t *packTree, files int, shards []layout.Shard, total int64) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	window := 4 * p.opt.Jobs
	slots := make([]slot, window)
	for i := range slots {
		slots[i].ready = make(chan struct{}, 1)
	}
	free := make(chan struct{}, window) // one token per slot the dispatcher may fill
	for range window {
		free <- struct{}{}
	}
	jobs := make(chan int)
	var wg sync.WaitGroup
	wg.Add(1 + p.opt.Jobs)
	go func() { // dispatcher: hands out files in order, never more than window ahead
		defer wg.Done()
		defer close(jobs)
		i, dir, dirPath := 0, -1, ""
		for it := range t.inOrder {
			if it.isDir() {
				continue
			}
			select {
			case <-free:
			case <-ctx.Done():
				return
			}
			if it.dir != dir {
				dir, dirPath = it.dir, t.dirPath(src, it.dir)
			}
			s := &slots[i%window]
			s.id, s.path, s.size = it.id, filepath.Join(dirPath, string(it.name)), it.size
			select {
			case jobs <- i:
			case <-ctx.Done():
				return
			}
			i++
		}
	}()
	for range p.opt.Jobs {
		go func() {
			defer wg.Done()
			for i := range jobs {
				s := &slots[i%window]
				s.data, s.crc, s.err = nil, 0, nil
				if s.size <= streamLimit {
					s.data, s.err = readWhole(s.path, s.size)
					s.crc = layout.Checksum(s.data)
				}
				s.ready <- struct{}{}
			}
		}()
	}
	err := p.writeInOrder(ctx, t, files, shards, total, slots, free)
	cancel()
	wg.Wait()
	return err
}

// writeInOrder writes the files as the readers deliver them, recording each one's CRC32C in t.
func (p *packer) writeInOrder(ctx context.Context, t *packTree, files int, shards []layout.Shard, total int64, slots []slot, free chan struct{}) error {
	var (
		w       *shardWriter
		done    int64
		copyBuf []byte
		place   = p.placer()
		zeros   = make([]byte, p.opt.Align) // padding
	)
	defer func() {
		if w != nil && w.w != nil {
			w.w.Close() // a failed pack: the sink's Abort removes the shard
		}
	}()
	for i := range files {
		s := &slots[i%len(slots)]
		select {
		case <-s.ready:
		case <-ctx.Done():
			return ctx.Err()
		}
		shard, off := place.place(s.size)
		if w == nil || w.index != int(shard) {
			if w != nil {
				if err := w.finish(&shards[w.index], zeros); err != nil {
					return err
				}
			}
			var err error
			if w, err = p.createShard(ctx, int(shard), shards[shard].Size); err != nil {
				return err
			}
		}
		if s.err != nil {
			return s.err
		}
		if pad := off - w.sum.Size; pad > 0 { // zeros up to the sample's aligned start
			if _, err := w.Write(zeros[:pad]); err != nil {
				return err
			}
		}
		var (
			crc uint32
			err error
		)
		if s.size <= streamLimit {
			crc = s.crc
			_, err = w.Write(s.data)
			s.data = nil
		} else {
			if copyBuf == nil {
				copyBuf = make([]byte, copyBufSize)
			}
			crc, err = streamFile(w, s.path, s.size, copyBuf)
		}
		if err != nil {
			return err
		}
		t.entries.at(s.id).crc = crc
		done += int64(s.size)
		free <- struct{}{}
		if p.opt.Progress != nil {
			p.opt.Progress(Progress{Files: i + 1, TotalFiles: files, Bytes: done, TotalBytes: total})
		}
	}
	if w != nil {
		return w.finish(&shards[w.index], zeros)
	}
	return nil
}

// readWhole reads a file that the walk saw with the given size, failing if the size changed.
func readWhole(path string, size uint64) ([]byte, error) {
	f, err := openSized(path, size)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, size)
	if _, err := io.ReadFull(f, buf); err != nil {
		return nil, sizeErr(path, size, err)
	}
	return buf, checkEOF(f, path, size)
}

// streamFile copies a large file into w, returning its CRC32C.
func streamFile(w io.Writer, path string, size uint64, buf []byte) (uint32, error) {
	f, err := openSized(path, size)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	h := layout.NewChecksum()
	if _, err := io.CopyBuffer(io.MultiWriter(w, h), io.LimitReader(f, int64(size)), buf); err != nil {
		return 0, fmt.Errorf("copy %s: %w", path, err)
	}
	return h.Sum32(), checkEOF(f, path, size)
}

func openSized(path string, size uint64) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read source file: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat source file: %w", err)
	}
	if uint64(fi.Size()) != size {
		f.Close()
		return nil, fmt.Errorf("%s changed size while being packed (%d bytes when listed, %d now)", path, size, fi.Size())
	}
	return f, nil
}

func sizeErr(path string, size uint64, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("%s changed size while being packed (shorter than the %d bytes listed)", path, size)
	}
	return fmt.Errorf("read %s: %w", path, err)
}

// checkEOF fails if f has bytes beyond size: the file grew (or, like /proc files, reported a
// size that does not match its content).
func checkEOF(f *os.File, path string, size uint64) error {
	var b [1]byte
	n, err := f.Read(b[:])
	if n > 0 {
		return fmt.Errorf("%s changed size while being packed (longer than the %d bytes listed)", path, size)
	}
	if err != nil && err != io.EOF {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}

// shardWriter writes one shard into the sink, tracking its size and CRC32C.
type shardWriter struct {
	index int
	name  string
	w     io.WriteCloser
	bw    *bufio.Writer
	sum   layout.Sum
}

func (w *shardWriter) Write(b []byte) (int, error) {
	n, err := w.bw.Write(b)
	w.sum.Add(b[:n])
	if err != nil {
		return n, fmt.Errorf("write %s: %w", w.name, err)
	}
	return n, nil
}

// finish pads the shard with zeros to its planned size (less than len(zeros) bytes after its
// last sample), flushes and closes it, and records its checksum.
func (w *shardWriter) finish(s *layout.Shard, zeros []byte) error {
	if pad := s.Size - w.sum.Size; w.sum.Size < s.Size && pad < uint64(len(zeros)) {
		if _, err := w.Write(zeros[:pad]); err != nil {
			return err
		}
	}
	if err := w.bw.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", w.name, err)
	}
	if w.sum.Size != s.Size {
		return fmt.Errorf("internal error: %s holds %d bytes, planned %d", w.name, w.sum.Size, s.Size)
	}
	s.CRC = w.sum.CRC
	err := w.w.Close()
	w.w = nil
	if err != nil {
		return fmt.Errorf("write %s: %w", w.name, err)
	}
	return nil
}

func (p *packer) createShard(ctx context.Context, index int, size uint64) (*shardWriter, error) {
	name := layout.ShardName(index)
	wc, err := p.sink.CreateShard(ctx, name, int64(size))
	if err != nil {
		return nil, err
	}
	return &shardWriter{index: index, name: name, w: wc, bw: bufio.NewWriterSize(wc, 4<<20)}, nil
}

// dest is a checked destination directory.
type dest struct {
	path    string
	created bool     // Pack created the directory and removes it on failure
	old     []string // files of a previous shard set or interrupted pack, replaced under Force
}

// prepareDest checks that dst may receive a new shard set from src, creating it if missing.
func prepareDest(src, dst string, force bool) (*dest, error) {
	absSrc, err := resolve(src)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	absDst, err := resolve(dst)
	if err != nil {
		return nil, fmt.Errorf("destination: %w", err)
	}
	if absDst == absSrc || strings.HasPrefix(absDst, absSrc+string(filepath.Separator)) {
		return nil, fmt.Errorf("destination %s is inside the source %s", dst, src)
	}
	fi, err := os.Stat(dst)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir(dst, 0o755); err != nil {
			return nil, fmt.Errorf("create destination: %w", err)
		}
		return &dest{path: dst, created: true}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("destination: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("destination %s exists and is not a directory", dst)
	}
	ents, err := os.ReadDir(dst)
	if err != nil {
		return nil, fmt.Errorf("destination: %w", err)
	}
	if len(ents) == 0 {
		return &dest{path: dst}, nil
	}
	return replaceable(dst, ents, force)
}

// replaceable accepts a non-empty destination only with force, and only if everything in it
// belongs to a shard set or to an interrupted pack.
func replaceable(dst string, ents []os.DirEntry, force bool) (*dest, error) {
	ours := map[string]bool{}
	hasIndex := false
	if x, err := layout.Load(dst); err == nil {
		for _, s := range x.Shards() {
			ours[s.Name] = true
		}
	}
	d := &dest{path: dst}
	for _, e := range ents {
		name := e.Name()
		hasIndex = hasIndex || name == layout.IndexName
		if !ours[name] && name != layout.IndexName && !layout.IsShardName(name) && !strings.HasPrefix(name, ownPrefix) {
			return nil, fmt.Errorf("destination %s is not empty (it holds %q, which is not part of a shard set); "+
				"pack into a new or empty directory", dst, name)
		}
		d.old = append(d.old, name)
	}
	if !force {
		if hasIndex {
			return nil, fmt.Errorf("destination %s already holds a shard set; use --force to replace it", dst)
		}
		return nil, fmt.Errorf("destination %s holds leftovers of an interrupted pack; use --force to replace them", dst)
	}
	// Leftover temporary files would collide with ours, and a cached EROFS image describes the
	// set being replaced; the previous set's own files stay until the new data is written.
	for _, name := range d.old {
		if strings.HasPrefix(name, ownPrefix) {
			if err := os.Remove(filepath.Join(dst, name)); err != nil {
				return nil, fmt.Errorf("remove leftover: %w", err)
			}
		}
	}
	return d, nil
}

// removeOld removes the previous shard set's index (making it invalid) and then its shards.
func (d *dest) removeOld() error {
	if len(d.old) == 0 {
		return nil
	}
	if err := os.Remove(filepath.Join(d.path, layout.IndexName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove previous shard set: %w", err)
	}
	if err := syncDir(d.path); err != nil {
		return err
	}
	for _, name := range d.old {
		if name == layout.IndexName || strings.HasPrefix(name, tmpPrefix) {
			continue
		}
		if err := os.Remove(filepath.Join(d.path, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove previous shard set: %w", err)
		}
	}
	return nil
}

// undo removes the destination directory if Pack created it (it is empty after removeTemps).
func (d *dest) undo() {
	if d.created {
		os.Remove(d.path)
	}
}

// resolve returns the absolute path of p with symlinks resolved, for the longest existing prefix.
func resolve(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r, nil
	}
	parent, err := resolve(filepath.Dir(abs))
	if err != nil || parent == abs {
		return abs, err
	}
	return filepath.Join(parent, filepath.Base(abs)), nil
}
