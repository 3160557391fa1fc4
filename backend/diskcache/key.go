package diskcache

import (
	"crypto/sha256"
	"encoding/binary"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/aifs/aifs/internal/subset"
)

// chunkKey identifies one chunk of one version of one shard. It is the key of the in-memory
// set and names the chunk's file.
type chunkKey struct {
	// name is a hash of (Namespace, shard name): it picks the file's directory and prefixes
	// its name, so that Open can find and remove the chunks of other versions of the shard.
	name uint64
	// ver is a hash of everything that identifies the bytes and their cutting: Namespace,
	// shard name, size, CRC32C, version (ETag), chunk size. 128 bits: a collision would serve
	// another shard's bytes, so it must not happen by chance.
	ver [2]uint64
	idx int64 // chunk index in the shard
}

// keyFormat versions the keys, and so the file names: a change of format never reads the
// files of another.
const keyFormat = "aifs-diskcache/1"

// shardIDs returns the name and ver parts of the keys of a shard's chunks.
func shardIDs(namespace, name string, size int64, crc uint32, version string, chunk int64) (uint64, [2]uint64) {
	h := sha256.New()
	str := func(s string) {
		h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(s))))
		h.Write([]byte(s))
	}
	str(keyFormat)
	str(namespace)
	str(name)
	nameSum := h.Sum(nil)
	h.Reset()
	h.Write(nameSum)
	var b []byte
	b = binary.BigEndian.AppendUint64(b, uint64(size))
	b = binary.BigEndian.AppendUint32(b, crc)
	b = binary.BigEndian.AppendUint64(b, uint64(chunk))
	h.Write(b)
	str(version)
	sum := h.Sum(nil)
	return binary.BigEndian.Uint64(nameSum), [2]uint64{binary.BigEndian.Uint64(sum), binary.BigEndian.Uint64(sum[8:])}
}

// rank places a chunk in [0, 2^64): the stable subset keeps the chunks of lowest rank. It is
// a hash of the key, the same in every process and every run.
func (k chunkKey) rank() uint64 {
	return subset.Mix(k.ver[0] ^ subset.Mix(k.ver[1]+uint64(k.idx)*subset.Golden))
}

// part picks the lock stripe of the set and of the flights.
func (k chunkKey) part() int {
	return int((k.ver[0] + uint64(k.idx)*subset.Golden) >> (64 - partBits))
}

// A chunk's file is DIR/FF/NNNNNNNNNNNNNNNN-VVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVV-IDX-LEN: FF and N
// are the name hash (FF its top byte: 256 directories), V the version hash, IDX the chunk
// index and LEN its length, both decimal. The length in the name lets a scan account for the
// file without a stat; a file whose real length differs is torn and never served.

const hexDigits = "0123456789abcdef"

func appendHex(b []byte, v uint64, digits int) []byte {
	for sh := (digits - 1) * 4; sh >= 0; sh -= 4 {
		b = append(b, hexDigits[v>>sh&15])
	}
	return b
}

// fanDir returns the directory of chunks whose name hash is name.
func fanDir(dir string, name uint64) string {
	return filepath.Join(dir, string(appendHex(nil, name>>56, 2)))
}

// fileName returns the file name (no directory) of chunk k of size bytes.
func fileName(k chunkKey, size int64) string {
	b := make([]byte, 0, 96)
	b = appendHex(b, k.name, 16)
	b = append(b, '-')
	b = appendHex(b, k.ver[0], 16)
	b = appendHex(b, k.ver[1], 16)
	b = append(b, '-')
	b = strconv.AppendInt(b, k.idx, 10)
	b = append(b, '-')
	b = strconv.AppendInt(b, size, 10)
	return string(b)
}

// parseName parses a file name made by fileName; ok is false for any other name.
func parseName(name string) (k chunkKey, size int64, ok bool) {
	f := strings.Split(name, "-")
	if len(f) != 4 || len(f[0]) != 16 || len(f[1]) != 32 {
		return k, 0, false
	}
	hex := func(s string) (uint64, bool) {
		v, err := strconv.ParseUint(s, 16, 64)
		return v, err == nil && strings.ToLower(s) == s
	}
	var ok1, ok2, ok3 bool
	k.name, ok1 = hex(f[0])
	k.ver[0], ok2 = hex(f[1][:16])
	k.ver[1], ok3 = hex(f[1][16:])
	idx, err1 := strconv.ParseInt(f[2], 10, 64)
	size, err2 := strconv.ParseInt(f[3], 10, 64)
	if !ok1 || !ok2 || !ok3 || err1 != nil || err2 != nil || idx < 0 || size <= 0 ||
		strconv.FormatInt(idx, 10) != f[2] || strconv.FormatInt(size, 10) != f[3] {
		return k, 0, false
	}
	k.idx = idx
	return k, size, true
}
