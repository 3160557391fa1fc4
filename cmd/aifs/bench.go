package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/aifs/aifs/bench"
)

func runBench(ctx context.Context, args []string) int { return benchMain(ctx, args, os.Stdout) }

// benchMain is runBench writing its results to stdout (errors still go to os.Stderr).
func benchMain(ctx context.Context, args []string, stdout io.Writer) int {
	flags := newFlags("bench", "[flags] DIR...", `
Reads every regular file under each DIR whole, epoch after epoch, the way PyTorch DataLoader
workers read an image dataset, and reports throughput and per-file latency. Use it to compare one
dataset on a native file system with the same dataset on an aifs mount: name both directories and
they are read interleaved (epoch 1: A B, epoch 2: A B, ...) in the same order.

Each DIR is listed once, timed, following symlinks as 'aifs pack' does (a top-level ".aifs" is
skipped). Relative paths identify the samples and must be the same in every DIR. Each epoch then
reads the files in an order shuffled from --seed and the epoch number, or in pack order with
--seq (each directory's files by name, then its subdirectories by name: the order of the shards,
and of sorted() in an ImageFolder). --jobs readers take the next file from a shared queue: open,
read to EOF into a buffer reused per reader, close.

With --keep-fraction F, a reader that has read a file outside a stable subset of F of the files
drops the file's pages from the page cache (posix_fadvise DONTNEED) before closing it, so that
only the subset stays cached: the same files in every epoch and every run, chosen by a hash of
their relative paths. In a memory cgroup smaller than the dataset, that is the policy aifs
follows for its page cache, done by the reader on a native file system without FUSE. Cgroups share
the page cache: a reader of the same files in another cgroup hits the subset's pages and loses
its own pages of the others, so give each such reader a copy of its own.

One line per epoch and DIR gives files/s, MB/s (10^6 bytes), the p50/p99/p99.9 time from open
to close of one file, the CPU time the whole machine was busy during the epoch (every process
and the kernel: /proc/stat) over the files read, and a digest of every (path, content) pair
read that does not depend on the order, so that two runs are compared only if they served the
same bytes. With several DIRs a
summary gives each DIR's median files/s relative to the first DIR's. The exit status is 1 after a
read error or if digests differ between DIRs (or, when every epoch reads the same files, between
epochs), 130 if interrupted.`)
	epochs := flags.Int("epochs", 1, "passes over every DIR")
	var jobs int
	flags.IntVar(&jobs, "jobs", 8, "parallel readers, like DataLoader's num_workers")
	flags.IntVar(&jobs, "j", 8, "short for --jobs")
	seed := flags.Uint64("seed", 1, "seed of the shuffle; epoch E of seed S reads in the same order in every run")
	seq := flags.Bool("seq", false, "read in pack order instead of shuffled, like a validation pass")
	limit := flags.Int("limit", 0, "read only the first N files of each epoch's order (0: all)")
	relist := flags.Bool("relist", false, "with --drop-caches, list DIR again (untimed) after dropping the caches before each epoch, as a training job lists its dataset before its first epoch: the data is cold, the names are not")
	plan := flags.Bool("plan", false, "before each epoch, send its order to DIR if it is the root of an aifs mount, as python/aifs_plan.py does for a DataLoader")
	keep := flags.Float64("keep-fraction", 0, "drop the pages of every file outside a stable subset of this fraction (0 to 1) of the files after reading it, with posix_fadvise(DONTNEED) (default 0: off, nothing dropped)")
	drop := flags.Bool("drop-caches", false, "sync and drop the kernel's page, dentry and inode caches before each listing and each epoch of each DIR (needs root; aifs's own cache is not dropped)")
	asJSON := flags.Bool("json", false, "print one JSON object at the end instead of text lines")
	dirs, code, ok := parseArgs(flags, args, 1, math.MaxInt)
	if !ok {
		return code
	}
	switch {
	case *epochs < 1:
		return usageError(flags, "--epochs must be at least 1")
	case jobs < 1:
		return usageError(flags, "--jobs must be at least 1")
	case *limit < 0:
		return usageError(flags, "--limit must not be negative")
	case !(*keep >= 0 && *keep <= 1): // NaN too
		return usageError(flags, fmt.Sprintf("--keep-fraction must be between 0 and 1, not %v", *keep))
	}
	opt := bench.Options{Dirs: dirs, Epochs: *epochs, Jobs: jobs, Limit: *limit, Seed: *seed, Seq: *seq, Plan: *plan, Relist: *relist,
		KeepFraction: *keep}
	if *drop {
		opt.DropCaches = bench.DropKernelCaches
	}
	text := stdout
	if *asJSON {
		text = io.Discard
	}
	rep, err := bench.Run(ctx, opt, text)
	if *asJSON {
		if err != nil {
			rep.Error = err.Error()
		}
		if jerr := json.NewEncoder(stdout).Encode(rep); jerr != nil && err == nil {
			err = jerr
		}
	} else {
		bench.PrintSummary(stdout, rep)
	}
	if err != nil {
		return fail("bench", err)
	}
	if len(rep.Mismatches) > 0 {
		fmt.Fprintf(os.Stderr, "aifs bench: DIGESTS DIFFER (%d mismatches): the directories did not serve the same bytes\n", len(rep.Mismatches))
		return exitFailure
	}
	return exitOK
}
