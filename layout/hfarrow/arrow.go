package hfarrow

import (
	"encoding/binary"
	"fmt"
	"io"
	"strings"
)

// The Type union of Arrow's Schema.fbs, as far as it is read.
const (
	typeNull            = 1
	typeInt             = 2
	typeBinary          = 4
	typeUtf8            = 5
	typeStruct          = 13
	typeUnion           = 14
	typeFixedSizeList   = 16
	typeLargeBinary     = 19
	typeLargeUtf8       = 20
	typeRunEndEncoded   = 22
	typeBinaryView      = 23
	typeUtf8View        = 24
	typeListView        = 25
	typeLargeListView   = 26
	headerSchema        = 1
	headerDictionary    = 2
	headerRecordBatch   = 3
	maxFields           = 1 << 16
	maxDepth            = 64
	arrowFileMagicBytes = 8 // "ARROW1" and 2 bytes of padding before the stream
	arrowTrailer        = 10
)

// arrowField is a field of an Arrow schema, with where its arrays lie in a record batch: the
// index of its FieldNode, and of its first buffer counting no view type's variadic buffers
// (views: how many view-typed fields come before it, whose counts the batch gives).
type arrowField struct {
	name     string
	typ      uint8
	bitWidth int32 // of an Int
	signed   bool
	dict     bool // dictionary-encoded: the batch holds integer indices
	node     int
	buf      int
	views    int
	children []arrowField
}

// arrowSource reads an Arrow IPC stream, or the stream inside an Arrow IPC file.
type arrowSource struct {
	s          *Scanner
	pos, end   int64 // the next message, and the end of the stream's bytes
	image      *arrowField
	bytesField *arrowField
	pathField  *arrowField // nil if the image struct has no path child
	label      *arrowField // nil if no label column
}

// openArrow reads the schema message of an Arrow IPC stream (file: of an Arrow IPC file).
func openArrow(s *Scanner, file bool) (source, error) {
	a := &arrowSource{s: s, end: s.size}
	if file {
		t, err := s.readAt(s.size-arrowTrailer, arrowTrailer, "the Arrow file's trailer")
		if err != nil {
			return nil, err
		}
		footer := int64(int32(binary.LittleEndian.Uint32(t)))
		if string(t[4:]) != "ARROW1" || footer < 0 || footer > s.size-arrowTrailer-arrowFileMagicBytes {
			return nil, s.errorf("an Arrow file must end with its footer's length and \"ARROW1\": truncated, or not an Arrow file")
		}
		a.pos, a.end = arrowFileMagicBytes, s.size-arrowTrailer-footer
	}
	f, typ, _, _, err := a.message()
	if err == io.EOF {
		return nil, s.errorf("the Arrow stream ends before its schema")
	} else if err != nil {
		return nil, err
	}
	if typ != headerSchema {
		return nil, s.errorf("the Arrow stream's first message is of type %d, not a schema: not an Arrow stream", typ)
	}
	fields, hf, err := parseArrowSchema(f, f.table(f.root(), 2))
	if err != nil {
		return nil, s.errorf("the Arrow schema: %w", err)
	}
	names := make([]string, len(fields))
	for i := range fields {
		names[i] = fields[i].name
	}
	if err := s.chooseColumns(names, hf); err != nil {
		return nil, err
	}
	for i := range fields {
		switch fields[i].name {
		case s.schema.ImageColumn:
			a.image = &fields[i]
		case s.schema.LabelColumn:
			a.label = &fields[i]
		}
	}
	return a, a.checkColumns()
}

// checkColumns checks that the image column is struct{bytes: binary, path: string} and the
// label an integer column.
func (a *arrowSource) checkColumns() error {
	img := a.image
	if img.typ == typeStruct && !img.dict {
		for i := range img.children {
			c := &img.children[i]
			binary := !c.dict && (c.typ == typeBinary || c.typ == typeLargeBinary)
			switch {
			case c.name == "bytes" && binary:
				a.bytesField = c
			case c.name == "path" && (binary || !c.dict && (c.typ == typeUtf8 || c.typ == typeLargeUtf8)):
				a.pathField = c
			}
		}
	}
	if a.bytesField == nil {
		return a.s.columnError(img.name, "an Image: struct{bytes: binary, path: string}", typeName(img))
	}
	if l := a.label; l != nil && (l.typ != typeInt || l.dict || l.bitWidth != 8 && l.bitWidth != 16 && l.bitWidth != 32 && l.bitWidth != 64) {
		return a.s.columnError(l.name, "an integer (ClassLabel) column", typeName(l))
	}
	return nil
}

