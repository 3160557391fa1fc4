package tar

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// parse applies PAX records ("%d %s=%s\n", the length counting the whole record) to x. An empty
// value removes the key: an 'x' key then falls back to the 'g' records, then to the header.
func (x *tarPAX) parse(p []byte, global bool) error {
	for len(p) > 0 && !isZeroBlock(p) { // some writers pad with NULs
		sp := bytes.IndexByte(p, ' ')
		n, err := strconv.Atoi(string(p[:max(sp, 0)]))
		if sp <= 0 || err != nil || n <= sp+1 || n > len(p) || p[n-1] != '\n' {
			return fmt.Errorf("bad PAX record length in %q", p[:min(len(p), 40)])
		}
		key, val, ok := bytes.Cut(p[sp+1:n-1], []byte("="))
		if !ok || len(key) == 0 {
			return fmt.Errorf("PAX record %q has no key", p[:n])
		}
		p = p[n:]
		var bit uint8
		switch string(key) {
		case "path":
			bit, x.path = paxPath, string(val)
		case "linkpath":
			bit, x.linkpath = paxLinkpath, string(val)
		case "size":
			bit = paxSize
			if x.size, err = strconv.ParseInt(string(val), 10, 64); len(val) > 0 && (err != nil || x.size < 0 || x.size > tarMaxSize) {
				return fmt.Errorf("PAX size %q is not a size", val)
			}
		case "mtime":
			bit = paxMTime
			if x.mtime, ok = paxTime(string(val)); len(val) > 0 && !ok {
				return fmt.Errorf("PAX mtime %q is not a time", val)
			}
		case "GNU.sparse.name": // GNU tar's PAX sparse formats 0.1 and 1.0 keep the file's name here
			if global {
				continue
			}
			bit, x.sparse, x.sparseName = paxSparseName, true, string(val)
		default:
			x.sparse = x.sparse || !global && bytes.HasPrefix(key, []byte("GNU.sparse."))
			continue
		}
		if x.set |= bit; len(val) == 0 {
			x.set &^= bit
		}
	}
	return nil
}

// pick returns the records that give field bit: x's if set there, else global's.
func (x *tarPAX) pick(global *tarPAX, bit uint8) (*tarPAX, bool) {
	if x.set&bit != 0 {
		return x, true
	}
	return global, global.set&bit != 0
}

// paxTime parses a PAX time, decimal seconds with an optional fraction, into nanoseconds.
func paxTime(s string) (int64, bool) {
	secs, frac, _ := strings.Cut(s, ".")
	sec, err := strconv.ParseInt(secs, 10, 64)
	var ns int64
	for i := range 9 {
		if ns *= 10; i < len(frac) {
			ns += int64(frac[i] - '0')
		}
	}
	if strings.HasPrefix(secs, "-") {
		ns = -ns
	}
	return tarNanos(sec, ns), err == nil && strings.Trim(frac, "0123456789") == ""
}

// tarNanos returns sec seconds and ns nanoseconds as nanoseconds, saturating.
func tarNanos(sec, ns int64) int64 {
	const limit = math.MaxInt64/1_000_000_000 - 1
	switch {
	case sec > limit:
		return math.MaxInt64
	case sec < -limit:
		return math.MinInt64
	}
	return sec*1_000_000_000 + ns
}

// tarNumber parses a numeric field: octal padded with spaces and NULs, or GNU base-256 (the first
// byte's top bit set, its next bit the sign of a big-endian two's complement number). The
// padding is trimmed by hand: bytes.Trim builds its set of bytes on each call
// (docs/bench/layout-notes.md#tar-header-parsing).
func tarNumber(b []byte) (int64, bool) {
	if len(b) == 0 || b[0]&0x80 == 0 {
		i, j := 0, len(b)
		for i < j && (b[i] == ' ' || b[i] == 0) {
			i++
		}
		for j > i && (b[j-1] == ' ' || b[j-1] == 0) {
			j--
		}
		var x int64
		for _, c := range b[i:j] {
			if c < '0' || c > '7' || x>>60 != 0 {
				return 0, false
			}
			x = x<<3 | int64(c-'0')
		}
		return x, true
	}
	inv := byte(0)
	if b[0]&0x40 != 0 {
		inv = 0xff
	}
	x := uint64((b[0] ^ inv) & 0x7f)
	for _, c := range b[1:] {
		if x>>55 != 0 {
			return 0, false
		}
		x = x<<8 | uint64(c^inv)
	}
	if inv != 0 {
		return ^int64(x), true
	}
	return int64(x), true
}

// tarChecksum returns the sum of the bytes of h, its checksum field (bytes 148 to 155) counting
// as spaces. It sums sixteen bytes a step, in the 16-bit lanes of two words (the even bytes
// and the odd), which cannot overflow over one block (at most 64 × 2 × 255), and corrects
// for the field after: a quarter of the time of eight bytes a step, a small part of that of byte
// by byte (docs/bench/layout-notes.md#tar-header-parsing).
func tarChecksum(h *[tarBlock]byte) int64 {
	const lanes = 0x00ff00ff00ff00ff
	var even, odd uint64
	for i := 0; i < tarBlock; i += 16 {
		w, v := binary.LittleEndian.Uint64(h[i:]), binary.LittleEndian.Uint64(h[i+8:])
		even += w&lanes + v&lanes
		odd += w>>8&lanes + v>>8&lanes
	}
	sum := even + odd
	unsigned := int64(sum&0xffff + sum>>16&0xffff + sum>>32&0xffff + sum>>48)
	for _, c := range h[148:156] {
		unsigned += ' ' - int64(c)
	}
	return unsigned
}

// tarSignedChecksum returns the sum of the bytes of h as signed chars, as some old tars (Sun's)
// wrote it, the checksum field counting as spaces. It is only asked when tarChecksum's sum
// does not match.
func tarSignedChecksum(h *[tarBlock]byte) int64 {
	var signed int64
	for i, c := range h {
		if i >= 148 && i < 156 {
			c = ' '
		}
		signed += int64(int8(c))
	}
	return signed
}

// appendTarName appends the name in header h to dst, joined to the ustar prefix (star's shorter
// one for star).
func appendTarName(dst []byte, h *[tarBlock]byte) []byte {
	var prefix []byte
	if string(h[257:263]) == "ustar\x00" && string(h[508:512]) == "tar\x00" {
		prefix = tarString(h[345:476])
	} else if string(h[257:263]) == "ustar\x00" {
		prefix = tarString(h[345:500])
	}
	if len(prefix) > 0 {
		dst = append(append(dst, prefix...), '/')
	}
	return append(dst, tarString(h[:100])...)
}

// tarString returns b up to its first NUL.
func tarString(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}

func isZeroBlock(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
