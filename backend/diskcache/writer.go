package diskcache

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/aifs/aifs/backend/local"
)

// pending bounds the chunks held in memory for the writers, being fetched or waiting to be
// written, in bytes and in number; a place is reserved when a fetch to keep a chunk starts,
// so sending it to Cache.jobs never blocks.
type pending struct {
	bytes, jobs       atomic.Int64
	maxBytes, maxJobs int64
}

func (p *pending) init(maxBytes, chunk int64) {
	p.maxBytes = maxBytes
	p.maxJobs = min(max(2*maxBytes/chunk, 16), 4096)
}

// reserve takes a place for a chunk of n bytes if the bytes reserved stay within limit.
func (p *pending) reserve(n, limit int64) bool {
	if p.jobs.Add(1) > p.maxJobs {
		p.jobs.Add(-1)
		return false
	}
	if p.bytes.Add(n) > limit {
		p.bytes.Add(-n)
		p.jobs.Add(-1)
		return false
	}
	return true
}

func (p *pending) release(n int64) {
	p.bytes.Add(-n)
	p.jobs.Add(-1)
}

// writer writes the chunks queued in jobs and deletes the files of evicted chunks, those
// first, until Close closes jobs.
func (c *Cache) writer() {
	defer c.wr.Done()
	for {
		c.deleteDoomed()
		select {
		case e, ok := <-c.jobs:
			if !ok {
				c.deleteDoomed()
				return
			}
			c.deleteDoomed()
			c.write(e)
			c.pend.release(e.size)
			select {
			case c.room <- struct{}{}:
			default:
			}
		case <-c.wake:
		}
	}
}

// write writes e's chunk to its file, unless it was evicted first.
func (c *Cache) write(e *entry) {
	defer e.mem.Store(nil) // after the state: a reader who misses mem sees stateOnDisk
	data := e.mem.Load()
	if data == nil || e.state.Load() != stateWriting {
		return
	}
	path := c.path(e.key, e.size)
	tmp := filepath.Join(c.opt.Dir, tmpDir, fmt.Sprintf("%016x.tmp", rand.Uint64()))
	err := local.WriteFile(path, tmp, *data, c.direct)
	if errors.Is(err, fs.ErrNotExist) { // a directory is missing: make it (again)
		os.MkdirAll(filepath.Dir(path), 0o755)
		os.MkdirAll(filepath.Dir(tmp), 0o755)
		err = local.WriteFile(path, tmp, *data, c.direct)
	}
	if err != nil {
		c.writeErrors.Add(1)
		if c.writeErrLogged.CompareAndSwap(false, true) {
			c.log.Error("cannot write to the disk cache; reads go on from the source (later write errors are counted in write_errors)",
				zap.String("dir", c.opt.Dir), zap.Error(err))
		} else if ce := c.log.Check(zap.DebugLevel, "disk cache write failed"); ce != nil {
			ce.Write(zap.Error(err))
		}
		c.set.remove(e)
		e.state.Store(stateGone)
		return
	}
	c.written.Add(e.size)
	c.set.written(e)
	if !e.state.CompareAndSwap(stateWriting, stateOnDisk) { // evicted while being written
		c.removeFile(e)
	}
}

// doom queues the files of evicted entries for deletion by the writers.
func (c *Cache) doom(doomed []*entry) {
	if len(doomed) == 0 {
		return
	}
	c.doomMu.Lock()
	c.doomed = append(c.doomed, doomed...)
	c.doomMu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *Cache) deleteDoomed() {
	c.doomMu.Lock()
	doomed := c.doomed
	c.doomed = nil
	c.doomMu.Unlock()
	for _, e := range doomed {
		c.removeFile(e)
	}
}

// removeFile deletes the file of e, which left the set, unless the set has taken the chunk
// in again since (as another entry: its file is the same).
func (c *Cache) removeFile(e *entry) {
	closeFile(e)
	if have := c.set.get(e.key); have != nil && have != e {
		return
	}
	os.Remove(c.path(e.key, e.size))
}