// typeName describes f's type in errors: "struct{bytes: string_view, path: string}".
func typeName(f *arrowField) string {
	if f.dict {
		return "dictionary-encoded"
	}
	name, ok := arrowTypeNames[f.typ]
	if !ok {
		name = fmt.Sprintf("Arrow type %d", f.typ)
	}
	if f.typ == typeInt {
		name = fmt.Sprintf("int%d", f.bitWidth)
		if !f.signed {
			name = "u" + name
		}
	}
	if f.typ == typeStruct {
		var kids []string
		for i := range f.children {
			kids = append(kids, f.children[i].name+": "+typeName(&f.children[i]))
		}
		name += "{" + strings.Join(kids, ", ") + "}"
	}
	return name
}

var arrowTypeNames = map[uint8]string{typeNull: "null", typeInt: "int", 3: "float", typeBinary: "binary", typeUtf8: "string", 6: "bool",
	12: "list", typeStruct: "struct", typeLargeBinary: "large_binary", typeLargeUtf8: "large_string", typeBinaryView: "binary_view",
	typeUtf8View: "string_view"}

// parseArrowSchema reads the Schema table at t: its fields, numbered as a record batch lays
// them out, and its "huggingface" metadata.
func parseArrowSchema(f *flatbuf, t int) ([]arrowField, string, error) {
	if t == 0 {
		return nil, "", fmt.Errorf("the schema message has no schema")
	}
	var n numbering
	fields := n.fields(f, t, 1, 0)
	hf := ""
	p, k := f.vector(t, 2, 4)
	for i := range k {
		kv := f.tableAt(p, i)
		if f.str(kv, 0) == hfKey {
			hf = f.str(kv, 1)
		}
	}
	if f.err == nil && n.err != nil {
		return nil, "", n.err
	}
	return fields, hf, f.err
}

// numbering counts fields, nodes and buffers in the order a record batch lays them out.
type numbering struct {
	count, nodes, bufs, views int
	err                       error
}

// fields reads the vector of Field tables in field i of table t.
func (n *numbering) fields(f *flatbuf, t, i, depth int) []arrowField {
	p, k := f.vector(t, i, 4)
	if depth > maxDepth || n.count+k > maxFields {
		n.err = fmt.Errorf("more than %d fields, or nested deeper than %d", maxFields, maxDepth)
		return nil
	}
	n.count += k
	var out []arrowField
	for j := range k {
		ft := f.tableAt(p, j)
		if f.err != nil || n.err != nil {
			return nil
		}
		a := arrowField{name: f.str(ft, 0), typ: f.fieldU8(ft, 2), dict: f.table(ft, 4) != 0, node: n.nodes, buf: n.bufs, views: n.views}
		typ := f.table(ft, 3)
		if a.typ == typeInt {
			a.bitWidth, a.signed = f.fieldI32(typ, 0), f.fieldU8(typ, 1) != 0
		}
		n.nodes++
		switch {
		case a.dict:
			n.bufs += 2 // validity and indices; the values are in dictionary batches
		case a.typ == typeNull || a.typ == typeRunEndEncoded:
		case a.typ == typeStruct || a.typ == typeFixedSizeList:
			n.bufs++
		case a.typ == typeUnion:
			n.bufs++ // types
			if f.fieldI16(typ, 0) != 0 {
				n.bufs++ // offsets, of a dense union
			}
		case a.typ == typeBinary || a.typ == typeUtf8 || a.typ == typeLargeBinary || a.typ == typeLargeUtf8 ||
			a.typ == typeListView || a.typ == typeLargeListView:
			n.bufs += 3
		case a.typ == typeBinaryView || a.typ == typeUtf8View:
			n.bufs += 2
			n.views++
		default: // fixed-width types, lists and maps: validity and values or offsets
			n.bufs += 2
		}
		if !a.dict {
			a.children = n.fields(f, ft, 5, depth+1)
		}
		out = append(out, a)
	}
	return out
}

