package tfrecord

import (
	"errors"
	"fmt"
)

// The protobuf wire types read.
const (
	wireVarint = 0
	wireI64    = 1
	wireLen    = 2
	wireI32    = 5
)

// What a key of the Example holds, and how strongly: a script's key (2) beats TFDS's (1).
const (
	keyNone = iota
	keyImage
	keyFilename
	keyLabel
	keySynset
)

var errVarint = errors.New("malformed varint")

// wire reads the protobuf fields of a record's data. Its methods take and return positions in
// b and keep the first error in err, moving the position to the end of the range being read so
// that every loop over fields ends; the parser checks err once, at the end. It holds no field
// in a struct and returns no error value per field: parsing is a fifth of a TFRecord index's
// CPU (docs/bench/formats-notes.md#tfrecord-parser).
type wire struct {
	b   []byte
	err error
}

func (w *wire) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

// varint reads a base-128 varint at b[pos:end] and returns it and the position after it.
func (w *wire) varint(pos, end int) (uint64, int) {
	if pos < end && w.b[pos] < 0x80 {
		return uint64(w.b[pos]), pos + 1
	}
	var v uint64
	for shift := uint(0); shift < 64; shift += 7 {
		if pos >= end {
			break
		}
		c := w.b[pos]
		pos++
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, pos
		}
	}
	w.fail(errVarint)
	return 0, end
}

// field reads the field at b[pos:end]: its number and wire type; for wireVarint its value v;
// for wireLen its bytes b[lo:next]. It returns the position after the field (end on an error).
func (w *wire) field(pos, end int) (num uint64, typ uint8, v uint64, lo, next int) {
	tag, pos := w.varint(pos, end)
	num, typ = tag>>3, uint8(tag&7)
	if w.err != nil {
		return 0, 0, 0, end, end
	}
	if num == 0 {
		w.fail(errors.New("field number 0"))
		return 0, 0, 0, end, end
	}
	switch typ {
	case wireVarint:
		v, pos = w.varint(pos, end)
		return num, typ, v, pos, pos
	case wireI64, wireI32:
		n := 8
		if typ == wireI32 {
			n = 4
		}
		if end-pos < n {
			w.fail(errors.New("truncated fixed-size field"))
			return 0, 0, 0, end, end
		}
		return num, typ, 0, pos + n, pos + n
	case wireLen:
		n, pos := w.varint(pos, end)
		if w.err != nil {
			return 0, 0, 0, end, end
		}
		if n > uint64(end-pos) {
			w.fail(fmt.Errorf("field %d of %d bytes, %d left", num, n, end-pos))
			return 0, 0, 0, end, end
		}
		return num, typ, n, pos, pos + int(n)
	}
	w.fail(fmt.Errorf("field %d of wire type %d", num, typ))
	return 0, 0, 0, end, end
}

// example is what parseExample finds: for each key kind, the strength of the key that set it
// (0: not found) and its value, a range of the data or an int64.
type example struct {
	prio   [5]int
	lo, hi [5]int
	n      [5]int64
}

// parseExample parses data as a tf.train.Example and sets rec's image, label, filename and
// synset from it; off is the offset of data in the file. Fields it does not know are skipped,
// as protobuf readers do; a message that is not well formed is an error.
func parseExample(data []byte, rec *Record, off int64) error {
	var ex example
	w := wire{b: data}
	end := len(data)
	for pos := 0; pos < end; { // Example
		num, typ, _, lo, next := w.field(pos, end)
		pos = next
		if num != 1 || typ != wireLen {
			continue
		}
		for fp := lo; fp < next; { // Features
			enum, etyp, _, elo, enext := w.field(fp, next)
			fp = enext
			if enum == 1 && etyp == wireLen {
				ex.entry(&w, elo, enext)
			}
		}
	}
	if w.err != nil {
		return w.err
	}
	if ex.prio[keyImage] > 0 {
		rec.HasImage, rec.ImageOff, rec.ImageSize = true, off+int64(ex.lo[keyImage]), int64(ex.hi[keyImage]-ex.lo[keyImage])
		copy(rec.ImageHead[:], data[ex.lo[keyImage]:ex.hi[keyImage]])
	}
	if ex.prio[keyLabel] > 0 {
		rec.HasLabel, rec.Label = true, ex.n[keyLabel]
	}
	if ex.prio[keyFilename] > 0 {
		rec.Filename = data[ex.lo[keyFilename]:ex.hi[keyFilename]:ex.hi[keyFilename]]
	}
	if ex.prio[keySynset] > 0 {
		rec.Synset = data[ex.lo[keySynset]:ex.hi[keySynset]:ex.hi[keySynset]]
	}
	return nil
}

// keyOf says what a key of the Features map holds, and how strongly.
func keyOf(key []byte) (kind, prio int) {
	switch string(key) {
	case "image/encoded":
		return keyImage, 2
	case "image":
		return keyImage, 1
	case "image/filename":
		return keyFilename, 2
	case "file_name":
		return keyFilename, 1
	case "image/class/label":
		return keyLabel, 2
	case "label":
		return keyLabel, 1
	case "image/class/synset":
		return keySynset, 2
	}
	return keyNone, 0
}

// entry reads one entry of the Features map, at data[lo:hi]: key (1) and Feature (2); of
// several, the last counts, as for protobuf.
func (ex *example) entry(w *wire, lo, hi int) {
	klo, khi, vlo, vhi, hasVal := 0, 0, 0, 0, false
	for pos := lo; pos < hi; {
		num, typ, _, flo, next := w.field(pos, hi)
		pos = next
		switch {
		case typ != wireLen:
		case num == 1:
			klo, khi = flo, next
		case num == 2:
			vlo, vhi, hasVal = flo, next, true
		}
	}
	kind, prio := keyOf(w.b[klo:khi])
	if kind == keyNone || prio < ex.prio[kind] || !hasVal || w.err != nil {
		return
	}
	if vlo, vhi, n, ok := firstValue(w, vlo, vhi, kind == keyLabel); ok {
		ex.prio[kind], ex.lo[kind], ex.hi[kind], ex.n[kind] = prio, vlo, vhi, n
	}
}

// firstValue reads a Feature at b[lo:hi] and returns the first value of its int64_list
// (wantInt) or bytes_list; ok is false if the feature is of the other kind or its list is
// empty. Of several lists (the oneof set more than once) the last counts, as for protobuf.
func firstValue(w *wire, lo, hi int, wantInt bool) (vlo, vhi int, n int64, ok bool) {
	var list uint64
	llo, lhi := 0, 0
	for pos := lo; pos < hi; {
		num, typ, _, flo, next := w.field(pos, hi)
		pos = next
		if typ == wireLen && num >= 1 && num <= 3 {
			list, llo, lhi = num, flo, next
		}
	}
	if w.err != nil || list != 1 && list != 3 || (list == 3) != wantInt {
		return 0, 0, 0, false
	}
	for pos := llo; pos < lhi; { // BytesList or Int64List: field 1, repeated
		num, typ, v, flo, next := w.field(pos, lhi)
		pos = next
		if w.err != nil || num != 1 {
			continue
		}
		switch {
		case !wantInt && typ == wireLen:
			return flo, next, 0, true
		case wantInt && typ == wireVarint:
			return 0, 0, int64(v), true
		case wantInt && typ == wireLen && flo < next: // packed
			v, _ := w.varint(flo, next)
			return 0, 0, int64(v), w.err == nil
		}
	}
	return 0, 0, 0, false
}
