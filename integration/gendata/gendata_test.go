package main

import (
	"bytes"
	"image/jpeg"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestSizeDistribution checks that drawn sizes have the requested mean and log-sigma.
func TestSizeDistribution(t *testing.T) {
	const n, mean, sigma = 200000, 112640, 0.5
	var sum, sumLog, sumLog2 float64
	for i := range n {
		s := float64(drawSize(rand.New(fileRNG(1, i)), mean, sigma))
		sum, sumLog, sumLog2 = sum+s, sumLog+math.Log(s), sumLog2+math.Log(s)*math.Log(s)
	}
	gotMean := sum / n
	gotSigma := math.Sqrt(sumLog2/n - (sumLog/n)*(sumLog/n))
	// The standard error of the mean is about mean·0.53/√n ≈ 0.12%; allow 1%.
	if math.Abs(gotMean/mean-1) > 0.01 {
		t.Errorf("mean size %.0f, want %d ±1%%", gotMean, mean)
	}
	if math.Abs(gotSigma-sigma) > 0.01 {
		t.Errorf("log-sigma %.4f, want %.2f ±0.01", gotSigma, sigma)
	}
	if s := drawSize(rand.New(fileRNG(1, 0)), mean, 0); s != mean {
		t.Errorf("sigma 0 gave size %d, want %d", s, mean)
	}
}

// TestDeterministic generates the same small tree with 1 and 4 writers and compares them.
func TestDeterministic(t *testing.T) {
	for _, useJPEG := range []bool{false, true} {
		c := config{files: 37, classes: 5, meanSize: 8 << 10, sigma: 0.5, seed: 7, jpeg: useJPEG}
		a, b := t.TempDir(), t.TempDir()
		c.jobs = 1
		ta, err := generate(a, c)
		if err != nil {
			t.Fatal(err)
		}
		c.jobs = 4
		if _, err := generate(b, c); err != nil {
			t.Fatal(err)
		}
		treeA, treeB := readTree(t, a), readTree(t, b)
		if len(treeA) != c.files || len(treeB) != c.files {
			t.Fatalf("jpeg=%v: got %d and %d files, want %d", useJPEG, len(treeA), len(treeB), c.files)
		}
		var sum int64
		for p, d := range treeA {
			if !bytes.Equal(d, treeB[p]) {
				t.Errorf("jpeg=%v: %s differs between --jobs 1 and 4", useJPEG, p)
			}
			if useJPEG {
				if _, err := jpeg.Decode(bytes.NewReader(d)); err != nil {
					t.Errorf("%s does not decode: %v", p, err)
				}
			}
			sum += int64(len(d))
		}
		if sum != ta {
			t.Errorf("jpeg=%v: reported %d bytes, tree holds %d", useJPEG, ta, sum)
		}
	}
}

// TestJPEGSize checks that JPEG files land near their drawn size on average.
func TestJPEGSize(t *testing.T) {
	bpp := calibrateJPEG()
	var got, want float64
	for i := range 20 {
		r := rand.New(fileRNG(3, i))
		size := drawSize(r, 110<<10, 0.5)
		got, want = got+float64(len(makeJPEG(r, size, bpp))), want+float64(size)
	}
	if math.Abs(got/want-1) > 0.1 {
		t.Errorf("JPEGs total %.0f bytes for targets totalling %.0f (want within 10%%)", got, want)
	}
}

func TestNonEmptyDir(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "x"), nil, 0o644)
	if _, err := generate(dir, config{files: 1, classes: 1, jobs: 1, meanSize: 10}); err == nil {
		t.Error("generate into a non-empty directory succeeded")
	}
}

func readTree(t *testing.T, root string) map[string][]byte {
	m := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		m[rel], err = os.ReadFile(p)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}
