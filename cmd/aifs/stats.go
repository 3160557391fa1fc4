package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aifs/aifs/fs"
	"github.com/aifs/aifs/internal/human"
	"github.com/aifs/aifs/plan"
)

func runStats(ctx context.Context, args []string) int {
	flags := newFlags("stats", "[flags] MOUNTPOINT", `
Prints the statistics of the aifs mount at MOUNTPOINT, read from MOUNTPOINT/.aifs/stats: the
dataset; aifs's memory (hits, misses, bytes kept), reads from the shards, read-ahead, the epoch
and each plan's progress; the data stall (the time readers were blocked, and its source), per
cgroup and per reader process, most blocked first; and per kind of FUSE request the count, the
errors and the latency percentiles.`)
	asJSON := flags.Bool("json", false, "print the stats file as it is (JSON)")
	pos, code, ok := parseArgs(flags, args, 1, 1)
	if !ok {
		return code
	}
	s, b, err := readSnapshot(pos[0])
	if *asJSON && b != nil {
		os.Stdout.Write(b)
		return exitOK
	}
	if err != nil {
		return fail("stats", err)
	}
	printStats(os.Stdout, s)
	return exitOK
}

// readSnapshot reads the stats file of the mount at mnt (either data plane) and returns it
// decoded and as it is (nil if it could not be read).
func readSnapshot(mnt string) (fs.Snapshot, []byte, error) {
	var s fs.Snapshot
	b, err := os.ReadFile(filepath.Join(plan.Control(mnt), "stats"))
	if err != nil {
		return s, nil, fmt.Errorf("%s is not an aifs mount? %w", mnt, err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, b, fmt.Errorf("%s/.aifs/stats: %w", mnt, err)
	}
	return s, b, nil
}

// The most cgroups and readers printStats lists, most blocked first.
const statsCgroups, statsReaders = 5, 10

// printStats writes s for people: a header, then one row per kind of request that occurred.
func printStats(w io.Writer, s fs.Snapshot) {
	fmt.Fprintf(w, "source        %s\n", human.Name(s.Source))
	fmt.Fprintf(w, "mountpoint    %s\n", human.Name(s.Mountpoint))
	fmt.Fprintf(w, "up            %s (since %s)\n", time.Duration(s.UptimeSeconds*1e9).Round(time.Second).String(), s.Started.Format(time.RFC3339))
	fmt.Fprintf(w, "kernel cache  %s\n", s.KernelCache)
	if s.DataPlane.Plane != "" {
		fmt.Fprintf(w, "data plane    %s (%s)\n", s.DataPlane.Plane, s.DataPlane.Reason)
	}
	if s.Daemon.Restarts > 0 {
		fmt.Fprintf(w, "restarts      %d daemons served this mount before pid %d (the keeper's restarts and upgrades)\n", s.Daemon.Restarts, s.Daemon.PID)
	}
	fmt.Fprintf(w, "daemon        %s live Go heap (after %d collections), %d goroutines\n", human.Bytes(int64(s.Daemon.HeapLiveBytes)), s.Daemon.GCCycles, s.Daemon.Goroutines)
	if s.RWRemountsReverted > 0 {
		fmt.Fprintf(w, "read-only     %d read-write remounts undone\n", s.RWRemountsReverted)
	}
	fmt.Fprintf(w, "dataset       %d files, %s\n", s.Files, human.Bytes(int64(s.DatasetBytes)))
	fmt.Fprintf(w, "index         %s of %s read (as the tree is used)", human.Bytes(int64(s.Index.ReadBytes)), human.Bytes(int64(s.Index.Bytes)))
	if s.Index.Error != "" {
		fmt.Fprintf(w, "; corrupt: %s", s.Index.Error)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "requests      %d, %d errors; %s returned by READ\n", s.Requests, s.Errors, human.Bytes(int64(s.ReadBytes)))
	fmt.Fprintf(w, "stall         %s blocked, summed over readers (%s); %d readers, %d exited\n",
		time.Duration(s.Stall.BlockedSeconds*1e9).Round(time.Millisecond), stallSourceOf(s.Stall), s.Stall.ReadersTracked, s.Stall.ReadersExited)
	for _, c := range s.Stall.Cgroups[:min(len(s.Stall.Cgroups), statsCgroups)] {
		if c.Requests > 0 {
			fmt.Fprintf(w, "  cgroup      %s: %s blocked, %d requests, %s, %d readers\n", c.Cgroup,
				time.Duration(c.BlockedSeconds*1e9).Round(time.Millisecond), c.Requests, human.Bytes(int64(c.Bytes)), c.Readers)
		}
	}
	for _, r := range s.Stall.Readers[:min(len(s.Stall.Readers), statsReaders)] {
		fmt.Fprintf(w, "  reader      %d %s (parent %d, %s): %s blocked, %d requests, %s\n", r.PID, r.Comm, r.PPID, r.Cgroup,
			time.Duration(r.BlockedSeconds*1e9).Round(time.Millisecond), r.Requests, human.Bytes(int64(r.Bytes)))
	}
	fmt.Fprintf(w, "memory        %d hits, %d misses (%d shared a fetch); %s kept of %s\n", s.Cache.Hits, s.Cache.Misses,
		s.Cache.Shared, human.Bytes(s.Cache.KeptBytes), human.Bytes(s.Cache.BudgetBytes))
	fmt.Fprintf(w, "backend       %d reads, %s", s.Backend.Reads, human.Bytes(int64(s.Backend.Bytes)))
	if s.Backend.Corrupt > 0 {
		fmt.Fprintf(w, ", %d corrupt samples (verify=on; %d reads of them failed)", s.Backend.Corrupt, s.Backend.CorruptReads)
	}
	fmt.Fprintln(w)
	p := s.Prefetch
	fmt.Fprintf(w, "read-ahead    %d samples queued, %d shed, %d stored in the page cache; %s held, %s used, %s wasted\n",
		p.Issued, p.Shed, p.Stored, human.Bytes(p.HeldBytes), human.Bytes(int64(p.UsedBytes)), human.Bytes(int64(p.WastedBytes)))
	if p.Arrived > 0 {
		fmt.Fprintf(w, "push_chunks   %d samples put in the page cache as their chunk arrived from S3\n", p.Arrived)
	}
	if pc := s.PageCache; pc != nil {
		fmt.Fprintf(w, "page cache    budget %s (%s); ", human.Bytes(pc.BudgetBytes), pc.Source)
		what := "the dataset"
		if pc.ScopeBytes > 0 {
			what = "the " + human.Bytes(pc.ScopeBytes) + " the plans name"
		}
		if pc.Fits {
			fmt.Fprintf(w, "%s fits, %s resident; %d evicted by the kernel\n", what, human.Bytes(pc.ResidentBytes), pc.KernelEvicted)
		} else {
			fmt.Fprintf(w, "a subset of %.0f%% of %s kept, %s resident (%s of the subset); %d dropped, %d pushes refused, %d evicted by the kernel\n",
				100*pc.SubsetFraction, what, human.Bytes(pc.ResidentBytes), human.Bytes(pc.SubsetBytes), pc.Drops, pc.PushesRefused, pc.KernelEvicted)
		}
		if pc.ChunkReads > 0 {
			fmt.Fprintf(w, "chunk reads   %d, %d samples put in the page cache\n", pc.ChunkReads, pc.ChunkSamples)
		}
	}
	if q := s.Quiet; q != nil {
		now := "reads are told to the daemon"
		if q.Now {
			now = "quiet: the set is in the page cache and reads are not told (docs/kernel.md)"
		}
		fmt.Fprintf(w, "watch         %s; quiet %d times, woken %d\n", now, q.Quiets, q.Wakes)
	}
	fmt.Fprintf(w, "epoch         %d, %.0f%% of the files seen (reads that the page cache answers are not); the last epoch found %d files in the page cache\n",
		s.Epoch.Number, 100*s.Epoch.Coverage, s.Epoch.PreviousUnseen)
	for _, pl := range s.Plans {
		fmt.Fprintf(w, "plan          writer %d: %d samples, read to %d, fetched to %d\n", pl.Writer, pl.Samples, pl.Read, pl.Fetched)
	}
	if p.PlanErrors > 0 {
		fmt.Fprintf(w, "plan errors   %d plans refused (EINVAL)\n", p.PlanErrors)
	}
	// Storage below the loader (s3, disk_cache): every figure, by name.
	for _, name := range slices.Sorted(maps.Keys(s.Storage)) {
		fields, _ := s.Storage[name].(map[string]any)
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(fields)) {
			v := fields[k]
			if n, ok := v.(float64); ok && strings.HasSuffix(k, "bytes") {
				v = human.Bytes(int64(n))
			}
			parts = append(parts, fmt.Sprintf("%s %v", strings.ReplaceAll(k, "_", " "), v))
		}
		fmt.Fprintf(w, "%-13s %s\n", name, strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)
	names := make([]string, 0, len(s.Ops))
	for name, o := range s.Ops {
		if o.Count > 0 {
			names = append(names, name)
		}
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(s.Ops[b].Count, s.Ops[a].Count) })
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "op\tcount\terrors\tp50 µs\tp99 µs\tp99.9 µs\t\n")
	for _, name := range names {
		o := s.Ops[name]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%.1f\t%.1f\t\n", name, o.Count, o.Errors, o.P50us, o.P99us, o.P999us)
	}
	tw.Flush()
}
