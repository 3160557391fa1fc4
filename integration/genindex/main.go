// Command genindex writes a shard set of N samples without N source files, to measure an index
// at LAION scale (10 M, 100 M samples) on one machine: an ImageNet-like tree
// DIR/nCLASS/nCLASS_NUMBER.JPEG of --samples files over --dirs directories, its index written
// entry by entry with layout.IndexWriter (as aifs pack writes it), over sparse shard files. Only
// --real samples, evenly spaced, hold bytes of their own (a pattern of their number); the others
// read as zeros. Every checksum is real, so the set passes aifs verify and -o verify=on.
//
// It prints one JSON line: samples, dirs, entries, index_bytes, shards, seconds. DIR/real.txt
// lists each real sample's path and CRC32C (hex), a line each, for tests to read back.
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/aifs/aifs/layout"
)

type config struct {
	samples, dirs, real int
	size, shardSize     uint64
}

func main() {
	var c config
	fl := flag.CommandLine
	fl.IntVar(&c.samples, "samples", 1_281_167, "number of samples (files)")
	fl.IntVar(&c.dirs, "dirs", 1000, "number of class directories (at most 105,185); samples are spread evenly over them")
	fl.IntVar(&c.real, "real", 1000, "samples, evenly spaced, that hold bytes of their own; the rest read as zeros")
	fl.Uint64Var(&c.size, "size", 112640, "bytes per sample")
	fl.Uint64Var(&c.shardSize, "shard-size", 1<<30, "bytes per shard (sparse files)")
	fl.Usage = func() {
		fmt.Fprintf(fl.Output(), "Usage: genindex [flags] DIR\n\n"+
			"Writes a shard set of --samples samples in --dirs directories into DIR (missing or\n"+
			"empty): sparse shards and an index written as aifs pack writes one. Flags:\n\n")
		fl.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 || c.samples < 1 || c.dirs < 1 || c.dirs > c.samples || c.dirs > maxDirs || c.real < 0 || c.real > c.samples ||
		c.size < 8 || c.shardSize < c.size {
		fl.Usage()
		os.Exit(2)
	}
	start := time.Now()
	out, err := generate(flag.Arg(0), c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "genindex:", err)
		os.Exit(1)
	}
	out["seconds"] = time.Since(start).Seconds()
	json.NewEncoder(os.Stdout).Encode(out)
}

// pattern fills b with the bytes of real sample i: 8-byte little-endian words of a multiplicative
// hash of (i, word number).
func pattern(i uint64, b []byte) {
	for w := 0; w+8 <= len(b); w += 8 {
		binary.LittleEndian.PutUint64(b[w:], (i<<20+uint64(w))*0x9e3779b97f4a7c15)
	}
}

// className is the name of class directory c: "n" and 8 digits, ascending in c up to maxDirs.
func className(c int) string { return fmt.Sprintf("n%08d", 1440764+c*937) }

// maxDirs is the most class directories whose names className keeps at 8 digits, so in order.
const maxDirs = (100_000_000 - 1440764) / 937

