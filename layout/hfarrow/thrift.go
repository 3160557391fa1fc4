package hfarrow

import (
	"encoding/binary"
	"fmt"
)

// Thrift compact protocol types.
const (
	ctTrue   = 1
	ctFalse  = 2
	ctByte   = 3
	ctI16    = 4
	ctI32    = 5
	ctI64    = 6
	ctDouble = 7
	ctBinary = 8
	ctList   = 9
	ctSet    = 10
	ctMap    = 11
	ctStruct = 12
)

// thrift reads Thrift's compact protocol (Parquet's footer and page headers) from b. As for
// flatbuf, the first failure is kept in err and later reads return zero values. short is set
// when the failure was running out of bytes, so that a caller holding a prefix of the input can
// read more and try again.
type thrift struct {
	b     []byte
	pos   int
	depth int
	err   error
	short bool
}

func (t *thrift) fail(format string, a ...any) {
	if t.err == nil {
		t.err = fmt.Errorf("thrift: "+format, a...)
	}
}

func (t *thrift) byte() byte {
	if t.err != nil {
		return 0
	}
	if t.pos >= len(t.b) {
		t.short = true
		t.fail("truncated at byte %d", t.pos)
		return 0
	}
	t.pos++
	return t.b[t.pos-1]
}

func (t *thrift) uvarint() uint64 {
	var v uint64
	for shift := uint(0); shift < 64; shift += 7 {
		c := t.byte()
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v
		}
	}
	t.fail("malformed varint at byte %d", t.pos)
	return 0
}

func (t *thrift) i64() int64 {
	v := t.uvarint()
	return int64(v>>1) ^ -int64(v&1)
}

func (t *thrift) i32() int32 {
	v := t.i64()
	if int64(int32(v)) != v {
		t.fail("i32 out of range at byte %d", t.pos)
	}
	return int32(v)
}

// binary returns a string or binary value, a slice of t.b.
func (t *thrift) binary() []byte {
	n := t.uvarint()
	if t.err != nil {
		return nil
	}
	if n > uint64(len(t.b)-t.pos) {
		t.short = true
		t.fail("binary of %d bytes at byte %d, %d left", n, t.pos, len(t.b)-t.pos)
		return nil
	}
	t.pos += int(n)
	return t.b[t.pos-int(n) : t.pos]
}

// field reads a field header of the struct whose last field id is *last. It returns the
// field's id and type, and ok false at the struct's end (or after a failure).
func (t *thrift) field(last *int16) (int16, byte, bool) {
	h := t.byte()
	if t.err != nil || h == 0 {
		return 0, 0, false
	}
	typ := h & 0x0f
	if d := h >> 4; d != 0 {
		*last += int16(d)
	} else {
		*last = int16(t.i64())
	}
	return *last, typ, t.err == nil
}

// fields reads a struct's fields to its end, calling fn with each field's id and type; fn
// reads the value, or returns false to have it skipped.
func (t *thrift) fields(fn func(id int16, typ byte) bool) {
	if t.depth++; t.depth > 64 {
		t.fail("structs nested deeper than 64")
		return
	}
	var last int16
	for {
		id, typ, ok := t.field(&last)
		if !ok {
			break
		}
		if !fn(id, typ) {
			t.skip(typ)
		}
	}
	t.depth--
}

// list reads a list header: its element type and length, checked against the bytes left (every
// element takes at least one byte).
func (t *thrift) list() (byte, int) {
	h := t.byte()
	n := uint64(h >> 4)
	if n == 15 {
		n = t.uvarint()
	}
	if t.err == nil && n > uint64(len(t.b)-t.pos) {
		t.short = true
		t.fail("list of %d elements at byte %d, %d bytes left", n, t.pos, len(t.b)-t.pos)
	}
	if t.err != nil {
		return 0, 0
	}
	return h & 0x0f, int(n)
}

// skip reads past a value of type typ.
func (t *thrift) skip(typ byte) {
	switch typ {
	case ctTrue, ctFalse:
	case ctByte:
		t.byte()
	case ctI16, ctI32, ctI64:
		t.uvarint()
	case ctDouble:
		for range 8 {
			t.byte()
		}
	case ctBinary:
		t.binary()
	case ctList, ctSet:
		et, n := t.list()
		for i := 0; i < n && t.err == nil; i++ {
			t.skipElem(et)
		}
	case ctMap:
		n := t.uvarint()
		var kv byte
		if n > 0 {
			kv = t.byte()
		}
		if n > uint64(len(t.b)) {
			t.fail("map of %d entries", n)
		}
		for i := uint64(0); i < n && t.err == nil; i++ {
			t.skipElem(kv >> 4)
			t.skipElem(kv & 0x0f)
		}
	case ctStruct:
		t.fields(func(int16, byte) bool { return false })
	default:
		t.fail("unknown type %d at byte %d", typ, t.pos)
	}
}

// skipElem skips a list, set or map element: a boolean there takes a byte.
func (t *thrift) skipElem(typ byte) {
	if typ == ctTrue || typ == ctFalse {
		t.byte()
		return
	}
	t.skip(typ)
}

// int reads an integer field of type typ, or skips a field of another type and returns 0.
func (t *thrift) int(typ byte) int64 {
	if typ == ctI16 || typ == ctI32 || typ == ctI64 || typ == ctByte {
		if typ == ctByte {
			return int64(int8(t.byte()))
		}
		return t.i64()
	}
	t.skip(typ)
	return 0
}

// str reads a binary field, or skips a field of another type and returns nil.
func (t *thrift) str(typ byte) []byte {
	if typ == ctBinary {
		return t.binary()
	}
	t.skip(typ)
	return nil
}

// structs calls fn for each element of a list of structs (a field of type typ), skipping
// anything else.
func (t *thrift) structs(typ byte, fn func()) {
	if typ != ctList {
		t.skip(typ)
		return
	}
	et, n := t.list()
	if et != ctStruct {
		for i := 0; i < n && t.err == nil; i++ {
			t.skipElem(et)
		}
		return
	}
	if t.depth++; t.depth > 64 {
		t.fail("structs nested deeper than 64")
		return
	}
	for i := 0; i < n && t.err == nil; i++ {
		fn()
	}
	t.depth--
}

// leU32 reads a little-endian uint32 at b[pos:], or reports false.
func leU32(b []byte, pos int) (uint32, bool) {
	if pos < 0 || pos > len(b)-4 {
		return 0, false
	}
	return binary.LittleEndian.Uint32(b[pos:]), true
}
