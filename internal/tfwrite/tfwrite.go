// Package tfwrite writes TFRecord files of tf.train.Example records for tests, from the
// documented framing and protocol buffer encoding, independently of layout/tfrecord (which
// reads them): each record is
//
//	u64 length (little endian), u32 masked CRC32C of those 8 bytes, data, u32 masked CRC32C of data
//
// a CRC c masked as ((c >> 15) | (c << 17)) + 0xa282ead8, and an Example is
// Example{1: Features{1: map entry{1: key, 2: Feature{1: BytesList{1: bytes}, 3: Int64List{1:
// packed varints}}}}}. It imports only the standard library.
package tfwrite

import (
	"encoding/binary"
	"hash/crc32"
)

// Mask returns the masked CRC32C of b.
func Mask(b []byte) uint32 {
	c := crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
	return (c>>15 | c<<17) + 0xa282ead8
}

// AppendRecord appends a record of data to file.
func AppendRecord(file, data []byte) []byte {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(data)))
	file = append(file, n[:]...)
	file = binary.LittleEndian.AppendUint32(file, Mask(n[:]))
	file = append(file, data...)
	return binary.LittleEndian.AppendUint32(file, Mask(data))
}

// pbLen appends field num of wire type 2 (length-delimited) holding v.
func pbLen(b []byte, num int, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(num)<<3|2)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// Bytes is a features map entry of key with a bytes_list of one value.
func Bytes(key string, v []byte) []byte {
	return pbLen(pbLen(nil, 1, []byte(key)), 2, pbLen(nil, 1, pbLen(nil, 1, v)))
}

// Int is a features map entry of key with an int64_list of one value (packed).
func Int(key string, v int64) []byte {
	return pbLen(pbLen(nil, 1, []byte(key)), 2, pbLen(nil, 3, pbLen(nil, 1, binary.AppendUvarint(nil, uint64(v)))))
}

// Example returns an Example of the features map entries given.
func Example(entries ...[]byte) []byte {
	var features []byte
	for _, e := range entries {
		features = pbLen(features, 1, e)
	}
	return pbLen(nil, 1, features)
}
