package fs

import (
	"bytes"
	"cmp"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The reader table says which processes read the mount and how long each waited for aifs, so
// that a job (a cgroup, or a process and its descendants: a trainer and its DataLoader workers)
// learns its own data stall and not the mount's (docs/plan.md, "Data stall").
//
// A reader is a process, found by the pid of the thread in a request's header (or, on the
// kernel plane, by fanotify's pid: fs.Seen) and resolved once, on its first request, from
// /proc: its process (Tgid), parent, name, start time (which tells a reused pid) and cgroup, and
// the chain of its ancestors. Each request adds its time to its reader's counters: a lock-free
// read of a copy-on-write map and three atomic adds, no allocation, for a thread already seen.
//
// Nothing is lost when readers exit: a sweep (at most once a second, run by whoever comes:
// a stats snapshot, a new reader, the kernel plane's Seen; no goroutine of its own) finds the
// readers whose process is gone and, at the following sweep (so that a request still being
// answered has added its time), folds their counters into their cgroup's and into each of their
// ancestors', then forgets them. A job's figure is so the sum of its live readers and of what its
// exited ones left: a DataLoader's workers that exit at each epoch's end still count for the
// trainer that started them, for as long as it lives.
//
// A thread that exits leaves its mapping until a sweep finds it gone: a thread id the kernel
// hands to another process before then (pid_max is 32768 on many machines) counts for the old
// reader.
//
// Everything is bounded: maxReaders processes, maxCgroups cgroups, maxAncestors ancestors.
// Past a bound, readers go to a shared record (pid 0), cgroups that no live reader is in are
// merged into one (otherCgroup), and ancestors are not tracked.
const (
	readerShards = 64   // of the thread map, by thread id
	maxReaders   = 4096 // processes tracked at once
	maxCgroups   = 1024 // cgroups tracked
	maxAncestors = 4096 // ancestors tracked
	maxDepth     = 8    // ancestors of a reader tracked, nearest first
	cgroupSeries = 32   // cgroups with Prometheus series of their own; the rest are "other"
	topReaders   = 32   // readers listed in the stats file
	topCgroups   = 64   // cgroups listed in the stats file
	sweepEvery   = time.Second
)

// otherCgroup names the cgroup record of the readers aifs could not place (their cgroup could
// not be read, or the tables were full) and of the cgroups merged to keep the table bounded.
// Real cgroup paths start with "/".
const otherCgroup = "other"

// tally counts a reader's requests (on the kernel plane: the files it closed), the bytes they
// returned, and the nanoseconds it was blocked.
type tally struct{ requests, bytes, blockedNs atomic.Uint64 }

// totals are a tally's figures at one moment, or sums of them.
type totals struct{ requests, bytes, blockedNs uint64 }

func (t *totals) add(o totals) {
	t.requests += o.requests
	t.bytes += o.bytes
	t.blockedNs += o.blockedNs
}

// procID names a process for its whole life: a pid is reused, a pid and start time are not.
type procID struct {
	pid   uint32
	start uint64 // clock ticks after boot (/proc/PID/stat field 22)
}

// reader is one process reading the mount.
type reader struct {
	tally
	id   procID
	ppid uint32
	comm string
	cg   *cgroupTally
	up   []*ancestor // tracked ancestors, nearest first

	// Guarded by readerTable.mu.
	tids []uint32 // the threads mapped to it
	dead bool     // a sweep found it gone; the next folds it

	// The kernel plane's block-I/O delay (delayacct), guarded by readerTable.sweepMu: per
	// thread the last figure read, in clock ticks, and the sum when first seen.
	delay     map[uint32]uint64
	delayBase uint64
}

// cgroupTally is a cgroup's figures: its live readers' are summed when asked, exited is what
// its readers left when they exited. Guarded by readerTable.mu.
type cgroupTally struct {
	path   string
	live   int
	exited totals
	series bool // has Prometheus series of its own (given at creation, never taken back)
}

// ancestor is a process that readers descend from, with what its exited descendants left.
// Guarded by readerTable.mu.
type ancestor struct {
	id     procID
	refs   int // live readers descending from it
	exited totals
}

// readerTable is the table of the mount's readers. The thread map is read without a lock;
// everything else is guarded by mu. sweepMu serializes sweeps and guards the delay figures; it
// is taken before mu.
type readerTable struct {
	threads [readerShards]atomic.Pointer[map[uint32]*reader] // by thread id; copy-on-write under mu

	sweepMu   sync.Mutex
	lastSweep atomic.Int64 // UnixNano
	self      uint32       // the daemon's pid

	mu        sync.Mutex
	procs     map[uint32]*reader // by pid
	cgroups   map[string]*cgroupTally
	ancestors map[uint32]*ancestor // by pid
	other     *reader              // pid 0: readers that could not be placed
	series    int                  // cgroups given series
	exited    uint64               // readers folded

	delayacct bool   // the kernel plane: blocked time is the readers' block-I/O delay
	proc      string // where proc(5) is mounted
	limits    readerLimits
}

// readerLimits bound a readerTable (tests set smaller ones).
type readerLimits struct{ readers, cgroups, ancestors, series int }

func newReaderTable(delayacct bool) *readerTable {
	t := &readerTable{procs: map[uint32]*reader{}, cgroups: map[string]*cgroupTally{}, ancestors: map[uint32]*ancestor{},
		self: uint32(os.Getpid()), delayacct: delayacct, proc: "/proc",
		limits: readerLimits{readers: maxReaders, cgroups: maxCgroups, ancestors: maxAncestors, series: cgroupSeries}}
	for i := range t.threads {
		t.threads[i].Store(&map[uint32]*reader{})
	}
	t.other = &reader{comm: otherCgroup, cg: t.cgroup(otherCgroup)}
	return t
}

// record adds a request of thread tid that returned n bytes and took d nanoseconds.
func (t *readerTable) record(tid uint32, n int, d uint64) {
	r := t.of(tid)
	r.requests.Add(1)
	r.bytes.Add(uint64(n))
	r.blockedNs.Add(d)
}

// of returns the reader of thread tid, adding it on its first request.
func (t *readerTable) of(tid uint32) *reader {
	if r := (*t.threads[tid%readerShards].Load())[tid]; r != nil {
		return r
	}
	return t.add(tid)
}

// procInfo is what add reads from /proc about a new thread's process.
type procInfo struct {
	id        procID
	ppid      uint32
	comm      string
	cgroup    string
	ancestors []procID
	delay     map[uint32]uint64
}

// add maps thread tid to its reader, resolving its process from /proc. A thread that cannot be
// resolved (pid 0: a process in another pid namespace; one gone already) is mapped to other.
func (t *readerTable) add(tid uint32) *reader {
	info, ok := t.resolve(tid, t.delayacct)
	t.mu.Lock()
	full := len(t.procs) >= t.limits.readers*3/4
	t.mu.Unlock()
	if full { // make room: fold the readers gone (else no one may, till the stats are read)
		t.sweep(false)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.threads[tid%readerShards].Load()
	if r := (*m)[tid]; r != nil {
		return r // another request added it meanwhile
	}
	r := t.other
	if ok {
		r = t.procs[info.id.pid]
		if r != nil && r.id != info.id { // the pid's old process is gone
			t.fold(r)
			r = nil
		}
		if r == nil && len(t.procs) < t.limits.readers {
			r = t.newReader(info)
		} else if r == nil {
			r = t.other
		}
	}
	r.tids = append(r.tids, tid)
	m2 := maps.Clone(*t.threads[tid%readerShards].Load()) // fold may have changed it
	m2[tid] = r
	t.threads[tid%readerShards].Store(&m2)
	return r
}

// newReader adds the process of info. Called with mu held.
func (t *readerTable) newReader(info procInfo) *reader {
	r := &reader{id: info.id, ppid: info.ppid, comm: info.comm, cg: t.cgroup(info.cgroup), delay: info.delay}
	for _, d := range info.delay {
		r.delayBase += d
	}
	r.cg.live++
	for _, id := range info.ancestors {
		a := t.ancestors[id.pid]
		if a == nil || a.id != id {
			if a != nil && a.refs > 0 { // readers of the old process still hold it: leave it to them
				continue
			}
			if len(t.ancestors) >= t.limits.ancestors {
				continue
			}
			a = &ancestor{id: id}
			t.ancestors[id.pid] = a
		}
		a.refs++
		r.up = append(r.up, a)
	}
	t.procs[r.id.pid] = r
	return r
}

// cgroup returns the record of cgroup path, adding it. A full table first merges the cgroup
// without live readers and the least blocked time into otherCgroup; if there is none, the new
// cgroup's readers go to otherCgroup. Called with mu held (or before t is shared).
func (t *readerTable) cgroup(path string) *cgroupTally {
	if c := t.cgroups[path]; c != nil {
		return c
	}
	if len(t.cgroups) >= t.limits.cgroups {
		var least *cgroupTally
		for _, c := range t.cgroups {
			if c.live == 0 && !c.series && c.path != otherCgroup && (least == nil || c.exited.blockedNs < least.exited.blockedNs) {
				least = c
			}
		}
		other := t.cgroups[otherCgroup]
		if least == nil {
			return other
		}
		other.exited.add(least.exited)
		delete(t.cgroups, least.path)
	}
	c := &cgroupTally{path: path, series: t.series < t.limits.series || path == otherCgroup}
	if c.series && path != otherCgroup {
		t.series++
	}
	t.cgroups[path] = c
	return c
}

// fold moves dead reader r's figures into its cgroup and ancestors and forgets it. Called with
// mu held.
func (t *readerTable) fold(r *reader) {
	tot := r.totals()
	r.cg.exited.add(tot)
	r.cg.live--
	for _, a := range r.up {
		a.exited.add(tot)
		a.refs--
	}
	if t.procs[r.id.pid] == r {
		delete(t.procs, r.id.pid)
	}
	t.unmap(r.tids)
	r.tids = nil
	t.exited++
}

// unmap removes threads tids from the thread map. Called with mu held.
func (t *readerTable) unmap(tids []uint32) {
	for _, tid := range tids {
		s := &t.threads[tid%readerShards]
		m := maps.Clone(*s.Load())
		delete(m, tid)
		s.Store(&m)
	}
}

// totals returns r's figures now. On the kernel plane, its blocked time is the block-I/O delay
// that the last sweep read (readDelay).
func (r *reader) totals() totals {
	return totals{requests: r.requests.Load(), bytes: r.bytes.Load(), blockedNs: r.blockedNs.Load()}
}

// sweep, at most once per sweepEvery unless force, folds the readers that a previous sweep found
// gone, marks those gone now (and drops their threads' mappings), drops the mappings of other
// threads gone, forgets ancestors gone
// with no reader left, and on the kernel plane reads each reader's block-I/O delay. It reads
// /proc without holding mu.
func (t *readerTable) sweep(force bool) {
	now := time.Now().UnixNano()
	if !force && now-t.lastSweep.Load() < int64(sweepEvery) {
		return
	}
	if force {
		t.sweepMu.Lock()
	} else if !t.sweepMu.TryLock() {
		return
	}
	defer t.sweepMu.Unlock()
	t.lastSweep.Store(now)

	t.mu.Lock()
	rs := slices.Collect(maps.Values(t.procs))
	tids := make(map[*reader][]uint32, len(rs))
	for _, r := range rs {
		tids[r] = slices.Clone(r.tids)
	}
	otherTids := slices.Clone(t.other.tids)
	var idle []*ancestor
	for _, a := range t.ancestors {
		if a.refs == 0 {
			idle = append(idle, a)
		}
	}
	t.mu.Unlock()

	gone := map[*reader]bool{}
	var goneTids []uint32
	for _, r := range rs {
		if !t.alive(r.id) {
			gone[r] = true
			continue
		}
		for _, tid := range tids[r] {
			if tid != r.id.pid && !t.exists(r.id.pid, tid) {
				goneTids = append(goneTids, tid)
			}
		}
		if t.delayacct {
			t.readDelay(r)
		}
	}
	for _, tid := range otherTids {
		if tid != 0 && !t.exists(tid, tid) {
			goneTids = append(goneTids, tid)
		}
	}
	var goneAnc []*ancestor
	for _, a := range idle {
		if !t.alive(a.id) {
			goneAnc = append(goneAnc, a)
		}
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range rs {
		switch {
		case r.dead:
			t.fold(r)
		case gone[r]: // its thread ids may be reused at once: a new thread of theirs is resolved anew
			r.dead = true
			t.unmap(r.tids)
			r.tids = nil
		}
	}
	owner := map[uint32]*reader{}
	for _, tid := range goneTids {
		if r := (*t.threads[tid%readerShards].Load())[tid]; r != nil && (r == t.other || !r.dead) {
			owner[tid] = r
		}
	}
	for tid, r := range owner {
		r.tids = slices.DeleteFunc(r.tids, func(x uint32) bool { return x == tid })
		t.unmap([]uint32{tid})
	}
	for _, a := range goneAnc {
		if a.refs == 0 && t.ancestors[a.id.pid] == a {
			delete(t.ancestors, a.id.pid)
		}
	}
}

// sampleDelays reads the block-I/O delay of every live reader.
func (t *readerTable) sampleDelays() {
	t.sweepMu.Lock()
	defer t.sweepMu.Unlock()
	t.mu.Lock()
	rs := slices.Collect(maps.Values(t.procs))
	t.mu.Unlock()
	for _, r := range rs {
		t.readDelay(r)
	}
}

// readDelay reads reader r's block-I/O delay (each thread's, /proc/PID/task/TID/stat field 42,
// delayacct_blkio_ticks) and stores its growth since r was first seen as r's blocked time. A
// thread that exited keeps its last figure. Called with sweepMu held.
func (t *readerTable) readDelay(r *reader) {
	for tid, d := range t.taskDelays(r.id.pid) {
		r.delay[tid] = d
	}
	var sum uint64
	for _, d := range r.delay {
		sum += d
	}
	if sum > r.delayBase {
		r.blockedNs.Store((sum - r.delayBase) * uint64(time.Second) / clockTicks)
	}
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every Linux architecture
// aifs builds for.
const clockTicks = 100

// taskDelays returns the block-I/O delay of each thread of process pid, in clock ticks.
func (t *readerTable) taskDelays(pid uint32) map[uint32]uint64 {
	dir := t.proc + "/" + strconv.FormatUint(uint64(pid), 10) + "/task"
	ents, err := os.ReadDir(dir)
	out := make(map[uint32]uint64, len(ents))
	if err != nil {
		return out
	}
	for _, e := range ents {
		tid, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil {
			continue
		}
		b, err := os.ReadFile(dir + "/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		if f := statFields(b); len(f) > statDelay {
			if d, err := strconv.ParseUint(string(f[statDelay]), 10, 64); err == nil {
				out[uint32(tid)] = d
			}
		}
	}
	return out
}

// Fields of /proc/PID/stat after the name, counted from 0 at field 3 (state).
const (
	statPPid  = 1  // field 4
	statStart = 19 // field 22, starttime
	statDelay = 39 // field 42, delayacct_blkio_ticks
)

// statFields splits /proc/PID/stat after its "(comm)", which may hold spaces and parentheses.
func statFields(b []byte) [][]byte {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return bytes.Fields(b[i+1:])
}

// stat reads process (or thread) pid's parent and start time from /proc/PID/stat.
func (t *readerTable) stat(pid uint32) (ppid uint32, start uint64, ok bool) {
	b, err := os.ReadFile(t.proc + "/" + strconv.FormatUint(uint64(pid), 10) + "/stat")
	f := statFields(b)
	if err != nil || len(f) <= statStart {
		return 0, 0, false
	}
	p, err1 := strconv.ParseUint(string(f[statPPid]), 10, 32)
	s, err2 := strconv.ParseUint(string(f[statStart]), 10, 64)
	return uint32(p), s, err1 == nil && err2 == nil
}

// alive reports whether process id still runs (a zombie counts as gone: it reads no more).
func (t *readerTable) alive(id procID) bool {
	b, err := os.ReadFile(t.proc + "/" + strconv.FormatUint(uint64(id.pid), 10) + "/stat")
	f := statFields(b)
	if err != nil || len(f) <= statStart || string(f[0]) == "Z" || string(f[0]) == "X" {
		return false
	}
	s, err := strconv.ParseUint(string(f[statStart]), 10, 64)
	return err == nil && s == id.start
}

// exists reports whether thread tid of process pid exists.
func (t *readerTable) exists(pid, tid uint32) bool {
	_, err := os.Stat(t.proc + "/" + strconv.FormatUint(uint64(pid), 10) + "/task/" + strconv.FormatUint(uint64(tid), 10))
	return err == nil
}

// resolve reads thread tid's process from /proc: its pid (Tgid), name, parent, start time,
// cgroup and ancestors, and with delays its threads' block-I/O delay.
func (t *readerTable) resolve(tid uint32, delays bool) (procInfo, bool) {
	var info procInfo
	if tid == 0 {
		return info, false
	}
	b, err := os.ReadFile(t.proc + "/" + strconv.FormatUint(uint64(tid), 10) + "/status")
	if err != nil {
		return info, false
	}
	for line := range bytes.Lines(b) {
		k, v, _ := bytes.Cut(bytes.TrimSpace(line), []byte(":"))
		v = bytes.TrimSpace(v)
		switch string(k) {
		case "Name":
			info.comm = string(v)
		case "Tgid":
			if n, err := strconv.ParseUint(string(v), 10, 32); err == nil {
				info.id.pid = uint32(n)
			}
		}
	}
	var ok bool
	if info.id.pid == 0 {
		return info, false
	}
	if info.ppid, info.id.start, ok = t.stat(info.id.pid); !ok {
		return info, false
	}
	cg, err := os.ReadFile(t.proc + "/" + strconv.FormatUint(uint64(info.id.pid), 10) + "/cgroup")
	if info.cgroup = cgroupKey(cg); err != nil || info.cgroup == "" {
		info.cgroup = otherCgroup
	}
	for p := info.ppid; p > 1 && len(info.ancestors) < maxDepth && p != t.self; {
		pp, start, ok := t.stat(p)
		if !ok {
			break
		}
		info.ancestors = append(info.ancestors, procID{p, start})
		p = pp
	}
	if delays {
		info.delay = t.taskDelays(info.id.pid)
	}
	return info, true
}

// cgroupKey returns the cgroup that names a reader's job, from its /proc/PID/cgroup: the memory
// controller's where that controller is on cgroup v1 (hybrid and v1 machines, where container
// runtimes and Kubernetes give every container a memory cgroup), else the unified hierarchy's
// (cgroup v2). internal/memlimit picks the same. "" if there is neither.
func cgroupKey(b []byte) string {
	var v2 string
	for line := range bytes.Lines(b) {
		parts := bytes.SplitN(bytes.TrimSpace(line), []byte(":"), 3)
		if len(parts) != 3 {
			continue
		}
		if bytes.Contains(append(append([]byte(","), parts[1]...), ','), []byte(",memory,")) {
			return string(parts[2])
		}
		if string(parts[0]) == "0" && len(parts[1]) == 0 {
			v2 = string(parts[2])
		}
	}
	return v2
}

// ReaderStall is one reader in the stats file: a process reading the mount, with its requests
// (on the kernel plane: the files it closed), the bytes they returned (kernel plane: those
// files' sizes) and the seconds it was blocked.
type ReaderStall struct {
	PID            uint32  `json:"pid"` // 0: the readers aifs could not place
	PPID           uint32  `json:"ppid"`
	Comm           string  `json:"comm"`
	Cgroup         string  `json:"cgroup"`
	Requests       uint64  `json:"requests"`
	Bytes          uint64  `json:"bytes"`
	BlockedSeconds float64 `json:"blocked_seconds"`
}

// JobStall is a job's figures: a cgroup's, or a process tree's. Readers counts the live ones.
type JobStall struct {
	Cgroup         string  `json:"cgroup,omitempty"`
	Readers        int     `json:"readers"`
	Requests       uint64  `json:"requests"`
	Bytes          uint64  `json:"bytes"`
	BlockedSeconds float64 `json:"blocked_seconds"`
}

// CallerStall is the process reading the stats file, as aifs.stall uses it: its pid and cgroup,
// the figures of its process tree (itself and its descendants, those that exited included) and
// of its cgroup.
type CallerStall struct {
	PID    uint32   `json:"pid"`
	Cgroup string   `json:"cgroup"`
	Tree   JobStall `json:"tree"`
	InCg   JobStall `json:"cgroup_totals"`
}

func (j *JobStall) add(t totals) {
	j.Requests += t.requests
	j.Bytes += t.bytes
	j.BlockedSeconds += float64(t.blockedNs) / 1e9
}

// readerView is what a snapshot takes of the table.
type readerView struct {
	readers  []ReaderStall // the topReaders most blocked live readers
	cgroups  []JobStall    // every cgroup, most blocked first
	series   map[string]bool
	tracked  int
	exited   uint64
	blocked  uint64 // ns, every reader's, live and exited
	caller   *CallerStall
	rowsOver int // live readers not listed
}

// view sweeps and returns the table's figures, with those of the process of thread caller (0:
// none). On the kernel plane it first reads every live reader's delay, so that the figures
// are those of now and not of the last sweep.
func (t *readerTable) view(caller uint32) readerView {
	t.sweep(false)
	if t.delayacct {
		t.sampleDelays()
	}
	var ci procInfo
	var cok bool
	if caller != 0 {
		ci, cok = t.resolve(caller, false)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	v := readerView{series: map[string]bool{}, tracked: len(t.procs), exited: t.exited}
	byCg := map[*cgroupTally]*JobStall{}
	for _, c := range t.cgroups {
		j := &JobStall{Cgroup: c.path, Readers: c.live}
		j.add(c.exited)
		byCg[c] = j
		v.series[c.path] = c.series
		v.blocked += c.exited.blockedNs
	}
	var tree JobStall
	live := append(slices.Collect(maps.Values(t.procs)), t.other)
	for _, r := range live {
		tot := r.totals()
		byCg[r.cg].add(tot)
		v.blocked += tot.blockedNs
		if r == t.other && tot.requests == 0 {
			continue
		}
		v.readers = append(v.readers, ReaderStall{PID: r.id.pid, PPID: r.ppid, Comm: r.comm, Cgroup: r.cg.path,
			Requests: tot.requests, Bytes: tot.bytes, BlockedSeconds: float64(tot.blockedNs) / 1e9})
		if cok && r.inTree(ci.id) {
			tree.add(tot)
			tree.Readers++
		}
	}
	for _, j := range byCg {
		v.cgroups = append(v.cgroups, *j)
	}
	slices.SortFunc(v.cgroups, func(a, b JobStall) int {
		return cmp.Or(cmp.Compare(b.BlockedSeconds, a.BlockedSeconds), cmp.Compare(a.Cgroup, b.Cgroup))
	})
	slices.SortFunc(v.readers, func(a, b ReaderStall) int {
		return cmp.Or(cmp.Compare(b.BlockedSeconds, a.BlockedSeconds), cmp.Compare(a.PID, b.PID))
	})
	if len(v.readers) > topReaders {
		v.rowsOver = len(v.readers) - topReaders
		v.readers = v.readers[:topReaders]
	}
	if cok {
		if a := t.ancestors[ci.id.pid]; a != nil && a.id == ci.id {
			tree.add(a.exited)
		}
		c := &CallerStall{PID: ci.id.pid, Cgroup: ci.cgroup, Tree: tree}
		if cg := t.cgroups[ci.cgroup]; cg != nil {
			c.InCg = *byCg[cg]
		} else {
			c.InCg = JobStall{Cgroup: ci.cgroup}
		}
		v.caller = c
	}
	return v
}

// inTree reports whether r is process id or one of its descendants.
func (r *reader) inTree(id procID) bool {
	if r.id == id {
		return true
	}
	for _, a := range r.up {
		if a.id == id {
			return true
		}
	}
	return false
}

// seen records that process pid closed a file of size bytes after reading it on the kernel
// plane (FS.Seen), and sweeps if one is due: the block-I/O delays are read as the files are.
func (t *readerTable) seen(pid uint32, size uint64) {
	r := t.of(pid)
	r.requests.Add(1)
	r.bytes.Add(size)
	t.sweep(false)
}