// message reads the message at a.pos and moves past it. It returns the metadata, the header's
// type, the body's offset in the file and its length, or io.EOF at the end of the stream.
func (a *arrowSource) message() (*flatbuf, uint8, int64, int64, error) {
	s := a.s
	if a.pos == a.end {
		return nil, 0, 0, 0, io.EOF // a stream may end without its end-of-stream marker
	}
	pre, err := s.readAt(a.pos, min(8, a.end-a.pos), "a message's length")
	if err != nil || len(pre) < 4 {
		return nil, 0, 0, 0, s.errorf("the Arrow stream ends within a message's length at byte %d", a.pos)
	}
	at := a.pos
	n, start := int64(int32(binary.LittleEndian.Uint32(pre))), a.pos+4
	if n == -1 { // the continuation marker: the length follows
		if len(pre) < 8 {
			return nil, 0, 0, 0, s.errorf("the Arrow stream ends within a message's length at byte %d", a.pos)
		}
		n, start = int64(int32(binary.LittleEndian.Uint32(pre[4:]))), a.pos+8
	}
	if n == 0 {
		return nil, 0, 0, 0, io.EOF
	}
	if n < 0 || n > maxMeta || n > a.end-start {
		return nil, 0, 0, 0, s.errorf("message at byte %d: metadata of %d bytes, %d left", at, n, a.end-start)
	}
	meta, err := s.readAt(start, n, "a message's metadata")
	if err != nil {
		return nil, 0, 0, 0, err
	}
	f := &flatbuf{b: meta}
	root := f.root()
	typ, body := f.fieldU8(root, 1), f.fieldI64(root, 3)
	bodyAt := start + n
	if f.err != nil {
		return nil, 0, 0, 0, s.errorf("message at byte %d: %w", at, f.err)
	}
	if body < 0 || body > a.end-bodyAt {
		return nil, 0, 0, 0, s.errorf("message at byte %d: a body of %d bytes, %d left", at, body, a.end-bodyAt)
	}
	a.pos = bodyAt + body
	return f, typ, bodyAt, body, nil
}

// batch reads the next record batch's rows, skipping dictionary batches.
func (a *arrowSource) batch(rows []Row, first int64) ([]Row, error) {
	for {
		at := a.pos
		f, typ, bodyAt, bodyLen, err := a.message()
		if err != nil {
			return rows, err
		}
		switch typ {
		case headerDictionary:
			continue
		case headerRecordBatch:
		default:
			return rows, a.s.errorf("message at byte %d is of type %d, not a record batch", at, typ)
		}
		b := recordBatch{a: a, f: f, at: at, bodyAt: bodyAt, bodyLen: bodyLen}
		base := len(rows)
		rows, err = b.rows(rows, first)
		if err == nil && a.s.opt.Checksums {
			err = a.checksum(rows[base:])
		}
		return rows, err
	}
}

// checksum sets the ImageCRC of rows, reading their image bytes through the window: in large
// reads, as the values of a batch lie in order in its data buffer.
func (a *arrowSource) checksum(rows []Row) error {
	for i := range rows {
		row := &rows[i]
		if !row.HasImage {
			continue
		}
		b, err := a.s.win.bytes(row.ImageOff, row.ImageSize)
		if err != nil {
			return a.s.errorf("row %d: read its image [%d,+%d): %w", row.Index, row.ImageOff, row.ImageSize, err)
		}
		row.ImageCRC = crc32c(b)
		row.HasHead = true
		copy(row.ImageHead[:], b)
	}
	return nil
}

// recordBatch is one record batch message being read.
type recordBatch struct {
	a       *arrowSource
	f       *flatbuf
	t       int   // the RecordBatch table
	at      int64 // the message's offset
	bodyAt  int64
	bodyLen int64
	n       int64 // rows
	views   []int // buffer index shift after k view fields
}

