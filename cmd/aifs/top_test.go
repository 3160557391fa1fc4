package main

import (
	"strings"
	"testing"

	"github.com/aifs/aifs/fs"
)

// TestPrintTop: the rates of a frame are the differences of two snapshots over their time apart.
func TestPrintTop(t *testing.T) {
	var prev, cur fs.Snapshot
	prev.UptimeSeconds, cur.UptimeSeconds = 10, 12
	prev.Requests, cur.Requests = 100, 300
	prev.ReadBytes, cur.ReadBytes = 0, 8e6
	prev.Cache.Hits, cur.Cache.Hits = 10, 40
	prev.Cache.Misses, cur.Cache.Misses = 5, 15
	prev.Stall.BlockedSeconds, cur.Stall.BlockedSeconds = 1, 2.5
	prev.Stall.Readers = []fs.ReaderStall{{PID: 7, Comm: "pt_data_worker", Requests: 10, Bytes: 1e6, BlockedSeconds: 1}}
	cur.Stall.Readers = []fs.ReaderStall{
		{PID: 8, Comm: "python3", Cgroup: "/job", Requests: 4, Bytes: 2e6, BlockedSeconds: 0.1}, // new: from zero
		{PID: 7, Comm: "pt_data_worker", Cgroup: "/job", Requests: 110, Bytes: 5e6, BlockedSeconds: 2.2},
	}
	var b strings.Builder
	printTop(&b, prev, cur)
	for _, want := range []string{"requests  100/s", "read      4.0 MB/s returned", "hit 75.0%", "stall     0.75 reader-seconds",
		"7    pt_data_worker  50     2.0   60.0%  /job", "8    python3         2      1.0   5.0%   /job"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("frame lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Index(b.String(), "pt_data_worker") > strings.Index(b.String(), "python3") {
		t.Errorf("rows not most blocked first:\n%s", b.String())
	}
}
