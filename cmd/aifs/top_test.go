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
	var b strings.Builder
	printTop(&b, prev, cur)
	for _, want := range []string{"requests  100/s", "read      4.0 MB/s returned", "hit 75.0%", "stall     0.75 reader-seconds"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("frame lacks %q:\n%s", want, b.String())
		}
	}
}
