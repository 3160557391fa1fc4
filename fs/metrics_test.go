package fs

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"go.uber.org/zap"

	"github.com/aifs/aifs/backend/faulty"
	"github.com/aifs/aifs/backend/memory"
)

// promValues parses the Prometheus text of s into values by series ("name{labels}"), checking
// that every series has a HELP and TYPE line before it.
func promValues(t *testing.T, s *Stats) map[string]float64 {
	t.Helper()
	var b bytes.Buffer
	if err := s.WritePrometheus(&b); err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	typed := map[string]bool{}
	sc := bufio.NewScanner(&b)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			typed[strings.Fields(rest)[0]] = true
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		name, _, _ := strings.Cut(line[:i], "{")
		base := strings.TrimSuffix(strings.TrimSuffix(name, "_sum"), "_count")
		if !typed[name] && !typed[base] {
			t.Errorf("series %s has no TYPE line before it", line[:i])
		}
		out[line[:i]] = v
	}
	return out
}

// TestMetricsStall: aifs_blocked_seconds_total is the stats file's stall.blocked_seconds (the
// FUSE plane's source, said by aifs_stall_source); aifs_cgroup_* split it by the readers'
// cgroups: this process's READs, with its pid, under its cgroup, and requests with no pid (from
// another pid namespace) under other. The cgroups sum to the mount's figures.
func TestMetricsStall(t *testing.T) {
	s := packTree(t, writeSourceTree)
	fb := faulty.New(memory.New(s.shards))
	f := s.serve(t, fb, Options{Logger: zap.NewNop()})
	const delay = 20 * time.Millisecond
	fb.Set(faulty.Rule{Op: faulty.Read, Delay: delay})
	pid := uint32(os.Getpid())
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatalf("no /proc/self/cgroup: %v", err)
	}
	mine := cgroupKey(cg)
	var reads uint64
	for _, p := range s.paths {
		if s.want[p].isDir() {
			continue
		}
		ino := lookupPath(t, f, p).NodeId // pid 0: other
		buf := make([]byte, 1<<20)
		res, st := f.Read(nil, &fuse.ReadIn{InHeader: fuse.InHeader{NodeId: ino, Caller: fuse.Caller{Pid: pid}}, Size: 1 << 20}, buf)
		if st != fuse.OK {
			t.Fatalf("read %s: %v", p, st)
		}
		res.Done()
		reads++
	}
	snap := f.stats.Snapshot()
	m := promValues(t, f.stats)
	if got := m["aifs_blocked_seconds_total"]; math.Abs(got-snap.Stall.BlockedSeconds) > 1e-9 || got < delay.Seconds() {
		t.Errorf("aifs_blocked_seconds_total %g, stats file %g; want equal and at least one injected %v", got, snap.Stall.BlockedSeconds, delay)
	}
	if m[`aifs_stall_source{source="fuse"}`] != 1 || m[`aifs_stall_source{source="delayacct"}`] != 0 || snap.Stall.Source != "fuse" {
		t.Errorf("stall source: metrics %v, stats %q; want fuse", m[`aifs_stall_source{source="fuse"}`], snap.Stall.Source)
	}
	mineSeries := fmt.Sprintf("{cgroup=%q}", mine)
	if got := m["aifs_cgroup_requests_total"+mineSeries]; got != float64(reads) {
		t.Errorf("aifs_cgroup_requests_total%s = %g, want the %d READs sent with this pid", mineSeries, got, reads)
	}
	if got := m["aifs_cgroup_blocked_seconds_total"+mineSeries]; got < delay.Seconds() {
		t.Errorf("aifs_cgroup_blocked_seconds_total%s = %g, want at least one injected %v", mineSeries, got, delay)
	}
	if m[`aifs_cgroup_requests_total{cgroup="other"}`] == 0 {
		t.Error(`aifs_cgroup_requests_total{cgroup="other"}: the LOOKUPs with no pid are not counted`)
	}
	var sum, bytes float64
	for k, v := range m {
		if strings.HasPrefix(k, "aifs_cgroup_blocked_seconds_total{") {
			sum += v
		}
		if strings.HasPrefix(k, "aifs_cgroup_read_bytes_total{") {
			bytes += v
		}
	}
	if math.Abs(sum-m["aifs_blocked_seconds_total"]) > 1e-6 || bytes != m["aifs_read_bytes_total"] {
		t.Errorf("cgroups sum to %g s and %g bytes, the mount %g s and %g bytes", sum, bytes, m["aifs_blocked_seconds_total"], m["aifs_read_bytes_total"])
	}
	var row *ReaderStall
	for i, r := range snap.Stall.Readers {
		if r.PID == pid {
			row = &snap.Stall.Readers[i]
		}
	}
	if row == nil || row.Requests != reads || row.Cgroup != mine || row.Comm == "" {
		t.Errorf("stats file readers %+v: want pid %d with %d requests in %s", snap.Stall.Readers, pid, reads, mine)
	}
}
