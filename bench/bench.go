// Package bench reads directory trees whole, epoch after epoch, as PyTorch DataLoader workers
// read an image dataset, and measures them: files/s, MB/s, per-file latency, the machine's CPU
// per file, and a digest of every (path, content) read so that systems are compared only when
// they served the same bytes. It is the engine of `aifs bench` (cmd/aifs parses its flags) and
// of the harness in integration/bench, which reads its --json report. Run reads; read.go holds
// the readers and the digest, report.go the figures and the summary.
package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/aifs/aifs/internal/human"
	"github.com/aifs/aifs/layout/pack"
	"github.com/aifs/aifs/plan"
)

// Options configures Run; the defaults named are `aifs bench`'s flag defaults.
type Options struct {
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

// Report is what a run measured, and the --json output. A run that stopped early holds
// the passes that completed.
type Report struct {
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
	Dirs         []DirReport `json:"dirs"`
	Passes       []PassStats `json:"passes"`
	// Mismatches describes each pair of passes that should have read the same bytes but whose
	// digests differ; empty when all agree.
	Mismatches []string `json:"digest_mismatches"`
	Error      string   `json:"error,omitempty"`
}

// DirReport sums up one DIR. Ratio and DigestsMatch compare it with the first DIR (which has
// 1 and true).
type DirReport struct {
	Dir             string  `json:"dir"`
	Files           int     `json:"files"`
	ListSeconds     float64 `json:"list_seconds"`
	MedianFilesPerS float64 `json:"median_files_per_s"`
	Ratio           float64 `json:"files_per_s_ratio"`
	DigestsMatch    bool    `json:"digests_match"`
}

// PassStats is one epoch over one DIR.
type PassStats struct {
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

	dir int // index into Options.Dirs
}

// Run lists every DIR, checks that they hold the same relative paths, then reads them
// epoch by epoch, writing a line to out after each listing and each pass. Digest mismatches are
// recorded in the report, not returned as errors; the error is the first listing or read error,
// or the context's.
func Run(ctx context.Context, opt Options, out io.Writer) (*Report, error) {
	rep := &Report{CPUs: runtime.NumCPU(), Seed: opt.Seed, Epochs: opt.Epochs, Jobs: opt.Jobs, Limit: opt.Limit, Seq: opt.Seq,
		DropCaches: opt.DropCaches != nil, KeepFraction: opt.KeepFraction, Dirs: []DirReport{}, Passes: []PassStats{}, Mismatches: []string{}}
	err := rep.run(ctx, opt, out)
	sameFiles := opt.Seq || opt.Limit == 0 || len(rep.Dirs) > 0 && opt.Limit >= rep.Dirs[0].Files
	compareDigests(rep, sameFiles)
	return rep, err
}

func (rep *Report) run(ctx context.Context, opt Options, out io.Writer) error {
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
		rep.Dirs = append(rep.Dirs, DirReport{Dir: dir, Files: len(p), ListSeconds: secs})
		fmt.Fprintf(out, "list %s: %d files, %.3f s\n", human.Name(dir), len(p), secs)
		if len(p) == 0 {
			return fmt.Errorf("%s: no regular files", human.Name(dir))
		}
		if uint64(len(p)) > math.MaxUint32 {
			return fmt.Errorf("%s: more than %d files", human.Name(dir), uint32(math.MaxUint32))
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
				epoch, human.Name(dir), ps.Files, human.Bytes(ps.Bytes), ps.Seconds, ps.FilesPerS, ps.MBPerS,
				formatMicros(ps.P50us), formatMicros(ps.P99us), formatMicros(ps.P999us), formatMicros(ps.CPUusPerFile), ps.Digest)
		}
	}
	return nil
}

func dropCaches(opt Options) error {
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

// DropKernelCaches writes dirty pages back and asks Linux to drop its page cache, dentries and
// inodes, which needs root.
func DropKernelCaches() error {
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
		return fmt.Errorf("%s and %s hold different files: %s is only in %s", human.Name(dirA), human.Name(dirB), human.Name(a[i]), human.Name(dirA))
	default:
		return fmt.Errorf("%s and %s hold different files: %s is only in %s", human.Name(dirA), human.Name(dirB), human.Name(b[i]), human.Name(dirB))
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
