// Package memlimit reads how much memory this node and its memory cgroups (v1 or v2) leave:
// MemAvailable and MemTotal of /proc/meminfo, a cgroup's limit along its ancestors and what it
// uses besides the page cache. The mount sizes its caches from it: the page-cache budget
// (PageCache, -o page_cache=auto), mem_cache and push_chunks=auto in a memory cgroup
// (CgroupLimit). It imports the standard library only; the caller logs.
package memlimit

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aifs/aifs/internal/human"
)

// PageCache computes the page-cache budget (-o page_cache=SIZE|auto, prefetch.Options.PageCache):
// the bytes of sample pages aifs lets the kernel's page cache keep. With auto (the default) it
// is the least of what the node can hold, read again at each call (every second):
//   - MemAvailable less 1/headroomShare of MemTotal (MemAvailable counts the page cache, aifs's
//     pages included, as available: the figure does not shrink as aifs's pages come in);
//   - for the daemon's memory cgroup and each of its readers' (the pids of recent READs: page
//     cache pages are charged to the process that reads them, and a Kubernetes trainer pod is
//     another cgroup than an aifs DaemonSet), its limit less what it uses besides the page
//     cache (the readers' own memory, the daemon's heap) less 1/headroomShare of the limit (at
//     least minHeadroom), so that the cgroup never reaches its limit and reclaims.
//
// A reader's cgroup counts for readerMemory after its last READ. It is safe for concurrent use.
type PageCache struct {
	fixed   int64                            // page_cache=SIZE; 0: auto
	changed func(bytes int64, source string) // told when the budget moves by more than 1/changeShare

	mu         sync.Mutex // guards readers, last, lastSource
	readers    map[memCgroup]time.Time
	last       int64 // the last budget
	lastSource string
}

const (
	headroomShare = 16       // the share of memory (or of a cgroup's limit) left free
	minHeadroom   = 32 << 20 // the least headroom left in a cgroup
	changeShare   = 16       // a budget that moves by less than 1/changeShare of itself is not told
)

// readerMemory is how long a reader's cgroup still counts after its last READ.
const readerMemory = time.Minute

// NewPageCache returns the budget: fixed bytes (page_cache=SIZE), or with fixed 0 what the
// node and its cgroups leave. changed, if not nil, is told each budget that moves by more than
// 1/changeShare from the last, with where it came from.
func NewPageCache(fixed int64, changed func(bytes int64, source string)) *PageCache {
	return &PageCache{fixed: fixed, changed: changed, readers: map[memCgroup]time.Time{}}
}

// Budget returns the budget and where it came from, given the pids of recent readers.
func (p *PageCache) Budget(readers []uint32) (int64, string) {
	if p.fixed > 0 {
		return p.fixed, "page_cache=" + human.Bytes(p.fixed)
	}
	avail, total := MemInfo()
	if avail <= 0 {
		// /proc unreadable (out of descriptors?): keep the last budget rather than none.
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.last > 0 {
			return p.last, p.lastSource + " (last known: /proc/meminfo unreadable)"
		}
		return 1 << 62, "no limit found (/proc/meminfo unreadable)"
	}
	best := avail - total/16
	src := fmt.Sprintf("MemAvailable %s less 1/16 of MemTotal", human.Bytes(avail))
	p.mu.Lock()
	now := time.Now()
	for _, pid := range readers {
		if cg, ok := memCgroupOf(strconv.Itoa(int(pid))); ok {
			p.readers[cg] = now
		}
	}
	dirs := []memCgroup{}
	if cg, ok := memCgroupOf("self"); ok {
		dirs = append(dirs, cg)
	}
	for cg, seen := range p.readers {
		if now.Sub(seen) > readerMemory {
			delete(p.readers, cg)
			continue
		}
		dirs = append(dirs, cg)
	}
	p.mu.Unlock()
	for _, cg := range dirs {
		limit := cg.limit()
		if limit <= 0 {
			continue
		}
		used, headroom := cg.nonFile(), max(limit/headroomShare, minHeadroom)
		if b := limit - used - headroom; b < best {
			best = b
			src = fmt.Sprintf("memory cgroup %s: limit %s less %s in use besides the page cache less %s headroom",
				cg.dir, human.Bytes(limit), human.Bytes(used), human.Bytes(headroom))
		}
	}
	best = max(best, 0)
	p.mu.Lock()
	if d := best - p.last; p.changed != nil && (d > p.last/changeShare || -d > p.last/changeShare) {
		p.changed(best, src)
	}
	p.last, p.lastSource = best, src
	p.mu.Unlock()
	return best, src
}

