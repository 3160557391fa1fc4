package tfrecord

// crcPoly is the Castagnoli polynomial, bit-reversed, as hash/crc32 uses it.
const crcPoly = 0x82f63b78

// crcPow2 holds x^(2^k) mod P for k = 0..65 (n < 2^63 bytes needs k < 66), in the bit-reversed representation (bit 31 is
// x^0).
var crcPow2 = func() (t [66]uint32) {
	t[0] = 1 << 30 // x^1
	for k := 1; k < len(t); k++ {
		t[k] = mulModP(t[k-1], t[k-1])
	}
	return t
}()

// mulModP returns a·b mod P, both bit-reversed polynomials.
func mulModP(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		if b&1 != 0 {
			b = b>>1 ^ crcPoly
		} else {
			b >>= 1
		}
	}
	return p
}

// combineCRC returns the CRC32C of A followed by B, given crcA, the CRC32C of A, and crcB, that
// of B, n bytes long: crcA shifted over n zero bytes (a product by x^(8n) mod P), added to crcB.
func combineCRC(crcA, crcB uint32, n int64) uint32 {
	shift := uint32(1) << 31 // x^0
	for k := 3; n != 0; k, n = k+1, n>>1 {
		if n&1 != 0 {
			shift = mulModP(crcPow2[k], shift)
		}
	}
	return mulModP(shift, crcA) ^ crcB
}
