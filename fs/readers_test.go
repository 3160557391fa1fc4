package fs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// fakeProc is a proc(5) tree in a directory: processes with a parent, start time, name, cgroup
// and threads.
type fakeProc struct {
	t   *testing.T
	dir string
}

func newFakeProc(t *testing.T) *fakeProc { return &fakeProc{t, t.TempDir()} }

// add writes process pid (threads tids besides itself) with parent ppid, started at start, in
// cgroup cg (a v1 memory cgroup), blocked on I/O for delay clock ticks in each thread.
func (p *fakeProc) add(pid, ppid uint32, start uint64, comm, cg string, delay uint64, tids ...uint32) {
	p.t.Helper()
	dir := filepath.Join(p.dir, strconv.Itoa(int(pid)))
	os.RemoveAll(dir)
	for _, tid := range append([]uint32{pid}, tids...) {
		status := fmt.Sprintf("Name:\t%s\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t%d\nPid:\t%d\nPPid:\t%d\n", comm, pid, tid, ppid)
		// 52 fields: pid (comm) state ppid ... starttime is 22, delayacct_blkio_ticks 42.
		f := make([]string, 52)
		for i := range f {
			f[i] = "0"
		}
		f[0], f[1], f[2], f[3], f[21], f[41] = strconv.Itoa(int(tid)), "("+comm+")", "S", strconv.Itoa(int(ppid)),
			strconv.FormatUint(start, 10), strconv.FormatUint(delay, 10)
		stat := ""
		for i, x := range f {
			if i > 0 {
				stat += " "
			}
			stat += x
		}
		for _, d := range []string{filepath.Join(p.dir, strconv.Itoa(int(tid))), filepath.Join(dir, "task", strconv.Itoa(int(tid)))} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				p.t.Fatal(err)
			}
			p.write(filepath.Join(d, "status"), status)
			p.write(filepath.Join(d, "stat"), stat+"\n")
			p.write(filepath.Join(d, "cgroup"), "5:devices:/\n4:memory:"+cg+"\n0::/\n")
		}
	}
}

