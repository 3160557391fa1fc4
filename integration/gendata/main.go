// Command gendata writes a synthetic ImageNet-style training tree for tests and benchmarks:
// DIR/class-NNNN/img-NNNNNNN.JPEG, with file sizes drawn from a log-normal distribution.
//
// Every file's size and content come from its own generator seeded with (--seed, file number),
// so the tree is byte-identical for a given seed and size flags whatever --jobs is.
package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/jpeg"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// config holds the flags; see usage text in main for each one's meaning and default.
type config struct {
	files, classes, jobs int
	meanSize             int64
	sigma                float64
	seed                 uint64
	jpeg                 bool
}

func main() {
	var c config
	fl := flag.CommandLine
	fl.IntVar(&c.files, "files", 10000, "number of files to write")
	fl.IntVar(&c.classes, "classes", 100, "number of class directories; files are spread evenly over them")
	fl.Int64Var(&c.meanSize, "mean-size", 112640, "mean file size in bytes")
	fl.Float64Var(&c.sigma, "sigma", 0.5, "sigma of the log-normal size distribution (0 = every file the same size)")
	fl.Uint64Var(&c.seed, "seed", 1, "random seed; the same seed and size flags give the same tree byte for byte")
	fl.BoolVar(&c.jpeg, "jpeg", false, "write decodable JPEGs (textured noise, quality 90) of about the drawn size instead of random bytes")
	fl.IntVar(&c.jobs, "jobs", runtime.NumCPU(), "files written in parallel (does not change the output)")
	fl.Usage = func() {
		fmt.Fprintf(fl.Output(), "Usage: gendata [flags] DIR\n\n"+
			"Writes a synthetic ImageNet-style tree DIR/class-NNNN/img-NNNNNNN.JPEG with log-normally\n"+
			"distributed sizes. DIR must be missing or empty. Flags:\n\n")
		fl.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		fl.Usage()
		os.Exit(2)
	}
	if c.files < 0 || c.classes < 1 || c.jobs < 1 || c.meanSize < 1 || c.sigma < 0 {
		fmt.Fprintln(os.Stderr, "gendata: --files must be >= 0; --classes, --jobs, --mean-size >= 1; --sigma >= 0")
		os.Exit(2)
	}
	start := time.Now()
	total, err := generate(flag.Arg(0), c)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gendata: %v\n", err)
		os.Exit(1)
	}
	secs := time.Since(start).Seconds()
	fmt.Printf("wrote %d files in %d classes to %s: %d bytes (%.2f GB), mean %.0f bytes, in %.2f s (%.0f MB/s)\n",
		c.files, min(c.classes, max(c.files, 1)), flag.Arg(0), total, float64(total)/1e9,
		float64(total)/max(float64(c.files), 1), secs, float64(total)/1e6/max(secs, 1e-9))
}

// classOf returns the class of file i: files are split into contiguous, nearly equal blocks,
// so a sorted walk sees each class's files together as in ImageNet.
func classOf(i, files, classes int) int { return int(int64(i) * int64(classes) / int64(max(files, 1))) }

// filePath returns the path of file i relative to the tree root.
func filePath(i int, c config) string {
	return filepath.Join(fmt.Sprintf("class-%04d", classOf(i, c.files, c.classes)), fmt.Sprintf("img-%07d.JPEG", i))
}

// fileRNG returns file i's private generator; nothing else draws from it, so its output does
// not depend on the order in which workers take files.
func fileRNG(seed uint64, i int) *rand.PCG { return rand.NewPCG(seed, uint64(i)) }

// drawSize draws a log-normal size whose mean is mean: with mu = ln(mean) - sigma²/2,
// E[exp(mu + sigma·Z)] = exp(mu + sigma²/2) = mean.
func drawSize(r *rand.Rand, mean int64, sigma float64) int {
	mu := math.Log(float64(mean)) - sigma*sigma/2
	return max(1, int(math.Round(math.Exp(mu+sigma*r.NormFloat64()))))
}

