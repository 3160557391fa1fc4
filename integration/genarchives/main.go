// Command genarchives writes synthetic archives for the index benchmarks (integration/bench
// tars.sh and zips.sh): -n archives DIR/train-NNNNNN.tar (or .zip, stored members) of -members
// members each, KEY.bin (KEY the sample's number over all archives), of random bytes whose sizes
// are uniform over size/2..3*size/2. The same flags give the same archives, whatever the number
// of writers.
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
	"sync"
	"time"
)

func main() {
	format := flag.String("format", "tar", "tar or zip")
	n := flag.Int("n", 1000, "archives to write")
	members := flag.Int("members", 1280, "members in an archive")
	size := flag.Int("size", 1024, "mean member size in bytes")
	flag.Parse()
	dir := flag.Arg(0)
	if dir == "" || *format != "tar" && *format != "zip" {
		log.Fatal("usage: genarchives [-format tar|zip] [-n N] [-members M] [-size BYTES] DIR")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range runtime.NumCPU() {
		wg.Go(func() {
			for i := range next {
				path := filepath.Join(dir, fmt.Sprintf("train-%06d.%s", i, *format))
				if err := write(path, *format, i, *members, *size); err != nil {
					log.Fatal(err)
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

// archive is what write needs of a tar or ZIP writer.
type archive interface {
	add(name string, data []byte) error
	Close() error
}

type tarArchive struct{ *tar.Writer }

func (a tarArchive) add(name string, data []byte) error {
	h := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o444, Size: int64(len(data)),
		ModTime: time.Unix(1700000000, 0), Uname: "bigdata", Gname: "bigdata", Format: tar.FormatUSTAR}
	if err := a.WriteHeader(h); err != nil {
		return err
	}
	_, err := a.Write(data)
	return err
}

type zipArchive struct{ *zip.Writer }

func (a zipArchive) add(name string, data []byte) error {
	w, err := a.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store, Modified: time.Unix(1700000000, 0)})
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}

func newArchive(format string, w io.Writer) archive {
	if format == "zip" {
		return zipArchive{zip.NewWriter(w)}
	}
	return tarArchive{tar.NewWriter(w)}
}

func write(path, format string, i, members, size int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	a := newArchive(format, bw)
	src := rand.NewChaCha8([32]byte{byte(i), byte(i >> 8), byte(i >> 16), byte(i >> 24)})
	rng := rand.New(src)
	buf := make([]byte, size*3/2+1)
	for k := range members {
		data := buf[:size/2+rng.IntN(size+1)]
		src.Read(data)
		if err := a.add(fmt.Sprintf("%09d.bin", i*members+k), data); err != nil {
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
