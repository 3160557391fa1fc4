// Command genarchives writes archives for the index benchmarks (integration/bench tars.sh and
// formats.sh) in one of five formats: tar, zip (stored members), tfrecord (tf.train.Example
// records with the ImageNet script's keys, written by internal/tfwrite), arrow (an Arrow IPC
// stream with the schema and metadata Hugging Face `datasets` writes for an image set: image
// struct{bytes, path}, label ClassLabel) or parquet (the same rows as `datasets` >= 4.6 writes
// them: uncompressed, PLAIN, no dictionary). Arrow record batches and Parquet row groups hold
// 100 rows, as `datasets` writes image sets.
//
// Without -tree it writes -n archives DIR/train-NNNNNN.EXT of -members samples each, KEY.bin
// (KEY the sample's number over all archives), of random bytes whose sizes are uniform over
// size/2..3*size/2, labelled KEY % 1000. With -tree SRC it writes the files of the ImageFolder
// tree SRC (CLASS/NAME, in path order) into -n archives, contiguous runs of the sorted files,
// each keeping its class and name (ZIP member CLASS/NAME, TFRecord synset and file name, HF
// label and path), so that each format's imagefolder view shows SRC again. The same flags give
// the same archives, whatever the number of writers.
package main

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/aifs/aifs/integration/hfwrite"
	"github.com/aifs/aifs/internal/tfwrite"
)

// extensions of the formats' files, by format.
var extensions = map[string]string{"tar": "tar", "zip": "zip", "tfrecord": "tfrecord", "arrow": "arrow", "parquet": "parquet"}

// randomClasses is the number of classes of the random samples.
const randomClasses = 1000

// sample is one sample to write: its class (index into the archive's class names), its name
// (a ZIP or tar member's path, a TFRecord's file name, an HF row's path) and its bytes.
type sample struct {
	class int
	name  string
	data  []byte
}

