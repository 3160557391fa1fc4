package fs

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/aifs/aifs"
	"github.com/aifs/aifs/internal/latency"
	"github.com/aifs/aifs/plan"
	"github.com/aifs/aifs/prefetch"
)

// op names a kind of FUSE request in the statistics.
type op int

const (
	opLookup op = iota
	opForget
	opGetAttr
	opOpen
	opRead
	opIoctl
	opFlush
	opRelease
	opOpenDir
	opReadDir
	opReadDirPlus
	opStatFs
	opWrite // every request that would modify the tree; all get EROFS
	opPlan  // pieces of plans (ioctls of the plan file)
	opXattr // GETXATTR and LISTXATTR: there are none (ENOSYS, an empty list)
	opOther // requests aifs does not implement (locks, lseek, ...); all get ENOSYS
	numOps
)

var opNames = [numOps]string{"lookup", "forget", "getattr", "open", "read", "ioctl", "flush",
	"release", "opendir", "readdir", "readdirplus", "statfs", "write", "plan", "xattr", "other"}

// Stats counts the requests an FS answers: per op the number, the errors and a latency
// histogram, plus the bytes READ returned. Recording is a few atomic adds with no lock and no
// allocation; Snapshot and WritePrometheus read the counters while requests go on, so a
// snapshot is consistent per counter, not across counters.
type Stats struct {
	f       *FS
	started time.Time
	ops     [numOps]opStats
	bytes   atomic.Uint64 // returned by READ, control files included
	// rwReverted counts the read-write remounts of the mount that aifs made read-only again
	// (guardReadOnly).
	rwReverted atomic.Uint64
	// readers says who waited for how long (readers.go); kernel is set on the kernel plane,
	// where psiBase is the system's I/O pressure at the mount (µs, 0 if unknown).
	readers *readerTable
	kernel  bool
	psiBase uint64
	blocked atomic.Uint64 // ns: the FUSE plane's stall, in LOOKUP, GETATTR, OPEN and READ not on control files
}

type opStats struct {
	count, errors atomic.Uint64
	sumNs         atomic.Uint64
	lat           latency.Histogram
}

func newStats(f *FS) *Stats {
	s := &Stats{f: f, started: time.Now(), kernel: f.opt.DataPlane.Plane == planeKernel}
	s.readers = newReaderTable(s.kernel)
	if s.kernel {
		s.psiBase, _ = ioPressure()
	}
	return s
}

// planeKernel is DataPlane.Plane on the kernel plane.
const planeKernel = "kernel"

func (s *Stats) start() time.Time { return time.Now() }

// done records one request of kind o that started at t and answered st, and returns the
// nanoseconds it took. ENOSYS and ENOTTY are protocol answers (to OPEN, FLUSH, ioctls), not
// errors.
func (s *Stats) done(o op, t time.Time, st fuse.Status) uint64 {
	d := uint64(time.Since(t))
	c := &s.ops[o]
	c.count.Add(1)
	c.sumNs.Add(d)
	c.lat.Add(d)
	if st != fuse.OK && st != fuse.ENOSYS && st != fuse.Status(syscall.ENOTTY) {
		c.errors.Add(1)
	}
	return d
}

// doneBy records a request a reader blocks on (LOOKUP, GETATTR, OPEN, READ), of thread pid, that returned n bytes:
// for the mount's stall and its reader's, unless it was for a control file (ctl): reading the
// statistics is not waiting for data.
func (s *Stats) doneBy(o op, t time.Time, st fuse.Status, pid uint32, n int, ctl bool) {
	d := s.done(o, t, st)
	if !ctl && !s.kernel {
		s.blocked.Add(d)
		s.readers.record(pid, n, d)
	}
}

func (s *Stats) doneRead(t time.Time, st fuse.Status, pid uint32, n int, ctl bool) {
	s.bytes.Add(uint64(n))
	s.doneBy(opRead, t, st, pid, n, ctl)
}

// OpStats are the figures of one kind of request in a Snapshot.
type OpStats struct {
	Count  uint64  `json:"count"`
	Errors uint64  `json:"errors"`
	P50us  float64 `json:"p50_us"`
	P99us  float64 `json:"p99_us"`
	P999us float64 `json:"p999_us"`
}

