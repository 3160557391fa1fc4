package diskcache

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"sync"

	"go.uber.org/zap"

	"github.com/aifs/aifs/backend"
	"github.com/aifs/aifs/backend/local"
)

// openFile is a chunk file opened by local.OpenFile (O_DIRECT where Dir allows it).
type openFile struct{ sh backend.Shard }

// fdCache bounds the chunk files kept open: an entry's file stays in entry.file until the
// ring comes round to its slot again, or the entry leaves the set. A reader that loaded the
// file just before it was closed gets fs.ErrClosed and opens it again.
type fdCache struct {
	mu     sync.Mutex // guards ring, next, closed; the only writer of non-nil entry.file
	ring   []*entry   // entries whose files this cache opened, replaced in turn
	next   int
	closed bool // Close: files opened later are closed after their one read
}

func (fc *fdCache) init(n int) { fc.ring = make([]*entry, n) }

// file returns e's open file, opening it if need be; if keep is false the caller closes it
// after use.
func (c *Cache) file(e *entry) (f *openFile, keep bool, err error) {
	if f = e.file.Load(); f != nil {
		return f, true, nil
	}
	sh, err := local.OpenFile(c.path(e.key, e.size), e.size, c.direct)
	if err != nil {
		return nil, false, err
	}
	f = &openFile{sh}
	fc := &c.files
	fc.mu.Lock()
	if fc.closed {
		fc.mu.Unlock()
		return f, false, nil
	}
	if have := e.file.Load(); have != nil { // another reader opened it meanwhile
		fc.mu.Unlock()
		sh.Close()
		return have, true, nil
	}
	e.file.Store(f)
	old := fc.ring[fc.next]
	fc.ring[fc.next] = e
	fc.next = (fc.next + 1) % len(fc.ring)
	fc.mu.Unlock()
	if old != nil && old != e {
		closeFile(old)
	}
	return f, true, nil
}

// closeFile closes e's open file, if any.
func closeFile(e *entry) {
	if f := e.file.Swap(nil); f != nil {
		f.sh.Close()
	}
}

func (fc *fdCache) closeAll() {
	fc.mu.Lock()
	fc.closed = true
	ring := fc.ring
	fc.ring = nil
	fc.mu.Unlock()
	for _, e := range ring {
		if e != nil {
			closeFile(e)
		}
	}
}

// readFile reads [off, off+len(p)) of e's chunk from its file: only the aligned window.
func (c *Cache) readFile(ctx context.Context, e *entry, p []byte, off int64) error {
	for try := 0; ; try++ {
		f, keep, err := c.file(e)
		if err != nil {
			return err
		}
		err = f.sh.ReadAt(ctx, p, off)
		if !keep {
			f.sh.Close()
		}
		if err == nil || try > 0 || !errors.Is(err, fs.ErrClosed) {
			return err
		}
	}
}

// viewFile is readFile lending the buffer of the direct read (local's View).
func (c *Cache) viewFile(ctx context.Context, e *entry, off int64, n int) (backend.View, error) {
	for try := 0; ; try++ {
		f, keep, err := c.file(e)
		if err != nil {
			return nil, err
		}
		v, err := f.sh.(backend.Viewer).View(ctx, off, n)
		if !keep {
			f.sh.Close()
		}
		if err == nil || try > 0 || !errors.Is(err, fs.ErrClosed) {
			return v, err
		}
	}
}

// fileFailed drops e, whose file could not be read: deleted by another process (a plain
// miss), or torn, short or unreadable (then the file goes too).
func (c *Cache) fileFailed(e *entry, err error) {
	c.set.remove(e)
	e.state.Store(stateGone)
	closeFile(e)
	gone := errors.Is(err, backend.ErrNotExist)
	if !gone && !errors.Is(err, fs.ErrClosed) {
		os.Remove(c.path(e.key, e.size))
	}
	if ce := c.log.Check(zap.DebugLevel, "chunk file dropped"); ce != nil {
		ce.Write(zap.Bool("missing", gone), zap.Error(err))
	}
}

// tryDisk looks for chunk k of size bytes on disk, where another process sharing Dir may have
// written it, and returns its entry, adopted into the set if the policy takes it (else
// served this once), or nil. A torn file is deleted.
func (c *Cache) tryDisk(k chunkKey, size int64) *entry {
	e := newEntry(k, size, stateOnDisk)
	if _, _, err := c.file(e); err != nil {
		if !errors.Is(err, backend.ErrNotExist) {
			c.fileFailed(e, err)
		}
		return nil
	}
	doomed, have, _ := c.set.admit(e)
	if have != nil {
		closeFile(e)
		return have
	}
	c.doom(doomed)
	return e
}
