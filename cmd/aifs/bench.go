package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aifs/aifs/layout/pack"
	"github.com/aifs/aifs/plan"
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
	opt := benchOptions{Dirs: dirs, Epochs: *epochs, Jobs: jobs, Limit: *limit, Seed: *seed, Seq: *seq, Plan: *plan, Relist: *relist,
		KeepFraction: *keep}
	if *drop {
		opt.DropCaches = dropKernelCaches
	}
	text := stdout
	if *asJSON {
		text = io.Discard
	}
	rep, err := benchRun(ctx, opt, text)
	if *asJSON {
		if err != nil {
			rep.Error = err.Error()
		}
		if jerr := json.NewEncoder(stdout).Encode(rep); jerr != nil && err == nil {
			err = jerr
		}
	} else {
		printBenchSummary(stdout, rep)
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

// benchOptions configures benchRun; the defaults named are runBench's flag defaults.
type benchOptions struct {
	Dirs   []string // trees to read, interleaved per epoch; they must hold the same relative paths
	Epochs int      // passes over every tree; at least 1 (default 1)
	Jobs   int      // parallel readers; at least 1 (default 8)
	Limit  int      // read the first Limit files of each epoch's order; 0 reads all (default 0)
	Seed   uint64   // seed of the shuffle (default 1)
	Seq    bool     // read in pack order instead of shuffled (default false)
	Plan   bool     // send each pass's order to each DIR that is an aifs mount (default false)
	Relist bool     // list DIR again, untimed, after DropCaches before each pass (default false)
	// KeepFraction, in [0, 1], if above 0, has the readers drop the pages of each file outside
	// the stable subset keptFiles chooses from the listing after reading it (default 0: off).
	KeepFraction float64
	// DropCaches, if not nil, is called before each listing and before each epoch of each tree;
	// its error stops the run. The first call comes before anything is read.
	DropCaches func() error
	// SendPlan sends the plans of Plan (default nil: plan.Send).
	SendPlan func(dir string, r io.Reader) error
}

// benchReport is what a run measured, and the --json output. A run that stopped early holds
// the passes that completed.
type benchReport struct {
	Seed       uint64 `json:"seed"`
	Epochs     int    `json:"epochs"`
	Jobs       int    `json:"jobs"`
	Limit      int    `json:"limit"`
	Seq        bool   `json:"seq"`
	CPUs       int    `json:"cpus"` // the machine's CPUs (runtime.NumCPU): passes' cpu_us_per_file is over all of them
	DropCaches bool   `json:"drop_caches"`
	// KeepFraction is --keep-fraction; KeptFiles how many of the listed files its subset holds
	// (all of them when it is 0).
	KeepFraction float64     `json:"keep_fraction"`
	KeptFiles    int         `json:"kept_files"`
	Dirs         []dirReport `json:"dirs"`
	Passes       []passStats `json:"passes"`
	// Mismatches describes each pair of passes that should have read the same bytes but whose
	// digests differ; empty when all agree.
	Mismatches []string `json:"digest_mismatches"`
	Error      string   `json:"error,omitempty"`
}

// dirReport sums up one DIR. Ratio and DigestsMatch compare it with the first DIR (which has
// 1 and true).
type dirReport struct {
	Dir             string  `json:"dir"`
	Files           int     `json:"files"`
	ListSeconds     float64 `json:"list_seconds"`
	MedianFilesPerS float64 `json:"median_files_per_s"`
	Ratio           float64 `json:"files_per_s_ratio"`
	DigestsMatch    bool    `json:"digests_match"`
}

// passStats is one epoch over one DIR.
type passStats struct {
	Dir       string  `json:"dir"`
	Epoch     int     `json:"epoch"`
	Files     int     `json:"files"`
	Bytes     int64   `json:"bytes"`
	Seconds   float64 `json:"seconds"`
	FilesPerS float64 `json:"files_per_s"`
	MBPerS    float64 `json:"mb_per_s"`
	P50us     float64 `json:"p50_us"`
	P99us     float64 `json:"p99_us"`
	P999us    float64 `json:"p999_us"`
	Digest    string  `json:"digest"`
	// CPUusPerFile is the machine's busy CPU time during the pass (all its CPUs, every process,
	// the kernel's work included: /proc/stat's user, nice, system, irq and softirq; not idle,
	// iowait or steal) over the files read, in µs; 0 where /proc/stat cannot be read. CPUs over it
	// is the files/s at which this machine's CPUs would be busy all the time.
	CPUusPerFile float64 `json:"cpu_us_per_file"`

	dir int // index into benchOptions.Dirs
}

// benchRun lists every DIR, checks that they hold the same relative paths, then reads them
// epoch by epoch, writing a line to out after each listing and each pass. Digest mismatches are
// recorded in the report, not returned as errors; the error is the first listing or read error,
// or the context's.
func benchRun(ctx context.Context, opt benchOptions, out io.Writer) (*benchReport, error) {
	rep := &benchReport{CPUs: runtime.NumCPU(), Seed: opt.Seed, Epochs: opt.Epochs, Jobs: opt.Jobs, Limit: opt.Limit, Seq: opt.Seq,
		DropCaches: opt.DropCaches != nil, KeepFraction: opt.KeepFraction, Dirs: []dirReport{}, Passes: []passStats{}, Mismatches: []string{}}
	err := rep.run(ctx, opt, out)
	sameFiles := opt.Seq || opt.Limit == 0 || len(rep.Dirs) > 0 && opt.Limit >= rep.Dirs[0].Files
	compareDigests(rep, sameFiles)
	return rep, err
}

func (rep *benchReport) run(ctx context.Context, opt benchOptions, out io.Writer) error {
	var paths []string
	for i, dir := range opt.Dirs {
		if err := dropCaches(opt); err != nil {
			return err
		}
		start := time.Now()
		p, err := listTree(ctx, dir)
		if err != nil {
			return err
		}
		secs := time.Since(start).Seconds()
		rep.Dirs = append(rep.Dirs, dirReport{Dir: dir, Files: len(p), ListSeconds: secs})
		fmt.Fprintf(out, "list %s: %d files, %.3f s\n", displayName(dir), len(p), secs)
		if len(p) == 0 {
			return fmt.Errorf("%s: no regular files", displayName(dir))
		}
		if uint64(len(p)) > math.MaxUint32 {
			return fmt.Errorf("%s: more than %d files", displayName(dir), uint32(math.MaxUint32))
		}
		if i == 0 {
			paths = p
		} else if err := diffPaths(paths, p, opt.Dirs[0], dir); err != nil {
			return err
		}
	}
	n := len(paths)
	if opt.Limit > 0 {
		n = min(n, opt.Limit)
	}
	var dropAfter []bool // by index into paths; nil: drop nothing
	rep.KeptFiles = len(paths)
	if opt.KeepFraction > 0 {
		dropAfter = make([]bool, len(paths))
		rep.KeptFiles = 0
		for i, kept := range keptFiles(paths, opt.KeepFraction) {
			dropAfter[i] = !kept
			if kept {
				rep.KeptFiles++
			}
		}
		fmt.Fprintf(out, "keep-fraction %g: %d of %d files stay cached, the others' pages are dropped after reading\n",
			opt.KeepFraction, rep.KeptFiles, len(paths))
	}
	order := make([]uint32, len(paths))
	lat := make([]time.Duration, n)
	readers := make([]fileReader, opt.Jobs)
	for epoch := 1; epoch <= opt.Epochs; epoch++ {
		epochOrder(order, opt.Seq, opt.Seed, epoch)
		for i, dir := range opt.Dirs {
			if err := dropCaches(opt); err != nil {
				return err
			}
			if opt.Relist && opt.DropCaches != nil {
				if _, err := listTree(ctx, dir); err != nil {
					return err
				}
			}
			if opt.Plan {
				if err := writePlan(opt.SendPlan, dir, paths, order[:n]); err != nil {
					return err
				}
			}
			ps, err := readPass(ctx, dir, paths, dropAfter, order[:n], lat, readers)
			if err != nil {
				return err
			}
			ps.Dir, ps.Epoch, ps.dir = dir, epoch, i
			rep.Passes = append(rep.Passes, ps)
			fmt.Fprintf(out, "epoch %d %s: %d files, %s, %.3f s: %.0f files/s, %.1f MB/s, p50 %s p99 %s p99.9 %s, CPU %s a file, digest %s\n",
				epoch, displayName(dir), ps.Files, humanBytes(ps.Bytes), ps.Seconds, ps.FilesPerS, ps.MBPerS,
				formatMicros(ps.P50us), formatMicros(ps.P99us), formatMicros(ps.P999us), formatMicros(ps.CPUusPerFile), ps.Digest)
		}
	}
	return nil
}

func dropCaches(opt benchOptions) error {
	if opt.DropCaches == nil {
		return nil
	}
	return opt.DropCaches()
}

// writePlan sends, with send (nil: plan.Send), the order of a pass to the aifs mount at dir in
// the plan format (docs/plan.md), as python/aifs_plan.py does, and does nothing if dir is not
// the root of an aifs mount or the mount takes no plans (-o plans=off).
func writePlan(send func(string, io.Reader) error, dir string, paths []string, order []uint32) error {
	var b bytes.Buffer
	b.WriteString(plan.HeaderPaths + "\n")
	for _, i := range order {
		b.WriteString(paths[i])
		b.WriteByte('\n')
	}
	if send == nil {
		send = plan.Send
	}
	err := send(dir, &b)
	if err != nil && !errors.Is(err, plan.ErrNoMount) && !errors.Is(err, syscall.EPERM) {
		return fmt.Errorf("--plan: %w", err)
	}
	return nil
}

// dropKernelCaches writes dirty pages back and asks Linux to drop its page cache, dentries and
// inodes, which needs root.
func dropKernelCaches() error {
	syscall.Sync()
	f, err := os.OpenFile("/proc/sys/vm/drop_caches", os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString("3")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("--drop-caches needs root and a writable /proc/sys: %w", err)
	}
	return nil
}

// listTree returns the "/"-separated paths relative to root of the regular files under it, in
// pack order, as pack.ListFiles lists them for 'aifs pack': following symlinks, those out of
// the tree included, and skipping quietly what pack skips with a warning, and a top-level
// ".aifs" (an aifs mount's own files).
func listTree(ctx context.Context, root string) ([]string, error) {
	return pack.ListFiles(ctx, root, pack.ListOptions{FollowExternal: true, SkipTop: ".aifs"})
}

// packLess reports whether relative path p comes before q in pack order, the order listTree
// returns and the order in which 'aifs pack' lays samples out: a directory's files by name
// bytes, then its subdirectories by name bytes, each expanded the same way.
func packLess(p, q string) bool {
	for {
		pi, qi := strings.IndexByte(p, '/'), strings.IndexByte(q, '/')
		if (pi < 0) != (qi < 0) {
			return pi < 0 // a file comes before every subdirectory of its directory
		}
		if pi < 0 {
			return p < q
		}
		if p[:pi] != q[:qi] {
			return p[:pi] < q[:qi]
		}
		p, q = p[pi+1:], q[qi+1:]
	}
}

// diffPaths returns an error naming the first path that one of two pack-ordered listings has
// and the other lacks, or nil if they are equal.
func diffPaths(a, b []string, dirA, dirB string) error {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	switch {
	case i == len(a) && i == len(b):
		return nil
	case i == len(b) || i < len(a) && packLess(a[i], b[i]):
		return fmt.Errorf("%s and %s hold different files: %s is only in %s", displayName(dirA), displayName(dirB), displayName(a[i]), displayName(dirA))
	default:
		return fmt.Errorf("%s and %s hold different files: %s is only in %s", displayName(dirA), displayName(dirB), displayName(b[i]), displayName(dirB))
	}
}

// epochOrder fills order with the indices of the listed files in the order epoch reads them:
// pack order if seq, else a permutation that depends only on seed and epoch.
func epochOrder(order []uint32, seq bool, seed uint64, epoch int) {
	for i := range order {
		order[i] = uint32(i)
	}
	if !seq {
		rng := rand.New(rand.NewPCG(seed, uint64(epoch)))
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
}

// fileReader is one reader's state, reused across files and passes so that a file costs no
// allocation beyond its name and os.Open's.
type fileReader struct {
	buf    []byte // holds the file being read; grows to the largest file
	name   []byte // root + "/" + relative path + NUL
	bytes  int64  // content bytes read in this pass
	digest uint64 // sum of sampleHash over this pass's files
	err    error  // the error that stopped this reader
}

// readPass reads root's files paths[order[0]], paths[order[1]], ... with len(readers) readers,
// storing file order[i]'s open-to-close time in lat[i]. A file j with dropAfter[j] has its pages
// dropped from the page cache once read; dropAfter is nil or as long as paths.
func readPass(ctx context.Context, root string, paths []string, dropAfter []bool, order []uint32, lat []time.Duration, readers []fileReader) (passStats, error) {
	rctx, cancel := context.WithCancel(ctx) // cancelled by the first read error
	defer cancel()
	prefix := root
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	busy0, cpuOK := cpuBusy()
	start := time.Now()
	for k := range readers {
		r := &readers[k]
		r.bytes, r.digest, r.err = 0, 0, nil
		if r.buf == nil {
			r.buf = make([]byte, 256<<10)
		}
		wg.Go(func() {
			for rctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(len(order)) {
					return
				}
				r.name = append(append(append(r.name[:0], prefix...), paths[order[i]]...), 0)
				path := string(r.name[:len(r.name)-1])
				t0 := time.Now()
				n, err := r.readFile(path, dropAfter != nil && dropAfter[order[i]])
				lat[i] = time.Since(t0)
				if err != nil {
					r.err = fileError(path, err)
					cancel()
					return
				}
				r.bytes += int64(n)
				r.digest += sampleHash(r.name[len(prefix):], r.buf[:n])
			}
		})
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	ps := passStats{Files: len(order), Seconds: secs}
	if busy1, ok := cpuBusy(); ok && cpuOK && len(order) > 0 {
		ps.CPUusPerFile = micros(busy1-busy0) / float64(len(order))
	}
	if err := ctx.Err(); err != nil {
		return ps, err // interrupted, rather than a reader's error
	}
	var digest uint64
	for k := range readers {
		if err := readers[k].err; err != nil {
			return ps, err
		}
		ps.Bytes += readers[k].bytes
		digest += readers[k].digest
	}
	ps.Digest = fmt.Sprintf("%016x", digest)
	ps.FilesPerS = float64(ps.Files) / max(secs, 1e-9)
	ps.MBPerS = float64(ps.Bytes) / 1e6 / max(secs, 1e-9)
	sorted := lat[:len(order)]
	slices.Sort(sorted)
	ps.P50us = micros(percentile(sorted, 0.50))
	ps.P99us = micros(percentile(sorted, 0.99))
	ps.P999us = micros(percentile(sorted, 0.999))
	return ps, nil
}

// cpuBusy returns the time all CPUs have spent busy since boot, from /proc/stat, and false
// where it cannot be read.
func cpuBusy() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	return parseCPUBusy(string(b))
}

// parseCPUBusy returns the busy time in /proc/stat's first line ("cpu user nice system idle
// iowait irq softirq steal ...", in USER_HZ ticks: 100 a second on Linux): user, nice, system,
// irq and softirq.
func parseCPUBusy(stat string) (time.Duration, bool) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, false
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7} {
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, false
		}
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / 100), true
}

