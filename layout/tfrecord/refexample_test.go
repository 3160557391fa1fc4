package tfrecord

import (
	"errors"
	"fmt"
)

// The parser below is the first, plain one, kept as the reference that FuzzParseExample holds
// the fast one (example.go) to: the same record fields, or an error, for any bytes.

var refErrVarint = errors.New("malformed varint")

// field is one protobuf field of b[lo:hi] (wireLen) or value v (the other wire types).
type refField struct {
	num    uint64
	typ    uint8
	v      uint64
	lo, hi int
}

// nextField reads the field at b[pos:end], returning it and the position after it.
func refNextField(b []byte, pos, end int) (refField, int, error) {
	tag, pos, err := refVarint(b, pos, end)
	if err != nil {
		return refField{}, 0, err
	}
	f := refField{num: tag >> 3, typ: uint8(tag & 7)}
	if f.num == 0 {
		return f, 0, errors.New("field number 0")
	}
	switch f.typ {
	case wireVarint:
		f.v, pos, err = refVarint(b, pos, end)
	case wireI64, wireI32:
		n := 8
		if f.typ == wireI32 {
			n = 4
		}
		if end-pos < n {
			return f, 0, errors.New("truncated fixed-size field")
		}
		pos += n
	case wireLen:
		var n uint64
		if n, pos, err = refVarint(b, pos, end); err == nil && n > uint64(end-pos) {
			err = fmt.Errorf("field %d of %d bytes, %d left", f.num, n, end-pos)
		}
		f.lo, f.hi = pos, pos+int(n)
		pos = f.hi
	default:
		return f, 0, fmt.Errorf("field %d of wire type %d", f.num, f.typ)
	}
	return f, pos, err
}

// varint reads a base-128 varint at b[pos:end].
func refVarint(b []byte, pos, end int) (uint64, int, error) {
	var v uint64
	for shift := uint(0); shift < 64; shift += 7 {
		if pos >= end {
			return 0, 0, refErrVarint
		}
		c := b[pos]
		pos++
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, pos, nil
		}
	}
	return 0, 0, refErrVarint
}

// example is what parseExample finds: for each key kind, the strength of the key that set it
// (0: not found) and its value, a range of the data or an int64.
type refExample struct {
	prio   [5]int
	lo, hi [5]int
	n      [5]int64
}

// parseExample parses data as a tf.train.Example and sets rec's image, label, filename and
// synset from it; off is the offset of data in the file. Fields it does not know are skipped,
// as protobuf readers do; a message that is not well formed is an error.
func refParseExample(data []byte, rec *Record, off int64) error {
	var ex refExample
	end := len(data)
	for pos := 0; pos < end; { // Example
		f, next, err := refNextField(data, pos, end)
		if err != nil {
			return err
		}
		pos = next
		if f.num != 1 || f.typ != wireLen {
			continue
		}
		for fp := f.lo; fp < f.hi; { // Features
			e, next, err := refNextField(data, fp, f.hi)
			if err != nil {
				return err
			}
			fp = next
			if e.num != 1 || e.typ != wireLen {
				continue
			}
			if err := ex.entry(data, e.lo, e.hi); err != nil {
				return err
			}
		}
	}
	if ex.prio[keyImage] > 0 {
		rec.HasImage, rec.ImageOff, rec.ImageSize = true, off+int64(ex.lo[keyImage]), int64(ex.hi[keyImage]-ex.lo[keyImage])
		copy(rec.ImageHead[:], data[ex.lo[keyImage]:ex.hi[keyImage]])
	}
	if ex.prio[keyLabel] > 0 {
		rec.HasLabel, rec.Label = true, ex.n[keyLabel]
	}
	if ex.prio[keyFilename] > 0 {
		rec.Filename = data[ex.lo[keyFilename]:ex.hi[keyFilename]]
	}
	if ex.prio[keySynset] > 0 {
		rec.Synset = data[ex.lo[keySynset]:ex.hi[keySynset]]
	}
	return nil
}

// entry reads one entry of the Features map, at data[lo:hi]: key (1) and Feature (2).
func (ex *refExample) entry(data []byte, lo, hi int) error {
	var key, val refField
	for pos := lo; pos < hi; {
		f, next, err := refNextField(data, pos, hi)
		if err != nil {
			return err
		}
		pos = next
		if f.typ == wireLen && (f.num == 1 || f.num == 2) {
			if f.num == 1 {
				key = f
			} else {
				val = f
			}
		}
	}
	kind, prio := keyNone, 2
	switch string(data[key.lo:key.hi]) {
	case "image/encoded":
		kind = keyImage
	case "image":
		kind, prio = keyImage, 1
	case "image/filename":
		kind = keyFilename
	case "file_name":
		kind, prio = keyFilename, 1
	case "image/class/label":
		kind = keyLabel
	case "label":
		kind, prio = keyLabel, 1
	case "image/class/synset":
		kind = keySynset
	}
	if kind == keyNone || prio < ex.prio[kind] || val.typ != wireLen {
		return nil
	}
	wantInt := kind == keyLabel
	lo, hi, n, ok, err := refFirstValue(data, val.lo, val.hi, wantInt)
	if err != nil || !ok {
		return err
	}
	ex.prio[kind], ex.lo[kind], ex.hi[kind], ex.n[kind] = prio, lo, hi, n
	return nil
}

// firstValue reads a Feature at data[lo:hi] and returns the first value of its int64_list
// (wantInt) or bytes_list; ok is false if the feature is of the other kind or its list is
// empty. Of several lists (the oneof set more than once) the last counts, as for protobuf.
func refFirstValue(data []byte, lo, hi int, wantInt bool) (vlo, vhi int, n int64, ok bool, err error) {
	list := refField{}
	for pos := lo; pos < hi; {
		f, next, err := refNextField(data, pos, hi)
		if err != nil {
			return 0, 0, 0, false, err
		}
		pos = next
		if f.typ == wireLen && f.num >= 1 && f.num <= 3 {
			list = f
		}
	}
	if list.num != 1 && list.num != 3 || (list.num == 3) != wantInt {
		return 0, 0, 0, false, nil
	}
	for pos := list.lo; pos < list.hi; { // BytesList or Int64List: field 1, repeated
		f, next, err := refNextField(data, pos, list.hi)
		if err != nil {
			return 0, 0, 0, false, err
		}
		pos = next
		if f.num != 1 {
			continue
		}
		switch {
		case !wantInt && f.typ == wireLen:
			return f.lo, f.hi, 0, true, nil
		case wantInt && f.typ == wireVarint:
			return 0, 0, int64(f.v), true, nil
		case wantInt && f.typ == wireLen && f.lo < f.hi: // packed
			v, _, err := refVarint(data, f.lo, f.hi)
			return 0, 0, int64(v), err == nil, err
		}
	}
	return 0, 0, 0, false, nil
}
