package diskcache

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"
)

// scanItem is a chunk file found by a scan.
type scanItem struct {
	key  chunkKey
	size int64
}

// readNames returns the names in directory dir, unsorted; none if it does not exist.
func readNames(dir string) ([]string, error) {
	d, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Readdirnames(-1)
}

// list returns the chunk files in Dir, and removes temporary files older than tmpMaxAge
// (another process may be writing the younger ones).
func (c *Cache) list() ([]scanItem, error) {
	tmp := filepath.Join(c.opt.Dir, tmpDir)
	names, err := readNames(tmp)
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		if fi, err := os.Lstat(filepath.Join(tmp, name)); err == nil && time.Since(fi.ModTime()) > tmpMaxAge {
			os.Remove(filepath.Join(tmp, name))
		}
	}
	return listChunks(c.ctx, c.opt.Dir)
}

// listChunks returns the chunk files in dir; their names carry their sizes (no stat per file).
func listChunks(ctx context.Context, dir string) ([]scanItem, error) {
	var items []scanItem
	for fan := range uint64(256) {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		names, err := readNames(fanDir(dir, fan<<56))
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			if k, size, ok := parseName(name); ok && k.name>>56 == fan {
				items = append(items, scanItem{k, size})
			}
		}
	}
	return items, nil
}

// DirBytes returns the bytes of the chunk files in dir, what a Cache on dir finds there (0 if
// dir does not exist), so that a caller sizing a budget by the free space can count them as
// room: they are the cache's own.
func DirBytes(dir string) (int64, error) {
	items, err := listChunks(context.Background(), dir)
	var n int64
	for _, it := range items {
		n += it.size
	}
	if err != nil {
		return 0, fmt.Errorf("diskcache: %w", err)
	}
	return n, nil
}

// rescan brings the set in line with the chunk files in Dir: see reconcile.
func (c *Cache) rescan() error {
	c.set.mu.Lock()
	start := c.set.seq
	c.set.mu.Unlock()
	c.sinceScan.Store(0)
	items, err := c.list()
	if err != nil {
		return err
	}
	c.reconcile(items, start)
	versions := map[uint64]map[[2]uint64]struct{}{}
	for _, it := range items {
		if versions[it.key.name] == nil {
			versions[it.key.name] = map[[2]uint64]struct{}{}
		}
		versions[it.key.name][it.key.ver] = struct{}{}
	}
	c.versionsMu.Lock()
	c.versions = versions
	c.versionsMu.Unlock()
	return nil
}

// reconcile applies a listing of Dir, taken after set.seq was start: entries on disk whose
// files are gone (deleted by another process) leave the set, unless their files were
// completed after start; files the set does not have (written by another process, or by an
// earlier one: New) are admitted by the policy, which may evict others; files it turns away
// are deleted, so that the directory converges on the budget.
func (c *Cache) reconcile(items []scanItem, start uint64) {
	s := &c.set
	var fresh []scanItem
	var lost []*entry
	s.mu.Lock()
	s.gen++
	for _, it := range items {
		p := &s.parts[it.key.part()]
		p.mu.RLock()
		e := p.m[it.key]
		p.mu.RUnlock()
		if e != nil {
			e.seen = s.gen
		} else {
			fresh = append(fresh, it)
		}
	}
	for i := range s.parts {
		p := &s.parts[i]
		p.mu.RLock()
		for _, e := range p.m {
			if e.seen != s.gen && e.seq <= start && e.state.Load() == stateOnDisk {
				lost = append(lost, e)
			}
		}
		p.mu.RUnlock()
	}
	for _, e := range lost {
		s.removeLocked(e)
		e.state.Store(stateGone)
	}
	s.setWorst()
	s.mu.Unlock()
	for _, e := range lost {
		closeFile(e)
	}
	for _, it := range fresh {
		doomed, have, ok := s.admit(newEntry(it.key, it.size, stateOnDisk))
		c.doom(doomed)
		if !ok && have == nil {
			os.Remove(c.path(it.key, it.size))
		}
	}
	if len(lost)+len(fresh) > 0 {
		if ce := c.log.Check(zap.DebugLevel, "rescanned the cache directory"); ce != nil {
			ce.Write(zap.Int("files", len(items)), zap.Int("lost", len(lost)), zap.Int("found", len(fresh)))
		}
	}
}

// scanner rescans Dir every rescanEvery (or 20 times the last scan's duration, if longer),
// and when the writers have admitted Size/8 bytes since the last scan, but not more than once
// a second (or 20 times a scan's duration), until Close.
func (c *Cache) scanner() {
	next := rescanEvery
	for {
		t := time.NewTimer(next)
		select {
		case <-c.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-c.rescanQ:
			t.Stop()
		}
		began := time.Now()
		if err := c.rescan(); err != nil && c.ctx.Err() == nil {
			c.log.Warn("cannot rescan the cache directory", zap.String("dir", c.opt.Dir), zap.Error(err))
		}
		took := time.Since(began)
		pause := max(time.Second, 20*took)
		t = time.NewTimer(pause)
		select {
		case <-c.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		next = max(rescanEvery, 20*took) - pause
	}
}

// removeStale deletes the files of versions of shard name other than ver, if the last scan
// saw any (an object re-uploaded since they were written).
func (c *Cache) removeStale(name uint64, ver [2]uint64) {
	c.versionsMu.Lock()
	stale := false
	for v := range c.versions[name] {
		stale = stale || v != ver
	}
	if stale {
		c.versions[name] = map[[2]uint64]struct{}{ver: {}}
	}
	c.versionsMu.Unlock()
	if !stale {
		return
	}
	dir := fanDir(c.opt.Dir, name)
	names, err := readNames(dir)
	if err != nil {
		c.log.Warn("cannot list the cache directory", zap.String("dir", dir), zap.Error(err))
	}
	removed := 0
	for _, n := range names {
		k, _, ok := parseName(n)
		if !ok || k.name != name || k.ver == ver {
			continue
		}
		if e := c.set.get(k); e != nil && c.set.remove(e) {
			e.state.Store(stateGone)
			closeFile(e)
		}
		os.Remove(filepath.Join(dir, n))
		removed++
	}
	c.log.Info("removed the cached chunks of replaced shard versions", zap.Int("files", removed))
}