// fillRandom fills b with bytes from p, 8 at a time (about 3 GB/s per core with PCG).
func fillRandom(p *rand.PCG, b []byte) {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], p.Uint64())
	}
	for v := p.Uint64(); i < len(b); i, v = i+1, v>>8 {
		b[i] = byte(v)
	}
}

// generate writes the tree into dir and returns the total bytes written.
func generate(dir string, c config) (int64, error) {
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return 0, fmt.Errorf("%s is not empty; give a new or empty directory", dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	// No empty classes: with fewer files than classes, each file gets its own class.
	c.classes = min(c.classes, max(c.files, 1))
	// Create the class directories up front so workers only write files.
	for k := range c.classes {
		if err := os.MkdirAll(filepath.Join(dir, fmt.Sprintf("class-%04d", k)), 0o755); err != nil {
			return 0, err
		}
	}
	bpp := 0.0
	if c.jpeg {
		bpp = calibrateJPEG()
	}
	var (
		next, total atomic.Int64
		wg          sync.WaitGroup
		errOnce     sync.Once
		firstErr    error
	)
	// Workers claim file numbers from a shared counter until all are taken or one fails.
	for range c.jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			for {
				i := int(next.Add(1) - 1)
				if i >= c.files {
					return
				}
				p := fileRNG(c.seed, i)
				r := rand.New(p)
				size := drawSize(r, c.meanSize, c.sigma)
				var data []byte
				if c.jpeg {
					data = makeJPEG(r, size, bpp)
				} else {
					if cap(buf) < size {
						buf = make([]byte, size+size/4)
					}
					data = buf[:size]
					fillRandom(p, data)
				}
				if err := os.WriteFile(filepath.Join(dir, filePath(i, c)), data, 0o644); err != nil {
					errOnce.Do(func() { firstErr = err })
					next.Store(int64(c.files)) // stop the other workers
					return
				}
				total.Add(int64(len(data)))
			}
		}()
	}
	wg.Wait()
	return total.Load(), firstErr
}

// jpegQuality is the encoder quality; ImageNet's JPEGs are mostly around 90.
const jpegQuality = 90

// texture draws an RGB image of a smooth colour gradient plus noise of ±24 levels, which
// compresses to roughly the bytes per pixel of a natural photo at quality 90.
func texture(r *rand.Rand, w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	var base [3]int
	for ch := range base {
		base[ch] = r.IntN(160)
	}
	var bits uint64 // noise source: one Uint64 gives 8 noise values
	left := 0
	for y := range h {
		row := img.Pix[y*img.Stride : y*img.Stride+4*w]
		for x := range w {
			gx, gy := 48*x/w, 48*y/h
			for ch := range 3 {
				if left == 0 {
					bits, left = r.Uint64(), 8
				}
				// Channel gradients differ in direction so the colour varies across the image.
				v := base[ch] + gy + gx*(ch%2*2-1) + int(bits&0xff)%49 - 24
				bits, left = bits>>8, left-1
				row[4*x+ch] = uint8(min(255, max(0, v)))
			}
			row[4*x+3] = 255
		}
	}
	return img
}

// calibrateJPEG measures the encoded bytes per pixel of the texture once, on a fixed image.
func calibrateJPEG() float64 {
	const w, h = 400, 300
	n := encodedSize(texture(rand.New(rand.NewPCG(0, 0)), w, h))
	return float64(n) / (w * h)
}

func encodedSize(img image.Image) int { return len(encode(img)) }

// encode returns img as a JPEG; encoding into memory cannot fail.
func encode(img image.Image) []byte {
	var b bytes.Buffer
	jpeg.Encode(&b, img, &jpeg.Options{Quality: jpegQuality})
	return b.Bytes()
}

// makeJPEG encodes a textured image sized (4:3) so its file lands near target bytes; the header
// (~600 bytes) makes very small targets come out larger.
func makeJPEG(r *rand.Rand, target int, bpp float64) []byte {
	px := float64(target) / bpp
	w := max(8, int(math.Round(math.Sqrt(px*4/3))))
	h := max(8, int(math.Round(px/float64(w))))
	return encode(texture(r, w, h))
}
