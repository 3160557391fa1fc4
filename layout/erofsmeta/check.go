// Package erofsmeta turns a shard set's index into a metadata-only EROFS image, which the
// kernel's EROFS mounts to serve the set's bytes from the shards themselves (the kernel data
// plane, docs/design.md): device i+1 of the image is shard i of the index, and every regular
// file of the tree is an inode whose chunk index points at its extent in its shard. The image
// holds no sample bytes, only the tree: names, modes, sizes, mtimes (to the nanosecond).
//
// Check says whether a set can be served so (every sample starts on a block boundary of 512
// bytes at least, few enough shards, shards small enough), Build writes the image, Cached keeps
// it beside the index (or in a cache directory) keyed by the index's identity. The bytes of the
// image are the kernel's to parse, so nothing is written from an index before every block of it
// has passed its checks (layout.Index.CheckAll).
//
// The images are written with github.com/erofs/go-erofs; its limits, and the figures of an
// image for 1 M files, are in docs/bench/erofs-notes.md. It imports layout, go-erofs and the
// standard library.
package erofsmeta

import (
	"errors"
	"fmt"
	"math"

	"github.com/aifs/aifs/layout"
)

// The block sizes Check chooses between: 4096 where every sample starts on a 4 KiB boundary
// (what EROFS's directio needs over a disk of 4 KiB sectors), else 512, the smallest EROFS
// takes and the alignment of tar members.
const (
	BlockSize    = 4096
	MinBlockSize = 512
)

// MaxDevices is the most shards an image can name: the superblock counts its extra devices in
// 16 bits, and a chunk index names its device in 16 bits.
const MaxDevices = math.MaxUint16

// NotServable is the error of Check (and Build) for a set that EROFS cannot serve as it is. Its
// Reason is one line that says why and what to do, for the mount's first line and aifs stats.
type NotServable struct {
	Reason string
}

func (e *NotServable) Error() string { return e.Reason }

func notServable(format string, args ...any) error {
	return &NotServable{Reason: fmt.Sprintf(format, args...)}
}

// Check reads and checks every block of x (layout.Index.CheckAll) and every entry, and returns
// the block size the set's image takes: 4096 if every non-empty file's extent starts on a 4 KiB
// boundary and every shard is a whole number of 4 KiB blocks, else 512 if every one is so at
// 512 bytes. A set EROFS cannot serve gives
// a *NotServable; an index that fails its checks gives that error, wrapped. Check reads the whole
// index (O(entries)) and allocates nothing per entry. It does not look at the shards: whether
// they are local files is the caller's to say.
func Check(x *layout.Index) (blockSize int, err error) {
	if err := x.CheckAll(); err != nil {
		return 0, fmt.Errorf("index: %w", err)
	}
	shards := x.Shards()
	if len(shards) > MaxDevices {
		return 0, notServable("the set has %d shards and EROFS takes at most %d devices: repack it with a larger --shard-size", len(shards), MaxDevices)
	}
	blockSize = BlockSize
	for id := range x.Len() {
		e := x.Entry(layout.ID(id))
		switch e.Mode & layout.ModeType {
		case layout.ModeDir:
			continue
		case layout.ModeRegular:
		default:
			if err := x.Err(); err != nil {
				return 0, fmt.Errorf("index: %w", err)
			}
			return 0, notServable("%s is neither a directory nor a regular file (mode %#o)", x.Path(layout.ID(id)), e.Mode)
		}
		if e.Size == 0 || e.Offset%uint64(blockSize) == 0 {
			continue
		}
		if e.Offset%MinBlockSize != 0 {
			return 0, notServable("samples are not aligned to %d bytes (%s starts at byte %d of %s): the set was packed before aifs pack aligned samples; repack it with aifs pack",
				MinBlockSize, x.Path(layout.ID(id)), e.Offset, shards[e.Shard].Name)
		}
		blockSize = MinBlockSize
	}
	if err := x.Err(); err != nil {
		return 0, fmt.Errorf("index: %w", err)
	}
	// EROFS fails a read of a device's last block with EIO where the file ends inside it (a
	// short read of the backing file: Linux 6.18, file-backed, with or without directio), so
	// every shard must be whole blocks: aifs pack pads its shards so, and a tar is 512-byte
	// records.
	for _, s := range shards {
		if s.Size%uint64(blockSize) != 0 {
			blockSize = MinBlockSize
		}
		if s.Size%MinBlockSize != 0 {
			return 0, notServable("shard %s is %d bytes, not a whole number of %d-byte blocks, which EROFS needs: the set was packed before aifs pack aligned samples; repack it with aifs pack",
				s.Name, s.Size, MinBlockSize)
		}
	}
	for _, s := range shards {
		if blocks(s.Size, blockSize) > math.MaxUint32 {
			return 0, notServable("shard %s is %d bytes, more than EROFS's 2^32 blocks of %d bytes a device", s.Name, s.Size, blockSize)
		}
	}
	return blockSize, nil
}

// blocks returns how many blocks of size bs hold n bytes.
func blocks(n uint64, bs int) uint64 { return (n + uint64(bs) - 1) / uint64(bs) }

// errNotLinux is Build's error where it cannot pass owners and mtimes to go-erofs.
var errNotLinux = errors.New("EROFS images are built on Linux only")
