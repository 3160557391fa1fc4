package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/aifs/aifs/fs"
	"github.com/aifs/aifs/internal/human"
)

func runTop(ctx context.Context, args []string) int {
	flags := newFlags("top", "[flags] MOUNTPOINT", `
Shows the aifs mount at MOUNTPOINT live, as top does: each interval, the requests and bytes
per second READ returned, the fraction of sample reads served from aifs's memory, the memory
and page-cache budgets, and the data stall: the seconds per second that readers spent blocked
in aifs (FUSE plane: LOOKUP, GETATTR, OPEN, READ; kernel plane: the source the stats name;
2.0 means two readers blocked all the time). Then one row per reader process, most blocked
first: its pid, name and cgroup, its requests (kernel plane: files read) and MB per second,
and its stall, the share of the interval it spent blocked.`)
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
	fmt.Fprintf(w, "stall     %.2f reader-seconds blocked per second (%s); %d readers, %d exited\n",
		(cur.Stall.BlockedSeconds-prev.Stall.BlockedSeconds)/dt, stallSourceOf(cur.Stall), cur.Stall.ReadersTracked, cur.Stall.ReadersExited)
	printReaderRates(w, prev.Stall.Readers, cur.Stall.Readers, dt)
}

// topRows is the most reader rows a frame shows.
const topRows = 20

// printReaderRates writes a row per reader of cur, with its rates since prev (a reader not in
// prev counts from zero), most blocked first.
func printReaderRates(w io.Writer, prev, cur []fs.ReaderStall, dt float64) {
	type row struct {
		r                fs.ReaderStall
		req, mb, blocked float64
	}
	before := make(map[uint32]fs.ReaderStall, len(prev))
	for _, r := range prev {
		before[r.PID] = r
	}
	rows := make([]row, 0, len(cur))
	for _, r := range cur {
		p, ok := before[r.PID]
		if !ok || p.Comm != r.Comm || p.Requests > r.Requests {
			p = fs.ReaderStall{}
		}
		rows = append(rows, row{r, float64(r.Requests-p.Requests) / dt, float64(r.Bytes-p.Bytes) / dt / 1e6,
			(r.BlockedSeconds - p.BlockedSeconds) / dt})
	}
	if len(rows) == 0 {
		return
	}
	slices.SortStableFunc(rows, func(a, b row) int { return cmp.Compare(b.blocked, a.blocked) })
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "PID\tCOMMAND\tREQ/S\tMB/S\tSTALL\tCGROUP\n")
	for _, r := range rows[:min(len(rows), topRows)] {
		fmt.Fprintf(tw, "%d\t%s\t%.0f\t%.1f\t%.1f%%\t%s\n", r.r.PID, r.r.Comm, r.req, r.mb, 100*r.blocked, r.r.Cgroup)
	}
	tw.Flush()
}

// stallSourceOf says in words what a snapshot's stall figures measure.
func stallSourceOf(s fs.StallStats) string {
	switch s.Source {
	case "delayacct":
		return "delayacct: the readers' block-I/O delay"
	case "psi":
		return "psi: the machine's I/O pressure, not per reader; sysctl kernel.task_delayacct=1 for readers"
	case "none":
		return "none: no delay accounting, no PSI"
	}
	return "fuse: time in lookup, getattr, open and read"
}
