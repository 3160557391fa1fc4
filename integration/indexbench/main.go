// Command indexbench measures an index's lookups on one core, as the kernel's LOOKUP asks them:
// it loads DIR's index (layout.Load, timed), draws --queries random files, and looks each up by
// (parent directory, name) with layout.Index.Lookup, first in a cold pass (every block the
// queries touch is read and checked on first use) and then in --passes warm passes. Run it with
// GOMAXPROCS=1 under taskset to hold it to one core. It prints one JSON line: load_ms,
// cold_lookups_per_s, warm_lookups_per_s (the median pass), queries, and the process's RSS after
// the cold pass and at the end; with -latency also random_read_ns, this machine's latency of one
// dependent random read over memory of the index's size, which bounds a lookup (docs/scale.md).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/aifs/aifs/layout"
)

func main() {
	queries := flag.Int("queries", 1_000_000, "random lookups a pass")
	passes := flag.Int("passes", 5, "warm passes after the cold one")
	seed := flag.Uint64("seed", 1, "random seed of the queries")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the warm passes to this file")
	latency := flag.Bool("latency", false, "also measure the machine's bound: ns of one dependent random read over memory of the index's size (huge pages, as the index gets)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: indexbench [-queries N] [-passes N] [-seed N] DIR")
		os.Exit(2)
	}
	start := time.Now()
	x, err := layout.Load(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "indexbench:", err)
		os.Exit(1)
	}
	loadMS := time.Since(start).Seconds() * 1e3
	// The queries: random files, their parents read through FileAt's arithmetic on the
	// directory runs and one entry read each (which reads its block: untimed).
	type query struct {
		dir  layout.ID
		name string
	}
	rng := rand.New(rand.NewPCG(*seed, 7))
	qs := make([]query, *queries)
	for i := range qs {
		id := x.FileAt(rng.IntN(x.Files()))
		qs[i] = query{x.Entry(id).Parent, strings.Clone(string(x.Name(id)))}
	}
	// Drop what drawing the queries read: a fresh index, so the cold pass reads its blocks.
	x.Close()
	if x, err = layout.Load(flag.Arg(0)); err != nil {
		fmt.Fprintln(os.Stderr, "indexbench:", err)
		os.Exit(1)
	}
	pass := func() float64 {
		t := time.Now()
		for _, q := range qs {
			if _, err := x.Lookup(q.dir, q.name); err != nil {
				fmt.Fprintf(os.Stderr, "indexbench: lookup %q in %d: %v\n", q.name, q.dir, err)
				os.Exit(1)
			}
		}
		return float64(len(qs)) / time.Since(t).Seconds()
	}
	cold := pass()
	rssCold := rss()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "indexbench:", err)
			os.Exit(1)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	var warm []float64
	for range *passes {
		warm = append(warm, pass())
	}
	slices.Sort(warm)
	out := map[string]any{
		"load_ms": loadMS, "cold_lookups_per_s": cold, "warm_lookups_per_s": warm[len(warm)/2],
		"queries": len(qs), "rss_after_cold_bytes": rssCold, "rss_end_bytes": rss(),
	}
	defer json.NewEncoder(os.Stdout).Encode(out)
	if *latency {
		total, _ := x.Size()
		out["random_read_ns"] = randomReadNs(int(total))
	}
}

// randomReadNs returns the ns of one read of a random cache line of n bytes of anonymous memory
// in huge pages, each read's address depending on the one before (as a lookup's reads do): a
// lookup that makes k such reads in a row is bounded by k times it.
func randomReadNs(n int) float64 {
	buf, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE|syscall.MAP_NORESERVE)
	if err != nil {
		return 0
	}
	defer syscall.Munmap(buf)
	syscall.Madvise(buf, syscall.MADV_HUGEPAGE)
	for i := 0; i < n; i += 4096 {
		buf[i] = 1
	}
	const steps = 5_000_000
	rng := rand.New(rand.NewPCG(5, 6))
	lines := make([]uint64, steps)
	for i := range lines {
		lines[i] = rng.Uint64N(uint64(n / 64))
	}
	t := time.Now()
	var x uint64
	for _, l := range lines {
		x += uint64(buf[(l^(x&1))*64]) // the next address depends on this read
	}
	return float64(time.Since(t).Nanoseconds()) / steps
}

// rss returns the process's resident set in bytes (VmRSS).
func rss() int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		var kb int64
		if _, err := fmt.Sscanf(l, "VmRSS: %d kB", &kb); err == nil {
			return kb << 10
		}
	}
	return 0
}
