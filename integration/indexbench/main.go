// Command indexbench measures an index's lookups on one core, as the kernel's LOOKUP asks them:
// it loads DIR's index (layout.Load, timed), draws --queries random files, and looks each up by
// (parent directory, name) with layout.Index.Lookup, first in a cold pass (every block the
// queries touch is read and checked on first use) and then in --passes warm passes. Run it with
// GOMAXPROCS=1 under taskset to hold it to one core. It prints one JSON line: load_ms,
// cold_lookups_per_s, warm_lookups_per_s (the median pass), queries, and the process's RSS after
// the cold pass and at the end.
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
	"time"

	"github.com/aifs/aifs/layout"
)

func main() {
	queries := flag.Int("queries", 1_000_000, "random lookups a pass")
	passes := flag.Int("passes", 5, "warm passes after the cold one")
	seed := flag.Uint64("seed", 1, "random seed of the queries")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the warm passes to this file")
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
	defer json.NewEncoder(os.Stdout).Encode(map[string]any{
		"load_ms": loadMS, "cold_lookups_per_s": cold, "warm_lookups_per_s": warm[len(warm)/2],
		"queries": len(qs), "rss_after_cold_bytes": rssCold, "rss_end_bytes": rss(),
	})
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
