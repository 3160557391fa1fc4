package memlimit

import (
	"os"
	"path/filepath"
	"testing"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMemCgroupV2: the limit is the least memory.max or memory.high along the ancestors ("max"
// is none), and what is used besides the page cache is memory.current less file plus shmem.
func TestMemCgroupV2(t *testing.T) {
	root := t.TempDir()
	pod := filepath.Join(root, "kubepods", "pod1")
	ctr := filepath.Join(pod, "ctr")
	writeFiles(t, filepath.Join(root, "kubepods"), map[string]string{"memory.max": "max\n", "memory.high": "max\n"})
	writeFiles(t, pod, map[string]string{"memory.max": "1073741824\n", "memory.high": "max\n"})
	writeFiles(t, ctr, map[string]string{"memory.max": "max\n", "memory.high": "805306368\n",
		"memory.current": "600000000\n", "memory.stat": "anon 100000000\nfile 450000000\nshmem 50000000\n"})
	cg := memCgroup{dir: ctr, root: root, v2: true}
	if got := cg.limit(); got != 805306368 {
		t.Errorf("limit %d, want the container's memory.high 805306368", got)
	}
	if got := cg.nonFile(); got != 200000000 {
		t.Errorf("in use besides the page cache %d, want 600M - 450M + 50M", got)
	}
	writeFiles(t, ctr, map[string]string{"memory.high": "max\n"})
	if got := cg.limit(); got != 1073741824 {
		t.Errorf("limit %d, want the pod's memory.max", got)
	}
	writeFiles(t, pod, map[string]string{"memory.max": "max\n"})
	if got := cg.limit(); got != 0 {
		t.Errorf("limit %d with none set, want 0", got)
	}
}

// TestMemCgroupV1: the limit is hierarchical_memory_limit (a near-2^63 figure is none), and what
// is used besides the page cache is total_rss plus total_shmem.
func TestMemCgroupV1(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "job")
	writeFiles(t, dir, map[string]string{"memory.stat": "cache 400\nrss 10\nhierarchical_memory_limit 556326912\ntotal_cache 450000000\ntotal_rss 80000000\ntotal_shmem 1000000\n"})
	cg := memCgroup{dir: dir, root: filepath.Dir(dir)}
	if got := cg.limit(); got != 556326912 {
		t.Errorf("limit %d", got)
	}
	if got := cg.nonFile(); got != 81000000 {
		t.Errorf("in use besides the page cache %d, want total_rss + total_shmem", got)
	}
	writeFiles(t, dir, map[string]string{"memory.stat": "hierarchical_memory_limit 9223372036854771712\n"})
	if got := cg.limit(); got != 0 {
		t.Errorf("limit %d for none, want 0", got)
	}
}

// TestParseProcCgroup reads /proc/PID/cgroup texts against a fake cgroup tree: in a cgroup
// namespace of its own a process's cgroup is "/", the root of what is mounted at
// /sys/fs/cgroup, and its limit is read there (v2 memory.max, v1 hierarchical_memory_limit),
// while a host's root cgroup, with no memory.max (v2) or a near-2^63 limit (v1), is no limit; a
// path above the namespace ("/../...") is no cgroup of ours.
func TestParseProcCgroup(t *testing.T) {
	for _, tc := range []struct {
		name, proc string
		files      map[string]string // path under the fake root: contents
		dir        string            // under the fake root; "-": no cgroup found
		limit      int64
	}{
		{name: "v2 own namespace", proc: "0::/\n", dir: "v2",
			files: map[string]string{"v2/memory.max": "268435456\n", "v2/memory.high": "max\n"}, limit: 256 << 20},
		{name: "v2 own namespace, memory.high", proc: "0::/\n", dir: "v2",
			files: map[string]string{"v2/memory.max": "max\n", "v2/memory.high": "134217728\n"}, limit: 128 << 20},
		{name: "v2 host root", proc: "0::/\n", dir: "v2",
			files: map[string]string{"v2/cgroup.controllers": "memory\n"}, limit: 0},
		{name: "v2 nested, root counted", proc: "0::/kubepods/pod1\n", dir: "v2/kubepods/pod1",
			files: map[string]string{"v2/memory.max": "1073741824\n", "v2/kubepods/pod1/memory.max": "max\n"}, limit: 1 << 30},
		{name: "v2 nested", proc: "0::/kubepods/pod1\n", dir: "v2/kubepods/pod1",
			files: map[string]string{"v2/kubepods/memory.max": "max\n", "v2/kubepods/pod1/memory.max": "536870912\n"}, limit: 512 << 20},
		{name: "v2 outside the namespace", proc: "0::/../../kubepods/pod2\n", dir: "-",
			files: map[string]string{"v2/memory.max": "268435456\n"}},
		{name: "v1 own namespace", proc: "5:pids:/\n4:memory:/\n0::/\n", dir: "v1",
			files: map[string]string{"v1/memory.stat": "total_rss 1000\nhierarchical_memory_limit 268435456\n", "v1/memory.limit_in_bytes": "268435456\n"}, limit: 256 << 20},
		{name: "v1 host root", proc: "4:memory:/\n0::/\n", dir: "v1",
			files: map[string]string{"v1/memory.stat": "hierarchical_memory_limit 9223372036854771712\n", "v1/memory.limit_in_bytes": "9223372036854771712\n"}, limit: 0},
		{name: "v1 nested", proc: "4:cpuacct,memory:/job\n", dir: "v1/job",
			files: map[string]string{"v1/job/memory.stat": "hierarchical_memory_limit 556326912\n"}, limit: 556326912},
		{name: "v1 outside the namespace", proc: "4:memory:/../job\n", dir: "-"},
		{name: "no memory controller", proc: "3:cpu:/\n", dir: "-"},
	} {
		root := t.TempDir()
		for name, content := range tc.files {
			writeFiles(t, filepath.Dir(filepath.Join(root, name)), map[string]string{filepath.Base(name): content})
		}
		cg, ok := parseProcCgroup(tc.proc, filepath.Join(root, "v1"), filepath.Join(root, "v2"))
		if tc.dir == "-" {
			if ok {
				t.Errorf("%s: %q gave cgroup %s, want none", tc.name, tc.proc, cg.dir)
			}
			continue
		}
		if !ok || cg.dir != filepath.Join(root, tc.dir) {
			t.Errorf("%s: %q gave cgroup %q (found %v), want %s", tc.name, tc.proc, cg.dir, ok, tc.dir)
			continue
		}
		if got := cg.limit(); got != tc.limit {
			t.Errorf("%s: limit %d, want %d", tc.name, got, tc.limit)
		}
	}
}

// TestPageCacheBudgetFixed: page_cache=SIZE is the budget, whatever the machine.
func TestPageCacheBudgetFixed(t *testing.T) {
	b, src := NewPageCache(300<<20, nil).Budget([]uint32{1})
	if b != 300<<20 || src != "page_cache=314.6 MB" {
		t.Errorf("budget %d from %q", b, src)
	}
}