// MemInfo returns MemAvailable and MemTotal of /proc/meminfo in bytes, or zeros if it cannot
// be read.
func MemInfo() (avail, total int64) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		key, rest, ok := strings.Cut(line, ":")
		if !ok || key != "MemAvailable" && key != "MemTotal" {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil {
			continue
		}
		if key == "MemAvailable" {
			avail = kb << 10
		} else {
			total = kb << 10
		}
	}
	return avail, total
}

// memCgroup is a memory cgroup, v1 or v2, by its directory dir under the hierarchy's root.
type memCgroup struct {
	dir, root string
	v2        bool
}

const (
	cgroupV1Root = "/sys/fs/cgroup/memory"
	cgroupV2Root = "/sys/fs/cgroup"
)

// memCgroupOf returns the memory cgroup of process pid ("self" for this one) from
// /proc/PID/cgroup, and whether it found one.
func memCgroupOf(pid string) (memCgroup, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "cgroup"))
	if err != nil {
		return memCgroup{}, false
	}
	return parseProcCgroup(string(b), cgroupV1Root, cgroupV2Root)
}

// parseProcCgroup finds the memory cgroup in text, a /proc/PID/cgroup, with the v1 memory
// hierarchy mounted at v1Root and the v2 one at v2Root. The paths there are relative to the
// reading process's cgroup namespace, and so is what is mounted at /sys/fs/cgroup in a
// container with a namespace of its own: a daemon there reads its own cgroup as "/", the root
// (whose files are the container's cgroup's), and a process outside the namespace as
// "/../...", which it cannot reach (none).
func parseProcCgroup(text, v1Root, v2Root string) (memCgroup, bool) {
	var v2 string
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if strings.Contains(","+parts[1]+",", ",memory,") { // v1, preferred where both are mounted
			if outsideNamespace(parts[2]) {
				return memCgroup{}, false
			}
			return memCgroup{dir: filepath.Join(v1Root, parts[2]), root: v1Root}, true
		}
		if parts[0] == "0" && parts[1] == "" {
			v2 = parts[2]
		}
	}
	if v2 == "" || outsideNamespace(v2) {
		return memCgroup{}, false
	}
	return memCgroup{dir: filepath.Join(v2Root, v2), root: v2Root, v2: true}, true
}

// outsideNamespace reports whether path, from /proc/PID/cgroup, leads above the reader's
// cgroup namespace.
func outsideNamespace(path string) bool { return slices.Contains(strings.Split(path, "/"), "..") }

// limit returns the cgroup's memory limit, the least along its ancestors (v1
// hierarchical_memory_limit; v2 memory.max and memory.high up to the root of the hierarchy,
// itself included), or 0 if none. A host's root cgroup has no limit (v2: no memory.max; v1: a
// near-2^63 figure); the root of a container's cgroup namespace is the container's cgroup.
func (c memCgroup) limit() int64 {
	if !c.v2 {
		return noLimit(c.stat("hierarchical_memory_limit"))
	}
	var least int64
	for dir := c.dir; ; dir = filepath.Dir(dir) {
		for _, file := range []string{"memory.max", "memory.high"} {
			if n := noLimit(readInt(filepath.Join(dir, file))); n > 0 && (least == 0 || n < least) {
				least = n
			}
		}
		if !strings.HasPrefix(dir, c.root+"/") { // the root, or (not made by parseProcCgroup) outside it
			return least
		}
	}
}

// nonFile returns the bytes the cgroup uses besides reclaimable page cache: anonymous memory
// and shared memory (tmpfs), which the kernel cannot drop to make room.
func (c memCgroup) nonFile() int64 {
	if !c.v2 {
		return c.stat("total_rss") + c.stat("total_shmem")
	}
	return max(readInt(filepath.Join(c.dir, "memory.current"))-c.stat("file")+c.stat("shmem"), 0)
}

// stat returns field key of the cgroup's memory.stat, or 0.
func (c memCgroup) stat(key string) int64 {
	b, err := os.ReadFile(filepath.Join(c.dir, "memory.stat"))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// readInt reads a file holding one decimal number ("max" and errors read as 0).
func readInt(file string) int64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// noLimit maps the figures that mean no limit (v1's near 2^63) to 0.
func noLimit(n int64) int64 {
	if n <= 0 || n >= 1<<50 {
		return 0
	}
	return n
}

// CgroupLimit returns the memory limit of this process's cgroup, the least along its
// ancestors, or 0 if there is none or it cannot be read.
func CgroupLimit() int64 {
	cg, ok := memCgroupOf("self")
	if !ok {
		return 0
	}
	return cg.limit()
}