func (b *recordBatch) errorf(format string, a ...any) error {
	return b.a.s.errorf("record batch at byte %d: "+format, append([]any{b.at}, a...)...)
}

func (b *recordBatch) rows(rows []Row, first int64) ([]Row, error) {
	f := b.f
	b.t = f.table(f.root(), 2)
	if b.t == 0 {
		return rows, b.errorf("no RecordBatch header")
	}
	if c := f.table(b.t, 3); c != 0 {
		codec := map[uint8]string{0: "LZ4_FRAME", 1: "ZSTD"}[f.fieldU8(c, 0)]
		return rows, b.a.s.refused(fmt.Sprintf("record batch at byte %d: its buffers are compressed (BodyCompression %s)", b.at, codec),
			"write the Arrow file uncompressed, as datasets does")
	}
	b.n = f.fieldI64(b.t, 0)
	p, k := f.vector(b.t, 4, 8)
	b.views = make([]int, k+1)
	for i := range k {
		c := f.i64(p + 8*i)
		if c < 0 || c > maxFields {
			return rows, b.errorf("variadic buffer count %d", c)
		}
		b.views[i+1] = b.views[i] + int(c)
	}
	if f.err != nil {
		return rows, b.errorf("%w", f.err)
	}
	if b.n < 0 || b.n > b.bodyLen/4+1 { // each row has at least an image offset
		return rows, b.errorf("%d rows in a body of %d bytes", b.n, b.bodyLen)
	}
	a := b.a
	img, err := b.validity(a.image)
	if err != nil {
		return rows, err
	}
	bytesValid, err := b.validity(a.bytesField)
	if err != nil {
		return rows, err
	}
	imgOff, imgData, err := b.offsets(a.bytesField)
	if err != nil {
		return rows, err
	}
	var pathValid, pathOff, pathData []byte
	if a.pathField != nil {
		if pathValid, err = b.validity(a.pathField); err != nil {
			return rows, err
		}
		if pathOff, pathData, err = b.offsets(a.pathField); err != nil {
			return rows, err
		}
		if pathData, err = a.s.readAt(b.bodyAt+int64(binary.LittleEndian.Uint64(pathData)), int64(binary.LittleEndian.Uint64(pathData[8:])), "the image paths"); err != nil {
			return rows, err
		}
	}
	var labelValid, labels []byte
	if a.label != nil {
		if labelValid, err = b.validity(a.label); err != nil {
			return rows, err
		}
		w := int64(a.label.bitWidth / 8)
		if labels, err = b.buffer(a.label, 1, b.n*w); err != nil {
			return rows, err
		}
	}
	dataAt, dataLen := int64(binary.LittleEndian.Uint64(imgData)), int64(binary.LittleEndian.Uint64(imgData[8:]))
	large, pathLarge := a.bytesField.typ == typeLargeBinary, a.pathField != nil && (a.pathField.typ == typeLargeBinary || a.pathField.typ == typeLargeUtf8)
	for i := range b.n {
		row := Row{Index: first + i}
		if valid(img, i) && valid(bytesValid, i) {
			lo, hi := offsetAt(imgOff, i, large), offsetAt(imgOff, i+1, large)
			if lo < 0 || lo > hi || hi > dataLen {
				return rows, b.errorf("row %d: image bytes [%d,%d) outside the data buffer's %d bytes", row.Index, lo, hi, dataLen)
			}
			row.HasImage, row.ImageOff, row.ImageSize = true, b.bodyAt+dataAt+lo, hi-lo
			if pathData != nil && valid(pathValid, i) {
				lo, hi := offsetAt(pathOff, i, pathLarge), offsetAt(pathOff, i+1, pathLarge)
				if lo < 0 || lo > hi || hi > int64(len(pathData)) {
					return rows, b.errorf("row %d: path [%d,%d) outside the path buffer's %d bytes", row.Index, lo, hi, len(pathData))
				}
				row.Path = baseName(pathData[lo:hi])
			}
		}
		if labels != nil && valid(labelValid, i) {
			row.HasLabel, row.Label = true, intAt(labels, i, a.label.bitWidth, a.label.signed)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// node returns the length and null count of field c's FieldNode.
func (b *recordBatch) node(c *arrowField) (int64, int64, error) {
	p, k := b.f.vector(b.t, 1, 16)
	if c.node >= k {
		return 0, 0, b.errorf("%d field nodes, field %q is node %d", k, c.name, c.node)
	}
	n, nulls := b.f.i64(p+16*c.node), b.f.i64(p+16*c.node+8)
	if b.f.err != nil || n < b.n || nulls < 0 || nulls > n {
		return 0, 0, b.errorf("field %q: %d values and %d nulls for %d rows", c.name, n, nulls, b.n)
	}
	return n, nulls, nil
}

// bufferAt returns the offset in the body and the length of field c's buffer i: a slice of
// 16 bytes, the Buffer struct.
func (b *recordBatch) bufferAt(c *arrowField, i int) ([]byte, error) {
	idx := c.buf + i
	if c.views < len(b.views) {
		idx += b.views[c.views]
	} else {
		return nil, b.errorf("%d variadic buffer counts, field %q needs %d", len(b.views)-1, c.name, c.views)
	}
	p, k := b.f.vector(b.t, 2, 16)
	if idx >= k || b.f.err != nil {
		return nil, b.errorf("%d buffers, field %q needs buffer %d", k, c.name, idx)
	}
	raw := b.f.b[p+16*idx : p+16*idx+16]
	off, n := int64(binary.LittleEndian.Uint64(raw)), int64(binary.LittleEndian.Uint64(raw[8:]))
	if off < 0 || n < 0 || off > b.bodyLen-n {
		return nil, b.errorf("field %q: buffer [%d,+%d) outside the body's %d bytes", c.name, off, n, b.bodyLen)
	}
	return raw, nil
}

// buffer reads field c's buffer i, which must hold at least need bytes (its first need bytes
// are returned).
func (b *recordBatch) buffer(c *arrowField, i int, need int64) ([]byte, error) {
	raw, err := b.bufferAt(c, i)
	if err != nil {
		return nil, err
	}
	off, n := int64(binary.LittleEndian.Uint64(raw)), int64(binary.LittleEndian.Uint64(raw[8:]))
	if n < need {
		return nil, b.errorf("field %q: buffer %d of %d bytes, %d rows need %d", c.name, i, n, b.n, need)
	}
	return b.a.s.readAt(b.bodyAt+off, need, fmt.Sprintf("field %q's buffer %d", c.name, i))
}

// validity reads field c's validity bitmap, or returns nil if all its values are valid.
func (b *recordBatch) validity(c *arrowField) ([]byte, error) {
	_, nulls, err := b.node(c)
	if err != nil || nulls == 0 {
		return nil, err
	}
	return b.buffer(c, 0, (b.n+7)/8)
}

// offsets reads the offsets buffer of binary field c and returns it with its data buffer's
// Buffer struct (offset in the body, length).
func (b *recordBatch) offsets(c *arrowField) ([]byte, []byte, error) {
	w := int64(4)
	if c.typ == typeLargeBinary || c.typ == typeLargeUtf8 {
		w = 8
	}
	off, err := b.buffer(c, 1, (b.n+1)*w)
	if err != nil {
		return nil, nil, err
	}
	data, err := b.bufferAt(c, 2)
	return off, data, err
}

func valid(bitmap []byte, i int64) bool { return bitmap == nil || bitmap[i>>3]>>(i&7)&1 != 0 }

func offsetAt(b []byte, i int64, large bool) int64 {
	if large {
		return int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return int64(int32(binary.LittleEndian.Uint32(b[4*i:])))
}

func intAt(b []byte, i int64, width int32, signed bool) int64 {
	switch width {
	case 8:
		if signed {
			return int64(int8(b[i]))
		}
		return int64(b[i])
	case 16:
		v := binary.LittleEndian.Uint16(b[2*i:])
		if signed {
			return int64(int16(v))
		}
		return int64(v)
	case 32:
		v := binary.LittleEndian.Uint32(b[4*i:])
		if signed {
			return int64(int32(v))
		}
		return int64(v)
	}
	return int64(binary.LittleEndian.Uint64(b[8*i:]))
}
