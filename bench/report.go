package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/aifs/aifs/internal/human"
)

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
func compareDigests(rep *Report, sameFiles bool) {
	first := make(map[[2]int]PassStats) // {dir, epoch} → pass, for the passes compared against
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
				p.Epoch, human.Name(p.Dir), p.Digest, human.Name(q.Dir), q.Digest))
			rep.Dirs[p.dir].DigestsMatch = false
		}
		if q, ok := first[[2]int{p.dir, 1}]; ok && sameFiles && p.Epoch != 1 && q.Digest != p.Digest {
			rep.Mismatches = append(rep.Mismatches, fmt.Sprintf("%s: epoch %d read digest %s but epoch 1 read %s from the same files",
				human.Name(p.Dir), p.Epoch, p.Digest, q.Digest))
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

// PrintSummary prints the digest mismatches and, with several DIRs, how each compares
// with the first.
func PrintSummary(w io.Writer, rep *Report) {
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
			human.Name(d.Dir), d.Ratio, human.Name(base.Dir), d.MedianFilesPerS, base.MedianFilesPerS, match)
	}
}