func main() {
	format := flag.String("format", "tar", "tar, zip, tfrecord, arrow or parquet")
	n := flag.Int("n", 1000, "archives to write")
	members := flag.Int("members", 1280, "random samples in an archive (without -tree)")
	size := flag.Int("size", 1024, "mean random sample size in bytes (without -tree)")
	tree := flag.String("tree", "", "write the files of this ImageFolder tree (CLASS/NAME) instead of random samples")
	flag.Parse()
	dir := flag.Arg(0)
	if dir == "" || extensions[*format] == "" || *n < 1 {
		log.Fatal("usage: genarchives [-format tar|zip|tfrecord|arrow|parquet] [-n N] [-members M] [-size BYTES] [-tree SRC] DIR")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	var classes, files []string
	if *tree != "" {
		var err error
		if classes, files, err = listTree(*tree); err != nil {
			log.Fatal(err)
		}
	} else {
		for c := range randomClasses {
			classes = append(classes, fmt.Sprintf("c%04d", c))
		}
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range runtime.NumCPU() {
		wg.Go(func() {
			for i := range next {
				path := filepath.Join(dir, fmt.Sprintf("train-%06d.%s", i, extensions[*format]))
				var samples func(yield func(sample) bool)
				if *tree != "" {
					lo, hi := i*len(files) / *n, (i+1)*len(files) / *n
					samples = treeSamples(*tree, classes, files[lo:hi])
				} else {
					samples = randomSamples(i, *members, *size)
				}
				if err := write(path, *format, classes, samples); err != nil {
					log.Fatalf("%s: %v", path, err)
				}
			}
		})
	}
	for i := range *n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// listTree returns the class directories of the ImageFolder tree src, sorted, and its files as
// CLASS/NAME paths in sorted order.
func listTree(src string) (classes, files []string, err error) {
	dirs, err := os.ReadDir(src)
	if err != nil {
		return nil, nil, err
	}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		classes = append(classes, d.Name())
		ents, err := os.ReadDir(filepath.Join(src, d.Name()))
		if err != nil {
			return nil, nil, err
		}
		for _, e := range ents {
			if e.Type().IsRegular() {
				files = append(files, d.Name()+"/"+e.Name())
			}
		}
	}
	return classes, files, nil
}

// treeSamples yields the files of the tree src, their classes numbered as in classes.
func treeSamples(src string, classes, files []string) func(yield func(sample) bool) {
	return func(yield func(sample) bool) {
		for _, f := range files {
			data, err := os.ReadFile(filepath.Join(src, f))
			if err != nil {
				log.Fatal(err)
			}
			class, _ := slices.BinarySearch(classes, filepath.Dir(f))
			if !yield(sample{class, f, data}) {
				return
			}
		}
	}
}

// randomSamples yields archive i's members random samples, their bytes from a generator seeded
// by i (the slice is reused: a writer copies it before the next).
func randomSamples(i, members, size int) func(yield func(sample) bool) {
	return func(yield func(sample) bool) {
		src := rand.NewChaCha8([32]byte{byte(i), byte(i >> 8), byte(i >> 16), byte(i >> 24)})
		rng := rand.New(src)
		buf := make([]byte, size*3/2+1)
		for k := range members {
			key := i*members + k
			data := buf[:size/2+rng.IntN(size+1)]
			src.Read(data)
			if !yield(sample{key % randomClasses, fmt.Sprintf("%09d.bin", key), data}) {
				return
			}
		}
	}
}

// archive is what write needs of a writer of one of the formats.
type archive interface {
	add(s sample) error
	Close() error
}

type tarArchive struct{ *tar.Writer }

func (a tarArchive) add(s sample) error {
	h := &tar.Header{Typeflag: tar.TypeReg, Name: s.name, Mode: 0o444, Size: int64(len(s.data)),
		ModTime: time.Unix(1700000000, 0), Uname: "bigdata", Gname: "bigdata", Format: tar.FormatUSTAR}
	if err := a.WriteHeader(h); err != nil {
		return err
	}
	_, err := a.Write(s.data)
	return err
}

type zipArchive struct{ *zip.Writer }

func (a zipArchive) add(s sample) error {
	w, err := a.CreateHeader(&zip.FileHeader{Name: s.name, Method: zip.Store, Modified: time.Unix(1700000000, 0)})
	if err != nil {
		return err
	}
	_, err = w.Write(s.data)
	return err
}

// tfrecordArchive writes the ImageNet script's keys: image/encoded, image/class/label (1-based),
// image/class/synset and image/filename (the sample's base name).
type tfrecordArchive struct {
	w       io.Writer
	classes []string
	buf     []byte
}

func (a *tfrecordArchive) add(s sample) error {
	ex := tfwrite.Example(tfwrite.Bytes("image/encoded", s.data), tfwrite.Int("image/class/label", int64(s.class+1)),
		tfwrite.Bytes("image/class/synset", []byte(a.classes[s.class])), tfwrite.Bytes("image/filename", []byte(filepath.Base(s.name))))
	a.buf = tfwrite.AppendRecord(a.buf[:0], ex)
	_, err := a.w.Write(a.buf)
	return err
}

func (a *tfrecordArchive) Close() error { return nil }

// hfRows is the rows of an Arrow stream or Parquet file as `datasets` writes an image set, a
// batch of 100 rows at a time.
type hfRows struct {
	b     *array.RecordBuilder
	flush func(arrow.RecordBatch) error
	close func() error
}

// hfBatchRows is the rows in an Arrow record batch or Parquet row group.
const hfBatchRows = 100

func newHFRows(format string, w io.Writer, classes []string) (*hfRows, error) {
	schema := hfwrite.Schema(classes)
	r := &hfRows{b: array.NewRecordBuilder(memory.NewGoAllocator(), schema)}
	if format == "arrow" {
		iw := ipc.NewWriter(w, ipc.WithSchema(schema))
		r.flush, r.close = iw.Write, iw.Close
		return r, nil
	}
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Uncompressed),
		parquet.WithDictionaryDefault(false), parquet.WithMaxRowGroupLength(hfBatchRows))
	pw, err := pqarrow.NewFileWriter(schema, w, props, pqarrow.DefaultWriterProps())
	if err != nil {
		return nil, err
	}
	r.flush, r.close = pw.Write, pw.Close
	return r, nil
}

func (r *hfRows) add(s sample) error {
	img := r.b.Field(0).(*array.StructBuilder)
	img.Append(true)
	img.FieldBuilder(0).(*array.BinaryBuilder).Append(s.data)
	img.FieldBuilder(1).(*array.StringBuilder).Append(s.name)
	r.b.Field(1).(*array.Int64Builder).Append(int64(s.class))
	if img.Len() < hfBatchRows {
		return nil
	}
	return r.writeBatch()
}

func (r *hfRows) writeBatch() error {
	rec := r.b.NewRecordBatch()
	defer rec.Release()
	return r.flush(rec)
}

func (r *hfRows) Close() error {
	defer r.b.Release()
	if r.b.Field(0).Len() > 0 {
		if err := r.writeBatch(); err != nil {
			return err
		}
	}
	return r.close()
}

func newArchive(format string, w io.Writer, classes []string) (archive, error) {
	switch format {
	case "zip":
		return zipArchive{zip.NewWriter(w)}, nil
	case "tfrecord":
		return &tfrecordArchive{w: w, classes: classes}, nil
	case "arrow", "parquet":
		return newHFRows(format, w, classes)
	}
	return tarArchive{tar.NewWriter(w)}, nil
}

func write(path, format string, classes []string, samples func(yield func(sample) bool)) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	a, err := newArchive(format, bw, classes)
	if err != nil {
		return err
	}
	for s := range samples {
		if err := a.add(s); err != nil {
			return err
		}
	}
	if err := a.Close(); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return f.Close()
}