// Snapshot is the content of the stats file (.aifs/stats), as JSON.
type Snapshot struct {
	// Version is the daemon's release (python/aifs/VERSION); PlanProtocol the plan protocol
	// version it takes (plan.Protocol), which the Python package checks.
	Version        string             `json:"version"`
	PlanProtocol   int                `json:"plan_protocol"`
	Source         string             `json:"source"`
	Mountpoint     string             `json:"mountpoint"`
	KernelCache    string             `json:"kernel_cache"`
	DataPlane      DataPlane          `json:"data_plane"`
	Started        time.Time          `json:"started"`
	UptimeSeconds  float64            `json:"uptime_seconds"`
	Entries        int                `json:"entries"`
	Files          uint64             `json:"files"`
	DatasetBytes   uint64             `json:"dataset_bytes"`
	Requests       uint64             `json:"requests"` // all kinds together
	Errors         uint64             `json:"errors"`
	ReadBytes      uint64             `json:"read_bytes"`
	Ops            map[string]OpStats `json:"ops"` // by op name; every op is present
	Index          IndexStats         `json:"index"`
	Stall          StallStats         `json:"stall"`
	prefetch.Stats                    // cache, backend, prefetch, epoch, plans
	Storage        map[string]any     `json:"storage,omitempty"` // Options.Storage, by name
	Daemon         DaemonStats        `json:"daemon"`
	// RWRemountsReverted counts the read-write remounts (root's mount -o remount,rw) that the
	// daemon found and made read-only again at once.
	RWRemountsReverted uint64 `json:"rw_remounts_reverted"`
}

// StallStats say how long readers waited for aifs, for the mount, per reader process, per
// cgroup, and for the process reading the stats file (python: aifs.stall). Source says what the
// blocked seconds measure (docs/plan.md, "Data stall"):
//   - "fuse" (the FUSE plane): the time spent answering the requests a reader blocks on
//     (LOOKUP, GETATTR, OPEN, READ), summed over the requests since the mount; those for the
//     control files (.aifs: the statistics, plans) are not waits for data and do not count.
//   - "delayacct" (the kernel plane, with kernel.task_delayacct=1): the readers' block-I/O
//     delay (/proc/PID/task/TID/stat), from when each was first seen closing a file of the
//     plane (fanotify), read every second; every block-I/O wait of those processes counts.
//   - "psi" (the kernel plane without delayacct): BlockedSeconds only, the growth since the
//     mount of the system's I/O pressure (/proc/pressure/io, "some": wall seconds in which any
//     task of the machine waited for I/O); readers and cgroups then show no blocked time.
//   - "none": the kernel plane with neither.
//
// Concurrent readers add up (except under "psi"), so over a span of wall time W with R readers
// the share of their time they were blocked is ΔBlockedSeconds / (W·R).
type StallStats struct {
	Source         string  `json:"source"`
	BlockedSeconds float64 `json:"blocked_seconds"`
	// Readers are the live reader processes most blocked (at most 32), most blocked first;
	// ReadersTracked counts the live ones, ReadersExited those folded after they exited.
	Readers        []ReaderStall `json:"readers"`
	ReadersTracked int           `json:"readers_tracked"`
	ReadersExited  uint64        `json:"readers_exited"`
	// Cgroups are the readers' cgroups (at most 64, most blocked first), exited readers
	// included; "other" holds what could not be placed.
	Cgroups []JobStall `json:"cgroups"`
	// Caller is the process that read this stats file: its process tree and its cgroup.
	Caller *CallerStall `json:"caller,omitempty"`
}

// Sources of StallStats.
const (
	stallFUSE      = "fuse"
	stallDelayacct = "delayacct"
	stallPSI       = "psi"
	stallNone      = "none"
)

// stallSource says where the kernel plane's stall figures come from now: delayacct while the
// kernel accounts block-I/O delays (the sysctl may be changed at any time), else the system's
// I/O pressure if the kernel has PSI.
func (s *Stats) stallSource() string {
	switch {
	case !s.kernel:
		return stallFUSE
	case delayacctOn():
		return stallDelayacct
	}
	if _, ok := ioPressure(); ok {
		return stallPSI
	}
	return stallNone
}

// delayacctOn reports whether the kernel accounts per-task delays (kernel.task_delayacct).
func delayacctOn() bool {
	b, err := os.ReadFile("/proc/sys/kernel/task_delayacct")
	return err == nil && len(b) > 0 && b[0] == '1'
}

// ioPressure returns the system's I/O pressure "some" total (µs in which some task waited for
// I/O, /proc/pressure/io), and whether the kernel has it.
func ioPressure() (uint64, bool) {
	b, err := os.ReadFile("/proc/pressure/io")
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	_, total, ok := strings.Cut(line, "total=")
	if !ok || !strings.HasPrefix(line, "some ") {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimSpace(total), 10, 64)
	return n, err == nil
}

