package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/aifs/aifs/fs"
	"github.com/aifs/aifs/internal/human"
)

func runTop(ctx context.Context, args []string) int {
	flags := newFlags("top", "[flags] MOUNTPOINT", `
Shows the aifs mount at MOUNTPOINT live, as top does: each interval, the requests and bytes
per second READ returned, the fraction of sample reads served from aifs's memory, the memory
and page-cache budgets, and the data stall: the seconds per second that readers spent blocked
in aifs (LOOKUP, GETATTR, OPEN, READ; 2.0 means two readers blocked all the time). Figures are
the mount's, over all its readers.`)
	interval := flags.Duration("interval", time.Second, "time between refreshes")
	count := flags.Int("n", 0, "refreshes before exiting (0: until interrupted)")
	pos, code, ok := parseArgs(flags, args, 1, 1)
	if !ok {
		return code
	}
	if *interval <= 0 {
		return fail("top", fmt.Errorf("-interval %v must be positive", *interval))
	}
	prev, _, err := readSnapshot(pos[0])
	if err != nil {
		return fail("top", err)
	}
	clear := "\x1b[H\x1b[2J"
	if fi, err := os.Stdout.Stat(); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		clear = "" // not a terminal: one frame after another
	}
	t := time.NewTicker(*interval)
	defer t.Stop()
	for i := 0; *count == 0 || i < *count; i++ {
		select {
		case <-ctx.Done():
			return exitOK
		case <-t.C:
		}
		cur, _, err := readSnapshot(pos[0])
		if err != nil {
			return fail("top", err)
		}
		fmt.Fprint(os.Stdout, clear)
		printTop(os.Stdout, prev, cur)
		prev = cur
	}
	return exitOK
}

// printTop writes one frame: the rates between snapshots prev and cur.
func printTop(w io.Writer, prev, cur fs.Snapshot) {
	dt := cur.UptimeSeconds - prev.UptimeSeconds
	if dt <= 0 {
		dt = 1e-9
	}
	rate := func(a, b uint64) float64 { return float64(b-a) / dt }
	hits, misses := cur.Cache.Hits-prev.Cache.Hits, cur.Cache.Misses-prev.Cache.Misses
	hit := "-"
	if hits+misses > 0 {
		hit = fmt.Sprintf("%.1f%%", 100*float64(hits)/float64(hits+misses))
	}
	fmt.Fprintf(w, "aifs top  %s  up %s  epoch %d  data plane %s\n", human.Name(cur.Mountpoint),
		time.Duration(cur.UptimeSeconds*1e9).Round(time.Second), cur.Epoch.Number, cur.DataPlane.Plane)
	fmt.Fprintf(w, "requests  %.0f/s (read %.0f/s), %.0f errors/s\n", rate(prev.Requests, cur.Requests),
		rate(prev.Ops["read"].Count, cur.Ops["read"].Count), rate(prev.Errors, cur.Errors))
	fmt.Fprintf(w, "read      %.1f MB/s returned, %.1f MB/s from the shards\n", rate(prev.ReadBytes, cur.ReadBytes)/1e6,
		rate(prev.Backend.Bytes, cur.Backend.Bytes)/1e6)
	fmt.Fprintf(w, "memory    hit %s; %s held\n", hit, human.Bytes(cur.Cache.KeptBytes+cur.Prefetch.HeldBytes))
	if pc := cur.PageCache; pc != nil {
		fmt.Fprintf(w, "budget    page cache %s (%s), %s resident\n", human.Bytes(pc.BudgetBytes), pc.Source, human.Bytes(pc.ResidentBytes))
	}
	fmt.Fprintf(w, "stall     %.2f reader-seconds blocked per second\n", (cur.Stall.BlockedSeconds-prev.Stall.BlockedSeconds)/dt)
}
