package bench

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aifs/aifs/internal/human"
	"github.com/aifs/aifs/internal/subset"
	"golang.org/x/sys/unix"
)

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
func readPass(ctx context.Context, root string, paths []string, dropAfter []bool, order []uint32, lat []time.Duration, readers []fileReader) (PassStats, error) {
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
	ps := PassStats{Files: len(order), Seconds: secs}
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
	threshold := subset.Of(fraction)
	for i, p := range paths {
		kept[i] = fraction >= 1 || pathRank(p) < threshold // at 1 even the rank 2^64-1
	}
	return kept
}

// pathRank returns a hash of a relative path, uniform over the uint64s: FNV-1a 64 (as
// hash/fnv's New64a, here without allocating), whose high bits mix poorly for short keys that
// differ in their last bytes, put through subset.Mix.
func pathRank(path string) uint64 {
	h := uint64(14695981039346656037) // FNV-1a 64's offset basis
	for i := 0; i < len(path); i++ {
		h ^= uint64(path[i])
		h *= 1099511628211 // FNV-1a 64's prime
	}
	return subset.Mix(h)
}

// fileError returns "PATH: op: errno" for an error from reading path.
func fileError(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %s: %w", human.Name(path), pe.Op, pe.Err)
	}
	return fmt.Errorf("%s: %w", human.Name(path), err)
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
	return subset.Mix(uint64(c)<<32 | uint64(i))
}