func generate(dir string, c config) (map[string]any, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) > 0 {
		return nil, fmt.Errorf("%s must be missing or empty", dir)
	}
	perShard := c.shardSize / c.size
	nShards := (uint64(c.samples) + perShard - 1) / perShard
	entries := 1 + c.dirs + c.samples
	tmp := filepath.Join(dir, ".tmp-"+layout.IndexName)
	f, err := os.Create(tmp)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	w := layout.NewIndexWriter(f, entries, false)
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	w.Add(nil, layout.Entry{Mode: 0o040755, MTime: now, FirstChild: 1, NumChildren: uint32(c.dirs)})
	count := func(d int) int { return c.samples/c.dirs + btoi(d < c.samples%c.dirs) }
	first := 1 + c.dirs
	for d := range c.dirs {
		w.Add([]byte(className(d)), layout.Entry{Parent: layout.Root, Mode: 0o040755, MTime: now,
			FirstChild: layout.ID(first), NumChildren: uint32(count(d))})
		first += count(d)
	}

	// Shards: sparse, the real samples written in; each shard's CRC32C folds the zeros between.
	shards := make([]layout.Shard, nShards)
	zeroCRC := layout.Checksum(make([]byte, c.size))
	every := 0
	if c.real > 0 {
		every = c.samples / c.real
	}
	realList, err := os.Create(filepath.Join(dir, "real.txt"))
	if err != nil {
		return nil, err
	}
	defer realList.Close()
	rl := bufio.NewWriter(realList)
	buf := make([]byte, c.size)
	var shard *os.File
	var shardCRC, shardPos uint64 // CRC so far (as uint32) and bytes folded into it
	closeShard := func(s uint64) error {
		if shard == nil {
			return nil
		}
		size := min(perShard, uint64(c.samples)-s*perShard) * c.size
		crc := zeroExtend(uint32(shardCRC), size-shardPos)
		shards[s] = layout.Shard{Name: layout.ShardName(int(s)), Kind: layout.ShardData, Size: size, CRC: crc}
		err := shard.Truncate(int64(size))
		if cerr := shard.Close(); err == nil {
			err = cerr
		}
		shard = nil
		return err
	}
	var name []byte
	i := 0
	for d := range c.dirs {
		class := className(d)
		for k := range count(d) {
			s, off := uint64(i)/perShard, uint64(i)%perShard*c.size
			if off == 0 {
				if err := closeShard(s - 1); err != nil {
					return nil, err
				}
				if shard, err = os.Create(filepath.Join(dir, layout.ShardName(int(s)))); err != nil {
					return nil, err
				}
				shardCRC, shardPos = 0, 0
			}
			crc := zeroCRC
			if every > 0 && i%every == 0 && i/every < c.real {
				pattern(uint64(i), buf)
				crc = layout.Checksum(buf)
				if _, err := shard.WriteAt(buf, int64(off)); err != nil {
					return nil, err
				}
				shardCRC = uint64(layout.UpdateChecksum(zeroExtend(uint32(shardCRC), off-shardPos), buf))
				shardPos = off + c.size
				fmt.Fprintf(rl, "%s/%s_%08d.JPEG\t%08x\n", class, class, k, crc)
			}
			name = append(appendPadded(append(append(name[:0], class...), '_'), k), ".JPEG"...)
			w.Add(name, layout.Entry{Parent: layout.ID(1 + d), Mode: 0o100644, MTime: now,
				Shard: uint32(s), Offset: off, Size: c.size, CRC: crc})
			i++
		}
	}
	if err := closeShard(uint64(c.samples-1) / perShard); err != nil {
		return nil, err
	}
	size, err := w.Finish(shards, nil)
	if err != nil {
		return nil, err
	}
	if err := rl.Flush(); err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, filepath.Join(dir, layout.IndexName)); err != nil {
		return nil, err
	}
	return map[string]any{"samples": c.samples, "dirs": c.dirs, "entries": entries, "index_bytes": size,
		"shards": nShards, "real": c.real}, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// zeroExtend returns the CRC32C of the bytes whose CRC32C is crc followed by n zero bytes,
// in O(log n): the CRC register's step over a zero byte is linear over GF(2), so n steps are one
// 32×32 bit matrix, its power found by squaring.
func zeroExtend(crc uint32, n uint64) uint32 {
	if n == 0 {
		return crc
	}
	tab := crc32.MakeTable(crc32.Castagnoli)
	var step [32]uint32 // column j: the register after one zero byte from register 1<<j
	for j := range step {
		r := uint32(1) << j
		step[j] = r>>8 ^ tab[r&0xff]
	}
	// The inversions before and after (Go's crc32.Update) make it affine: extend ^crc, invert back.
	r := ^crc
	for ; n > 0; n >>= 1 {
		if n&1 != 0 {
			r = apply(&step, r)
		}
		step = square(&step)
	}
	return ^r
}

func apply(m *[32]uint32, v uint32) (out uint32) {
	for j := 0; v != 0; j, v = j+1, v>>1 {
		if v&1 != 0 {
			out ^= m[j]
		}
	}
	return out
}

func square(m *[32]uint32) (sq [32]uint32) {
	for j := range sq {
		sq[j] = apply(m, m[j])
	}
	return sq
}

// appendPadded appends k in decimal, zero-padded to 8 digits.
func appendPadded(b []byte, k int) []byte {
	var d [20]byte
	s := strconv.AppendInt(d[:0], int64(k), 10)
	for range 8 - len(s) {
		b = append(b, '0')
	}
	return append(b, s...)
}