// stall returns the stall figures, with those of the process of thread caller (0: none), and
// the readers' view they come from.
func (s *Stats) stall(caller uint32) (StallStats, readerView) {
	src := s.stallSource()
	v := s.readers.view(caller)
	st := StallStats{Source: src, Readers: v.readers, ReadersTracked: v.tracked, ReadersExited: v.exited,
		Cgroups: v.cgroups[:min(len(v.cgroups), topCgroups)], Caller: v.caller}
	switch src {
	case stallFUSE:
		st.BlockedSeconds = float64(s.blocked.Load()) / 1e9
	case stallDelayacct:
		st.BlockedSeconds = float64(v.blocked) / 1e9
	case stallPSI:
		if now, ok := ioPressure(); ok && now > s.psiBase {
			st.BlockedSeconds = float64(now-s.psiBase) / 1e6
		}
	}
	return st, v
}

// DataPlane says which path serves the files' bytes and why (aifs mount -o data): "fuse", this
// FS's READs, or "kernel", the kernel's EROFS over the same shards (package kernel), with this
// FS mounted beside it for the control files only.
type DataPlane struct {
	Plane  string `json:"plane"`
	Reason string `json:"reason"`
	// Mountpoint is where the files are served: the FUSE mountpoint, or the kernel plane's.
	Mountpoint string `json:"mountpoint"`
}

// IndexStats say how much of the index has been read: a version 3 index is read and checked
// block by block as the tree is used (layout.Index.Size), so a mount of 100 M samples holds only
// what was used. Error is the first block found corrupt, if any.
type IndexStats struct {
	Bytes     uint64 `json:"bytes"`
	ReadBytes uint64 `json:"read_bytes"`
	Error     string `json:"error,omitempty"`
}

// DaemonStats are the daemon's own Go runtime figures: what a leak would grow. The live heap is
// as of the end of the last garbage collection, so it does not move with the garbage made since,
// as the process's RSS does with when the collector and the scavenger last ran. GCCycles counts
// the collections so far: a reader of HeapLiveBytes knows from it when the figure was last
// renewed (TestSoak waits for two, after which pooled buffers are gone).
type DaemonStats struct {
	PID int `json:"pid"` // of the daemon serving the mount now
	// Restarts counts the daemons that served the mount before this one: a keeper replaced
	// each, after a crash or for an upgrade, with no remount (docs/reliability.md).
	Restarts      uint64 `json:"restarts"`
	KeeperPID     int    `json:"keeper_pid,omitempty"` // the keeper holding the mount's connection, if any
	HeapLiveBytes uint64 `json:"heap_live_bytes"`
	Goroutines    uint64 `json:"goroutines"`
	GCCycles      uint64 `json:"gc_cycles"`
}

// daemonStats reads DaemonStats from runtime/metrics.
func daemonStats(restarts uint64, keeper int) DaemonStats {
	m := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/sched/goroutines:goroutines"}, {Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(m)
	d := DaemonStats{PID: os.Getpid(), Restarts: restarts, KeeperPID: keeper}
	for i, v := range []*uint64{&d.HeapLiveBytes, &d.Goroutines, &d.GCCycles} {
		if m[i].Value.Kind() == metrics.KindUint64 {
			*v = m[i].Value.Uint64()
		}
	}
	return d
}

// Snapshot returns the current figures.
func (s *Stats) Snapshot() Snapshot { return s.snapshot(0) }

// snapshot returns the current figures, with the stall of the process of thread caller (the
// reader of the stats file; 0: none).
func (s *Stats) snapshot(caller uint32) Snapshot {
	f := s.f
	snap := Snapshot{
		Version: aifs.Version, PlanProtocol: plan.Protocol,
		Source: f.opt.Source, Mountpoint: f.opt.Mountpoint, KernelCache: f.opt.KernelCache.String(), DataPlane: f.opt.DataPlane,
		Started: s.started, UptimeSeconds: time.Since(s.started).Seconds(),
		Entries: f.x.Len(), Files: uint64(f.x.Files()), DatasetBytes: f.x.FileBytes(),
		ReadBytes: s.bytes.Load(), Ops: make(map[string]OpStats, numOps), Stats: f.loader.Stats(),
		Daemon: daemonStats(f.opt.Restarts, f.opt.KeeperPID), RWRemountsReverted: s.rwReverted.Load(),
	}
	snap.Index.Bytes, snap.Index.ReadBytes = f.x.Size()
	snap.Stall, _ = s.stall(caller)
	if err := f.x.Err(); err != nil {
		snap.Index.Error = err.Error()
	}
	if len(f.opt.Storage) > 0 {
		snap.Storage = make(map[string]any, len(f.opt.Storage))
		for name, get := range f.opt.Storage {
			snap.Storage[name] = get()
		}
	}
	for o := range numOps {
		c := &s.ops[o]
		q := c.lat.Quantiles(0.5, 0.99, 0.999)
		st := OpStats{Count: c.count.Load(), Errors: c.errors.Load(), P50us: q[0] / 1e3, P99us: q[1] / 1e3, P999us: q[2] / 1e3}
		snap.Ops[opNames[o]] = st
		snap.Requests += st.Count
		snap.Errors += st.Errors
	}
	return snap
}