func (p *fakeProc) write(name, data string) {
	if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// exit removes process pid and its threads.
func (p *fakeProc) exit(pid uint32, tids ...uint32) {
	for _, x := range append(tids, pid) {
		os.RemoveAll(filepath.Join(p.dir, strconv.Itoa(int(x))))
	}
}

func (p *fakeProc) table(delayacct bool) *readerTable {
	t := newReaderTable(delayacct)
	t.proc, t.self = p.dir, 1
	return t
}

func cgroupOf(v readerView, path string) JobStall {
	for _, c := range v.cgroups {
		if c.Cgroup == path {
			return c
		}
	}
	return JobStall{}
}

// TestReaderTableFolds: a trainer's two workers (one with a second thread) and another job's
// reader read; the trainer's tree and cgroup count its workers' and not the other job's. A
// worker that exits is folded at the second sweep after (not the first: a request may still be
// adding to it), and its figures stay in its trainer's tree and cgroup, as the table forgets it.
// From the first, its thread ids are free: a request of one of them (the id reused) is resolved
// anew.
func TestReaderTableFolds(t *testing.T) {
	p := newFakeProc(t)
	p.add(50, 10, 500, "python3", "/job/a", 0) // the trainer, child of a shell (10)
	p.add(10, 1, 100, "bash", "/job/a", 0)
	p.add(101, 50, 1010, "pt_data_worker", "/job/a", 0, 111)
	p.add(102, 50, 1020, "pt_data_worker", "/job/a", 0)
	p.add(200, 1, 2000, "python3", "/job/b", 0) // another job
	rt := p.table(false)
	for range 3 {
		rt.record(101, 100, 1e9)
		rt.record(111, 10, 1e9) // worker 101's second thread
		rt.record(102, 100, 2e9)
		rt.record(200, 100, 5e9)
	}
	v := rt.view(50)
	if v.caller == nil || v.caller.PID != 50 || v.caller.Cgroup != "/job/a" {
		t.Fatalf("caller %+v, want pid 50 in /job/a", v.caller)
	}
	want := JobStall{Readers: 2, Requests: 9, Bytes: 630, BlockedSeconds: 12}
	if v.caller.Tree != want {
		t.Errorf("tree of the trainer: %+v, want %+v", v.caller.Tree, want)
	}
	if c := cgroupOf(v, "/job/b"); c.BlockedSeconds != 15 || c.Requests != 3 {
		t.Errorf("the other job's cgroup: %+v, want 15 s in 3 requests", c)
	}
	if v.caller.InCg.BlockedSeconds != 12 {
		t.Errorf("trainer's cgroup: %+v, want 12 s", v.caller.InCg)
	}
	if v.tracked != 3 || len(v.readers) != 3 || v.readers[0].PID != 200 || v.readers[1].PID != 101 || v.readers[1].Comm != "pt_data_worker" {
		t.Errorf("readers %+v (%d tracked), want 200, 101, 102", v.readers, v.tracked)
	}

	p.exit(101, 111)
	rt.sweep(true)
	rt.record(111, 0, 1e9) // a request answered after it exited: the thread is gone, other's
	if v := rt.view(50); v.tracked != 3 || v.exited != 0 || cgroupOf(v, otherCgroup).BlockedSeconds != 1 {
		t.Errorf("after one sweep: %d tracked, %d exited, other %+v; want 3, 0 (folded at the next), 1 s",
			v.tracked, v.exited, cgroupOf(v, otherCgroup))
	}
	rt.sweep(true)
	v = rt.view(50)
	want = JobStall{Readers: 1, Requests: 9, Bytes: 630, BlockedSeconds: 12}
	if v.tracked != 2 || v.exited != 1 || v.caller.Tree != want {
		t.Errorf("after the worker exited: %d tracked, %d exited, tree %+v, want 2, 1, %+v", v.tracked, v.exited, v.caller.Tree, want)
	}
	if c := cgroupOf(v, "/job/a"); c.BlockedSeconds != 12 || c.Readers != 1 {
		t.Errorf("trainer's cgroup after the worker exited: %+v, want 12 s, 1 reader", c)
	}
	for _, tid := range []uint32{101, 111} {
		if _, ok := (*rt.threads[tid%readerShards].Load())[tid]; ok {
			t.Errorf("thread %d of the exited worker is still mapped", tid)
		}
	}
	if tree := rt.view(10).caller.Tree; tree.BlockedSeconds != 12 {
		t.Errorf("the shell's tree: %+v, want the trainer's 12 s", tree)
	}
	if tree := rt.view(200).caller.Tree; tree.BlockedSeconds != 15 {
		t.Errorf("the other job's tree: %+v, want 15 s", tree)
	}

	// Pid 102 is reused by a new process (another start time): a new reader, the old one folded.
	p.add(102, 1, 9999, "cat", "/job/b", 0)
	rt.record(102, 1, 1e9) // still mapped to the old reader until a sweep finds it gone
	rt.sweep(true)
	rt.sweep(true)
	rt.record(102, 1, 1e9)
	v = rt.view(50)
	if v.caller.Tree.BlockedSeconds != 13 {
		t.Errorf("trainer's tree after its worker's pid was reused: %+v, want 13 s", v.caller.Tree)
	}
	if c := cgroupOf(v, "/job/b"); c.BlockedSeconds != 16 {
		t.Errorf("/job/b after the reused pid read: %+v, want 16 s", c)
	}
}

// TestReaderTableBounds: past its bounds the table puts readers in the shared record (pid 0,
// cgroup other), merges cgroups that no live reader is in, and loses no time.
func TestReaderTableBounds(t *testing.T) {
	p := newFakeProc(t)
	rt := p.table(false)
	rt.limits = readerLimits{readers: 2, cgroups: 3, ancestors: 1, series: 1} // other + 2 cgroups
	for i := range uint32(4) {
		p.add(100+i, 1, uint64(i), "r", fmt.Sprintf("/cg%d", i), 0)
	}
	rt.record(100, 0, 1e9)
	rt.record(101, 0, 1e9)
	rt.record(102, 0, 1e9) // no room: other
	v := rt.view(0)
	if v.tracked != 2 || cgroupOf(v, otherCgroup).BlockedSeconds != 1 {
		t.Errorf("3 readers with room for 2: %d tracked, other %+v", v.tracked, cgroupOf(v, otherCgroup))
	}
	p.exit(101)
	rt.sweep(true)
	rt.sweep(true)
	rt.record(103, 0, 1e9) // a new cgroup: /cg1 (no reader left, no series) is merged into other
	v = rt.view(0)
	if len(v.cgroups) != 3 || cgroupOf(v, "/cg3").BlockedSeconds != 1 || cgroupOf(v, otherCgroup).BlockedSeconds != 2 {
		t.Errorf("cgroups %+v, want other (2 s), /cg0, /cg3", v.cgroups)
	}
	var sum float64
	for _, c := range v.cgroups {
		sum += c.BlockedSeconds
	}
	if sum != 4 || v.blocked != 4e9 {
		t.Errorf("cgroups sum to %g s, readers to %d ns, want 4 s", sum, v.blocked)
	}
	if !v.series["/cg0"] || v.series["/cg3"] {
		t.Errorf("series %v: want only the first cgroup seen", v.series)
	}
	// Pid 0 (a request from another pid namespace) is other's.
	rt.record(0, 0, 1e9)
	if r := rt.of(0); r != rt.other {
		t.Errorf("pid 0 mapped to %+v, want other", r)
	}
}

// TestReaderTableDelay: on the kernel plane a reader's blocked time is the growth of its
// threads' block-I/O delay since it was first seen, read at each sweep.
func TestReaderTableDelay(t *testing.T) {
	p := newFakeProc(t)
	p.add(300, 1, 1, "python3", "/job", 40, 301)
	rt := p.table(true)
	rt.seen(300, 1000)
	p.add(300, 1, 1, "python3", "/job", 90, 301) // 50 ticks more in each thread
	rt.sweep(true)
	v := rt.view(300)
	if v.caller.Tree.BlockedSeconds != 1 || v.caller.Tree.Requests != 1 || v.caller.Tree.Bytes != 1000 {
		t.Errorf("tree %+v, want 1 s (2×50 ticks), 1 file of 1000 bytes", v.caller.Tree)
	}
}

// TestReaderRecordNoAllocs: a request of a thread already seen allocates nothing.
func TestReaderRecordNoAllocs(t *testing.T) {
	rt := newReaderTable(false)
	pid := uint32(os.Getpid())
	rt.record(pid, 1, 1)
	if n := testing.AllocsPerRun(100, func() { rt.record(pid, 1, 1) }); n != 0 { // 101 runs
		t.Errorf("%v allocations per request, want 0", n)
	}
	v := rt.view(pid)
	b, _ := os.ReadFile("/proc/self/cgroup")
	if len(v.readers) != 1 || v.readers[0].PID != pid || v.caller.Cgroup != cgroupKey(b) || v.caller.Tree.Requests != 102 {
		t.Errorf("readers %+v, caller %+v: want this process, its cgroup %q, 102 requests", v.readers, v.caller, cgroupKey(b))
	}
}

func TestCgroupKey(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"9:name=systemd:/\n4:memory:/process_api/e97c\n0::/\n", "/process_api/e97c"}, // hybrid: v1 memory
		{"0::/kubepods.slice/pod1/cri-containerd-2.scope\n", "/kubepods.slice/pod1/cri-containerd-2.scope"},
		{"7:cpu,cpuacct:/a\n3:memory,hugetlb:/b\n", "/b"},
		{"1:name=systemd:/x\n", ""},
		{"", ""},
	} {
		if got := cgroupKey([]byte(c.in)); got != c.want {
			t.Errorf("cgroupKey(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestStatFields(t *testing.T) {
	f := statFields([]byte("42 (a) (b c)) S 7 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 12345 0\n"))
	if len(f) < statStart+1 || string(f[statPPid]) != "7" || string(f[statStart]) != "12345" {
		t.Errorf("fields %q: want ppid 7, start 12345", f)
	}
}
