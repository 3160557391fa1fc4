package hfarrow

import (
	"encoding/binary"
	"errors"
	"fmt"
)

var errSnappy = errors.New("snappy: corrupt input")

// unsnappy decodes a snappy block (the format, not the framed stream: what Parquet's SNAPPY
// codec stores) into dst's storage, checking it decodes to want bytes. Parquet's label and path
// columns are read so; the image bytes never are.
func unsnappy(dst, src []byte, want int) ([]byte, error) {
	n, k := binary.Uvarint(src)
	if k <= 0 || n != uint64(want) {
		return nil, fmt.Errorf("snappy: a block of %d bytes where the page says %d: %w", n, want, errSnappy)
	}
	src = src[k:]
	if want > 22*len(src)+32 { // no element expands its bytes more than 64/3 times
		return nil, fmt.Errorf("snappy: %d bytes cannot decode to %d: %w", len(src), want, errSnappy)
	}
	dst = dst[:0]
	if cap(dst) < want {
		dst = make([]byte, 0, want)
	}
	for len(src) > 0 {
		tag := src[0]
		var length, offset int
		switch tag & 3 {
		case 0: // literal
			length = int(tag>>2) + 1
			src = src[1:]
			if length > 60 {
				nb := length - 60 // 1 to 4 bytes of length-1 follow
				if len(src) < nb {
					return nil, errSnappy
				}
				var l uint32
				for i := range nb {
					l |= uint32(src[i]) << (8 * i)
				}
				length, src = int(l)+1, src[nb:]
			}
			if length <= 0 || length > len(src) || length > want-len(dst) {
				return nil, errSnappy
			}
			dst, src = append(dst, src[:length]...), src[length:]
			continue
		case 1:
			if len(src) < 2 {
				return nil, errSnappy
			}
			length, offset = 4+int(tag>>2&7), int(tag>>5)<<8|int(src[1])
			src = src[2:]
		case 2:
			if len(src) < 3 {
				return nil, errSnappy
			}
			length, offset = 1+int(tag>>2), int(binary.LittleEndian.Uint16(src[1:]))
			src = src[3:]
		case 3:
			if len(src) < 5 {
				return nil, errSnappy
			}
			length, offset = 1+int(tag>>2), int(binary.LittleEndian.Uint32(src[1:]))
			src = src[5:]
		}
		if offset <= 0 || offset > len(dst) || length > want-len(dst) {
			return nil, errSnappy
		}
		for range length { // byte by byte: a copy may overlap what it writes
			dst = append(dst, dst[len(dst)-offset])
		}
	}
	if len(dst) != want {
		return nil, errSnappy
	}
	return dst, nil
}