// JSON returns the snapshot, with the stall of the process of thread caller, as indented JSON
// ending in a newline: the bytes of the stats file.
func (s *Stats) JSON(caller uint32) []byte {
	b, err := json.MarshalIndent(s.snapshot(caller), "", "  ")
	if err != nil {
		panic(err) // a Snapshot always encodes
	}
	return append(b, '\n')
}

// WritePrometheus writes the counters in the Prometheus text exposition format (version 0.0.4).
func (s *Stats) WritePrometheus(w io.Writer) error {
	p := &promWriter{w: w}
	p.header("aifs_requests_total", "counter", "FUSE requests answered, by op.")
	for o := range numOps {
		p.printf("aifs_requests_total{op=%q} %d\n", opNames[o], s.ops[o].count.Load())
	}
	p.header("aifs_request_errors_total", "counter", "FUSE requests answered with an error, by op.")
	for o := range numOps {
		p.printf("aifs_request_errors_total{op=%q} %d\n", opNames[o], s.ops[o].errors.Load())
	}
	p.header("aifs_request_duration_seconds", "summary", "Time to answer a FUSE request, by op.")
	for o := range numOps {
		c := &s.ops[o]
		qs := []float64{0.5, 0.99, 0.999}
		for i, v := range c.lat.Quantiles(qs...) {
			p.printf("aifs_request_duration_seconds{op=%q,quantile=\"%g\"} %g\n", opNames[o], qs[i], v/1e9)
		}
		p.printf("aifs_request_duration_seconds_sum{op=%q} %g\n", opNames[o], float64(c.sumNs.Load())/1e9)
		p.printf("aifs_request_duration_seconds_count{op=%q} %d\n", opNames[o], c.count.Load())
	}
	st, v := s.stall(0)
	p.header("aifs_blocked_seconds_total", "counter", "Seconds readers waited for aifs, summed over readers (FUSE plane: time answering LOOKUP, GETATTR, OPEN and READ; kernel plane: see aifs_stall_source).")
	p.printf("aifs_blocked_seconds_total %g\n", st.BlockedSeconds)
	p.header("aifs_stall_source", "gauge", "What aifs_blocked_seconds_total measures: 1 for the source in use (fuse, delayacct, psi, none).")
	for _, src := range []string{stallFUSE, stallDelayacct, stallPSI, stallNone} {
		p.printf("aifs_stall_source{source=%q} %d\n", src, b2i(src == st.Source))
	}
	// Per cgroup: the first cgroupSeries cgroups seen have series of their own, the rest are
	// summed as "other", so that the series are few and each only grows.
	series := map[string]*JobStall{}
	var names []string
	for _, c := range v.cgroups {
		name := c.Cgroup
		if !v.series[name] {
			name = otherCgroup
		}
		if series[name] == nil {
			series[name] = &JobStall{}
			names = append(names, name)
		}
		j := series[name]
		j.Requests += c.Requests
		j.Bytes += c.Bytes
		j.BlockedSeconds += c.BlockedSeconds
	}
	slices.Sort(names)
	for _, m := range []struct {
		name, help string
		value      func(*JobStall) string
	}{
		{"aifs_cgroup_blocked_seconds_total", "Seconds the readers of a cgroup waited for aifs (as aifs_blocked_seconds_total), exited readers included; the cgroups past the first 32 seen are summed as other.",
			func(j *JobStall) string { return strconv.FormatFloat(j.BlockedSeconds, 'g', -1, 64) }},
		{"aifs_cgroup_requests_total", "Requests of the readers of a cgroup that they blocked on (kernel plane: files closed).",
			func(j *JobStall) string { return strconv.FormatUint(j.Requests, 10) }},
		{"aifs_cgroup_read_bytes_total", "Bytes returned to the readers of a cgroup (kernel plane: sizes of the files closed).",
			func(j *JobStall) string { return strconv.FormatUint(j.Bytes, 10) }},
	} {
		p.header(m.name, "counter", m.help)
		for _, name := range names {
			p.printf("%s{cgroup=%q} %s\n", m.name, name, m.value(series[name]))
		}
	}
	l := s.f.loader.Stats()
	indexTotal, indexRead := s.f.x.Size()
	type metric struct {
		name, kind, help string
		value            uint64
	}
	ms := []metric{
		{"aifs_read_bytes_total", "counter", "Bytes returned by READ requests.", s.bytes.Load()},
		{"aifs_cache_hits_total", "counter", "Sample reads served from aifs's memory (cached or read ahead).", l.Cache.Hits},
		{"aifs_cache_misses_total", "counter", "Sample reads that had to wait for the backend.", l.Cache.Misses},
		{"aifs_backend_read_bytes_total", "counter", "Bytes read from the shards.", l.Backend.Bytes},
		{"aifs_backend_corrupt_total", "counter", "Samples whose checksum did not match the index (verify=on).", l.Backend.Corrupt},
		{"aifs_prefetch_used_bytes_total", "counter", "Bytes read ahead and then read.", l.Prefetch.UsedBytes},
		{"aifs_prefetch_wasted_bytes_total", "counter", "Bytes read ahead and let go unread.", l.Prefetch.WastedBytes},
		{"aifs_prefetch_arrived_total", "counter", "Samples put in the page cache as their chunk arrived from S3 (push_chunks).", l.Prefetch.Arrived},
		{"aifs_memory_bytes", "gauge", "Sample bytes held: kept subset and read-ahead.", uint64(l.Cache.KeptBytes + l.Prefetch.HeldBytes)},
		{"aifs_epoch", "gauge", "The current epoch, as detected from the reads.", uint64(l.Epoch.Number)},
		{"aifs_dataset_files", "gauge", "Sample files in the mounted shard set.", uint64(s.f.x.Files())},
		{"aifs_dataset_bytes", "gauge", "Bytes of sample data in the mounted shard set.", s.f.x.FileBytes()},
		{"aifs_index_bytes", "gauge", "Bytes of the mounted set's index file.", indexTotal},
		{"aifs_index_read_bytes", "gauge", "Bytes of the index read and checked so far (it is read as it is used).", indexRead},
	}
	if pc := l.PageCache; pc != nil {
		ms = append(ms,
			metric{"aifs_page_cache_budget_bytes", "gauge", "Bytes of sample pages aifs lets the page cache keep (page_cache).", uint64(pc.BudgetBytes)},
			metric{"aifs_page_cache_resident_bytes", "gauge", "Sample bytes aifs estimates in the page cache.", uint64(pc.ResidentBytes)},
			metric{"aifs_page_cache_drops_total", "counter", "Samples dropped from the page cache after their read.", pc.Drops},
			metric{"aifs_page_cache_pushes_refused_total", "counter", "Pushes into the page cache refused: outside the subset, past the window.", pc.PushesRefused},
			metric{"aifs_page_cache_kernel_evicted_total", "counter", "READs of samples aifs believed in the page cache: the kernel evicted them.", pc.KernelEvicted})
	}
	for _, m := range ms {
		p.header(m.name, m.kind, m.help)
		p.printf("%s %d\n", m.name, m.value)
	}
	// The storage figures (s3 requests, disk cache hits) as aifs_storage_NAME_FIELD, each field
	// of the JSON object its value encodes to.
	for _, name := range slices.Sorted(maps.Keys(s.f.opt.Storage)) {
		b, err := json.Marshal(s.f.opt.Storage[name]())
		var fields map[string]float64
		if err == nil {
			err = json.Unmarshal(b, &fields)
		}
		if err != nil {
			return fmt.Errorf("storage stats %s: %w", name, err)
		}
		for _, field := range slices.Sorted(maps.Keys(fields)) {
			metric := "aifs_storage_" + name + "_" + field
			p.header(metric, "untyped", "Storage figure "+name+"."+field+" (see the stats file).")
			p.printf("%s %g\n", metric, fields[field])
		}
	}
	return p.err
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// promWriter keeps the first write error.
type promWriter struct {
	w   io.Writer
	err error
}

func (p *promWriter) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

func (p *promWriter) header(name, kind, help string) {
	p.printf("# HELP %s %s\n# TYPE %s %s\n", name, help, name, kind)
}
