package hfarrow

import (
	"encoding/binary"
	"fmt"
)

// flatbuf reads a FlatBuffers buffer (the metadata of an Arrow IPC message, or an Arrow file's
// footer) by hand: tables through their vtables, vectors, strings and scalars. Every read is
// bounds-checked; the first failure is kept in err and later reads return zero values, so a
// parser reads on and checks err once. Positions are offsets in b; 0 is never a table (bytes
// 0..3 hold the root offset) and stands for an absent one.
type flatbuf struct {
	b   []byte
	err error
}

func (f *flatbuf) fail(format string, a ...any) {
	if f.err == nil {
		f.err = fmt.Errorf("flatbuffer: "+format, a...)
	}
}

func (f *flatbuf) check(p, n int) bool {
	if f.err != nil {
		return false
	}
	if p < 0 || n < 0 || p > len(f.b)-n {
		f.fail("read of %d bytes at %d outside %d", n, p, len(f.b))
		return false
	}
	return true
}

func (f *flatbuf) u8(p int) uint8 {
	if !f.check(p, 1) {
		return 0
	}
	return f.b[p]
}

func (f *flatbuf) u16(p int) uint16 {
	if !f.check(p, 2) {
		return 0
	}
	return binary.LittleEndian.Uint16(f.b[p:])
}

func (f *flatbuf) u32(p int) uint32 {
	if !f.check(p, 4) {
		return 0
	}
	return binary.LittleEndian.Uint32(f.b[p:])
}

func (f *flatbuf) i64(p int) int64 {
	if !f.check(p, 8) {
		return 0
	}
	return int64(binary.LittleEndian.Uint64(f.b[p:]))
}

// root returns the root table's position.
func (f *flatbuf) root() int { return f.indirect(0) }

// indirect follows the uoffset at p.
func (f *flatbuf) indirect(p int) int {
	off := f.u32(p)
	if f.err != nil {
		return 0
	}
	t := p + int(off)
	if off == 0 || t >= len(f.b) {
		f.fail("offset %d at %d outside %d", off, p, len(f.b))
		return 0
	}
	return t
}

// field returns the position of field i of the table at t, or 0 if the table lacks it.
func (f *flatbuf) field(t, i int) int {
	if t == 0 {
		return 0
	}
	vt := t - int(int32(f.u32(t)))
	size := int(f.u16(vt))
	if f.err != nil || 4+2*i+2 > size {
		return 0
	}
	off := int(f.u16(vt + 4 + 2*i))
	if off == 0 {
		return 0
	}
	return t + off
}

func (f *flatbuf) fieldU8(t, i int) uint8 {
	if p := f.field(t, i); p != 0 {
		return f.u8(p)
	}
	return 0
}

func (f *flatbuf) fieldI16(t, i int) int16 {
	if p := f.field(t, i); p != 0 {
		return int16(f.u16(p))
	}
	return 0
}

func (f *flatbuf) fieldI32(t, i int) int32 {
	if p := f.field(t, i); p != 0 {
		return int32(f.u32(p))
	}
	return 0
}

func (f *flatbuf) fieldI64(t, i int) int64 {
	if p := f.field(t, i); p != 0 {
		return f.i64(p)
	}
	return 0
}

// table returns the position of the table in field i of t, or 0 if absent.
func (f *flatbuf) table(t, i int) int {
	if p := f.field(t, i); p != 0 {
		return f.indirect(p)
	}
	return 0
}

// vector returns the position of the first element of the vector in field i of t and its
// length, checked to fit the buffer with elements of elem bytes; 0, 0 if absent.
func (f *flatbuf) vector(t, i, elem int) (int, int) {
	v := f.table(t, i)
	if v == 0 {
		return 0, 0
	}
	n := int(f.u32(v))
	if !f.check(v+4, 0) || n > (len(f.b)-v-4)/elem {
		f.fail("vector of %d elements of %d bytes at %d outside %d", n, elem, v, len(f.b))
		return 0, 0
	}
	return v + 4, n
}

// str returns the string in field i of t, or "" if absent.
func (f *flatbuf) str(t, i int) string {
	p, n := f.vector(t, i, 1)
	if n == 0 {
		return ""
	}
	return string(f.b[p : p+n])
}

// tableAt returns the position of the k-th table of a vector of tables starting at p.
func (f *flatbuf) tableAt(p, k int) int { return f.indirect(p + 4*k) }
