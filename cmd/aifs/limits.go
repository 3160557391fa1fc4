package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"syscall"

	"github.com/aifs/aifs/backend/diskcache"
	"github.com/aifs/aifs/fs"
	"github.com/aifs/aifs/internal/human"
	"github.com/aifs/aifs/internal/memlimit"
	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/prefetch"
	"go.uber.org/zap"
)

// setMemoryLimit gives the Go runtime a soft memory limit: the index, the sample cache and
// 256 MiB for everything else (buffers, requests), or 9/10 of this process's memory cgroup
// limit if that is lower; in a memory cgroup, it also collects more often (GOGC=25, unless
// GOGC is set). Without one the heap may grow to twice the live cache before a collection,
// and a daemon in a memory cgroup can be killed (docs/bench/edges-notes.md, "The daemon's
// memory in a memory cgroup").
func setMemoryLimit(log *zap.Logger, indexBytes int64, cacheSize int64) {
	if cacheSize <= 0 {
		cacheSize = prefetch.DefaultCacheBytes
	}
	limit := cacheSize + indexBytes + 256<<20
	cg := memlimit.CgroupLimit()
	if cg > 0 && cg/10*9 < limit {
		limit = cg / 10 * 9
		if cacheSize > limit/2 {
			log.Warn("mem_cache is more than half of this memory cgroup's limit; the daemon may run out of memory",
				zap.Int64("mem_cache", cacheSize), zap.Int64("cgroup_limit", cg))
		}
	}
	debug.SetMemoryLimit(limit)
	if cg > 0 && os.Getenv("GOGC") == "" {
		// In a memory cgroup the daemon's heap comes out of the page cache's budget
		// (page_cache=auto subtracts it), so the heap is collected at 1.25 times its live
		// bytes, not 2: a smaller RSS, a larger budget, no more CPU seen.
		debug.SetGCPercent(25)
	}
}

// memCacheFor returns -o mem_cache, or when it is not given and the daemon runs in a memory
// cgroup limited to cg bytes (0: none) with a limit below 8 GiB, 1/8 of the limit with
// kernel_cache=on (aifs then holds only read-ahead, and the page cache needs the memory) and
// 1/2 with kernel_cache=off (aifs's memory is then the only cache): the daemon's heap comes out
// of the page cache's budget (page_cache=auto), which the smaller cache leaves larger
// (docs/bench/edges-notes.md).
func (c *mountConfig) memCacheFor(log *zap.Logger, cg int64) int64 {
	if c.memCache > 0 || cg <= 0 {
		return c.memCache
	}
	share := cg / 8
	if c.kernelCache == fs.CacheOff {
		share = cg / 2
	}
	if share >= prefetch.DefaultCacheBytes {
		return c.memCache
	}
	log.Info("mem_cache from the memory cgroup's limit", zap.Int64("mem_cache", share), zap.Int64("cgroup_limit", cg))
	return share
}

// pushOn decides -o push_chunks for a mount with a disk cache: on, off, or with auto, on when
// kernel_cache=on and the shard set takes at most half the memory available now (MemAvailable,
// and the memory cgroup's limit): every sample pushed stays in the page cache until it is
// read, and a set that does not fit would push out samples before their reads came.
func (c *mountConfig) pushOn(log *zap.Logger, x *layout.Index) bool {
	if c.pushChunks != "auto" || c.kernelCache != fs.CacheOn {
		return c.pushChunks == "on"
	}
	set := int64(x.ShardBytes())
	avail, _ := memlimit.MemInfo()
	if cg := memlimit.CgroupLimit(); cg > 0 && (avail == 0 || cg < avail) {
		avail = cg
	}
	on := avail > 0 && set <= avail/2
	log.Info("push_chunks=auto: the samples of each chunk fetched go into the page cache when the shard set is at most half the memory available",
		zap.Bool("on", on), zap.Int64("shard_set_bytes", set), zap.Int64("memory_available", avail))
	return on
}

// defaultDiskCache is --cache-size when not given; diskCacheSize caps it to the free space.
const defaultDiskCache = 100 << 30

// diskCacheSize creates dir if needed and returns the disk cache budget: want, at most 9/10 of
// the room in dir's file system, counting the chunks the cache already holds as room (a reused
// cache keeps them; a budget below them would delete them), and own, the bytes the kernel
// plane's copies hold there, as room too.
func diskCacheSize(log *zap.Logger, dir string, want, own int64) (int64, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, fmt.Errorf("--cache-dir: %w", err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("--cache-dir: %w", err)
	}
	held, err := diskcache.DirBytes(dir)
	if err != nil {
		return 0, fmt.Errorf("--cache-dir: %w", err)
	}
	free := (int64(st.Bavail)*st.Bsize + held + own) / 10 * 9
	if want > free {
		log.Warn("--cache-size is more than 9/10 of the room in --cache-dir (free space and the cache's own files); using that",
			zap.Int64("cache_size", want), zap.Int64("using", free))
		want = free
	}
	if want < 64<<20 {
		return 0, fmt.Errorf("--cache-dir %s has room for %s of cache; it needs at least 64 MiB", dir, human.Bytes(want))
	}
	return want, nil
}

// pageCacheBudget returns the page-cache budget of -o page_cache (0: auto), logging each move
// of it (prefetch.Options.PageCache).
func pageCacheBudget(fixed int64, log *zap.Logger) func(readers []uint32) (int64, string) {
	return memlimit.NewPageCache(fixed, func(bytes int64, source string) {
		log.Info("page_cache budget", zap.Int64("bytes", bytes), zap.String("source", source))
	}).Budget
}