// readFile reads the file at path whole into r.buf, growing it as needed, and returns its size.
// If drop, it then asks the kernel to drop the file's pages from the page cache, before closing.
func (r *fileReader) readFile(path string, drop bool) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	n := 0
	for {
		if n == len(r.buf) {
			r.buf = slices.Grow(r.buf, len(r.buf))
			r.buf = r.buf[:cap(r.buf)]
		}
		m, err := f.Read(r.buf[n:])
		n += m
		if err == io.EOF {
			break
		}
		if err != nil {
			f.Close()
			return n, err
		}
	}
	if drop {
		// Fd makes no system call here: os leaves a regular file in blocking mode.
		if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			f.Close()
			return n, &fs.PathError{Op: "fadvise", Path: path, Err: err}
		}
	}
	return n, f.Close()
}

// keptFiles reports, for each of the relative paths, whether it is in the stable subset of
// about fraction of them that --keep-fraction keeps cached: those whose pathRank is below
// fraction × 2^64. It depends on nothing but the paths, so that every epoch and every run (and
// every DIR, whose files have the same relative paths) keeps the same files. A fraction of 1
// keeps all, 0 none.
func keptFiles(paths []string, fraction float64) []bool {
	kept := make([]bool, len(paths))
	for i, p := range paths {
		// fraction × 2^64 does not fit a uint64 at 1; below 1 it rounds to at most 2^64 - 2^11.
		kept[i] = fraction >= 1 || pathRank(p) < uint64(fraction*0x1p64)
	}
	return kept
}

// pathRank returns a hash of a relative path, uniform over the uint64s: FNV-1a 64 (as
// hash/fnv's New64a, here without allocating), whose high bits mix poorly for short keys that
// differ in their last bytes, put through mix64.
func pathRank(path string) uint64 {
	h := uint64(14695981039346656037) // FNV-1a 64's offset basis
	for i := 0; i < len(path); i++ {
		h ^= uint64(path[i])
		h *= 1099511628211 // FNV-1a 64's prime
	}
	return mix64(h)
}

// fileError returns "PATH: op: errno" for an error from reading path.
func fileError(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %s: %w", displayName(path), pe.Op, pe.Err)
	}
	return fmt.Errorf("%s: %w", displayName(path), err)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sampleHash returns a 64-bit hash of one file's relative path (with its terminating NUL) and
// content. It is CRC-32C and CRC-32 (IEEE), both hardware-assisted and far faster than a
// cryptographic hash, so that hashing does not cap the throughput measured, put through a
// nonlinear mixer: CRCs are linear, so that an XOR of raw CRCs would miss two files of the same
// size swapping contents, and a sum would miss some such swaps. The digest of a pass is the sum
// of these, mod 2^64.
func sampleHash(pathNUL, content []byte) uint64 {
	c := crc32.Update(crc32.Update(0, castagnoli, pathNUL), castagnoli, content)
	i := crc32.Update(crc32.Update(0, crc32.IEEETable, pathNUL), crc32.IEEETable, content)
	return mix64(uint64(c)<<32 | uint64(i))
}

// mix64 is the finalizer of MurmurHash3, a bijection of the uint64s that mixes every bit into
// every other.
func mix64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// percentile returns the nearest-rank p-th quantile (0 < p <= 1) of sorted, the smallest value
// with at least p of the values at or below it; 0 if sorted is empty.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p*float64(len(sorted)) - 1e-9))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// formatMicros formats a latency for people: "87µs", "1.42ms", "2.105s".
func formatMicros(us float64) string {
	switch {
	case us < 1000:
		return fmt.Sprintf("%.0fµs", us)
	case us < 1e6:
		return fmt.Sprintf("%.2fms", us/1e3)
	default:
		return fmt.Sprintf("%.3fs", us/1e6)
	}
}

// compareDigests records in rep every pass whose digest differs from the first DIR's in the
// same epoch, and, if sameFiles (every epoch reads the same files), from its DIR's first epoch;
// then fills each DIR's median files/s and ratio to the first DIR's.
func compareDigests(rep *benchReport, sameFiles bool) {
	first := make(map[[2]int]passStats) // {dir, epoch} → pass, for the passes compared against
	rate := make([][]float64, len(rep.Dirs))
	for i := range rep.Dirs {
		rep.Dirs[i].DigestsMatch = true
	}
	for _, p := range rep.Passes {
		rate[p.dir] = append(rate[p.dir], p.FilesPerS)
		if p.dir == 0 || p.Epoch == 1 {
			first[[2]int{p.dir, p.Epoch}] = p
		}
		if q, ok := first[[2]int{0, p.Epoch}]; ok && p.dir != 0 && q.Digest != p.Digest {
			rep.Mismatches = append(rep.Mismatches, fmt.Sprintf("epoch %d: %s read digest %s but %s read %s",
				p.Epoch, displayName(p.Dir), p.Digest, displayName(q.Dir), q.Digest))
			rep.Dirs[p.dir].DigestsMatch = false
		}
		if q, ok := first[[2]int{p.dir, 1}]; ok && sameFiles && p.Epoch != 1 && q.Digest != p.Digest {
			rep.Mismatches = append(rep.Mismatches, fmt.Sprintf("%s: epoch %d read digest %s but epoch 1 read %s from the same files",
				displayName(p.Dir), p.Epoch, p.Digest, q.Digest))
			rep.Dirs[p.dir].DigestsMatch = false
		}
	}
	for i := range rep.Dirs {
		rep.Dirs[i].MedianFilesPerS = median(rate[i])
		if base := rep.Dirs[0].MedianFilesPerS; base > 0 {
			rep.Dirs[i].Ratio = rep.Dirs[i].MedianFilesPerS / base
		}
	}
}

// median returns the median of xs (the mean of the middle two for an even count), 0 if empty.
// It sorts xs.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

// printBenchSummary prints the digest mismatches and, with several DIRs, how each compares
// with the first.
func printBenchSummary(w io.Writer, rep *benchReport) {
	for _, m := range rep.Mismatches {
		fmt.Fprintf(w, "DIGEST MISMATCH: %s\n", m)
	}
	if len(rep.Dirs) < 2 || len(rep.Passes) == 0 {
		return
	}
	base := rep.Dirs[0]
	for _, d := range rep.Dirs[1:] {
		match := "digests match"
		if !d.DigestsMatch {
			match = "DIGESTS DIFFER"
		}
		fmt.Fprintf(w, "%s: %.2fx the files/s of %s (median %.0f vs %.0f files/s), %s\n",
			displayName(d.Dir), d.Ratio, displayName(base.Dir), d.MedianFilesPerS, base.MedianFilesPerS, match)
	}
}
