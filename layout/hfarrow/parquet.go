package hfarrow

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"strings"
)

// Parquet's enums, as far as they are read (parquet.thrift).
const (
	pqInt32     = 1
	pqInt64     = 2
	pqByteArray = 6

	pqOptional = 1
	pqRepeated = 2

	pqUncompressed = 0
	pqSnappy       = 1

	pqPlain          = 0
	pqPlainDict      = 2
	pqRLE            = 3
	pqRLEDict        = 8
	pqDataPage       = 0
	pqDictionaryPage = 2
	pqDataPageV2     = 3

	pqHint    = "rewrite the file with datasets >= 4.6, or index the Arrow cache of load_dataset"
	pqMagic   = "PAR1"
	pqTrailer = 8 // footer length and magic
	// maxRowsPerByte bounds a row group's rows by the size of its image column chunk, so that
	// a row count is checked before rows are made for it: RLE levels take less than a bit a
	// row only for runs of nulls.
	maxRowsPerByte = 64
)

var pqCodecs = []string{"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW"}

// pqLeaf is a leaf column of a Parquet schema.
type pqLeaf struct {
	path   []string
	typ    int64
	maxDef int
	maxRep int
	index  int // its column chunk's index in a row group
}

// pqChunk is a column chunk's metadata, as far as it is read.
type pqChunk struct {
	codec    int64
	start    int64 // the first page: the dictionary page's, if any
	size     int64
	external bool // file_path set: the chunk is in another file
}

// parquetSource reads a Parquet file row group by row group.
type parquetSource struct {
	s                  *Scanner
	dataEnd            int64 // where the footer starts
	groups             [][]pqChunk
	groupRows          []int64
	next               int
	image, path, label *pqLeaf
}

// openParquet reads a Parquet file's footer and finds its image, path and label columns.
func openParquet(s *Scanner) (source, error) {
	if s.size < 2*int64(len(pqMagic))+4 {
		return nil, s.errorf("too short for a Parquet file")
	}
	t, err := s.readAt(s.size-pqTrailer, pqTrailer, "the Parquet trailer")
	if err != nil {
		return nil, err
	}
	n := int64(binary.LittleEndian.Uint32(t))
	if string(t[4:]) != pqMagic || n > s.size-pqTrailer-int64(len(pqMagic)) || n > maxMeta {
		if string(t[4:]) == "PARE" {
			return nil, s.errorf("its footer is encrypted: not read")
		}
		return nil, s.errorf("a Parquet file must end with its footer's length and %q: truncated, or not Parquet", pqMagic)
	}
	p := &parquetSource{s: s, dataEnd: s.size - pqTrailer - n}
	footer, err := s.readAt(p.dataEnd, n, "the Parquet footer")
	if err != nil {
		return nil, err
	}
	th := &thrift{b: footer}
	elems, hf := p.fileMetaData(th)
	if th.err != nil {
		return nil, s.errorf("the Parquet footer: %w", th.err)
	}
	leaves, top, err := pqLeaves(elems)
	if err != nil {
		return nil, s.errorf("the Parquet schema: %w", err)
	}
	if err := s.chooseColumns(top, hf); err != nil {
		return nil, err
	}
	for i := range leaves {
		l := &leaves[i]
		switch {
		case len(l.path) == 2 && l.path[0] == s.schema.ImageColumn && l.path[1] == "bytes" && l.typ == pqByteArray:
			p.image = l
		case len(l.path) == 2 && l.path[0] == s.schema.ImageColumn && l.path[1] == "path" && l.typ == pqByteArray:
			p.path = l
		case len(l.path) == 1 && l.path[0] == s.schema.LabelColumn && (l.typ == pqInt64 || l.typ == pqInt32):
			p.label = l
		}
	}
	if p.image == nil || p.image.maxRep > 0 || p.path != nil && p.path.maxRep > 0 {
		return nil, s.columnError(s.schema.ImageColumn, "an Image: struct{bytes: binary, path: string}", "of another Parquet type")
	}
	if s.schema.LabelColumn != "" && (p.label == nil || p.label.maxRep > 0) {
		return nil, s.columnError(s.schema.LabelColumn, "an integer (ClassLabel) column", "of another Parquet type")
	}
	for g, cols := range p.groups {
		for _, l := range []*pqLeaf{p.image, p.path, p.label} {
			if l == nil {
				continue
			}
			if l.index >= len(cols) {
				return nil, s.errorf("row group %d has %d column chunks, column %q is %d", g, len(cols), strings.Join(l.path, "."), l.index)
			}
			if c := cols[l.index]; l == p.image && c.codec != pqUncompressed {
				return nil, s.refused(fmt.Sprintf("row group %d, column %q: compressed with %s", g, strings.Join(l.path, "."), codecName(c.codec)), pqHint)
			} else if c.external || c.start < int64(len(pqMagic)) || c.size < 0 || c.start > p.dataEnd-c.size {
				return nil, s.errorf("row group %d: column %q's chunk [%d,+%d) is not inside the file's data (or in another file)", g, strings.Join(l.path, "."), c.start, c.size)
			}
		}
	}
	return p, nil
}

// fileMetaData reads FileMetaData: the schema's elements (returned), the row groups (into p)
// and the "huggingface" metadata.
func (p *parquetSource) fileMetaData(th *thrift) ([]pqElement, string) {
	var elems []pqElement
	hf := ""
	th.fields(func(id int16, typ byte) bool {
		switch id {
		case 2:
			th.structs(typ, func() { elems = append(elems, pqSchemaElement(th)) })
		case 4:
			th.structs(typ, func() { p.rowGroup(th) })
		case 5:
			th.structs(typ, func() {
				var k, v []byte
				th.fields(func(id int16, typ byte) bool {
					switch id {
					case 1:
						k = th.str(typ)
					case 2:
						v = th.str(typ)
					default:
						return false
					}
					return true
				})
				if string(k) == hfKey {
					hf = string(v)
				}
			})
		default:
			return false
		}
		return true
	})
	return elems, hf
}

// pqElement is a SchemaElement.
type pqElement struct {
	name                  string
	typ, rep, numChildren int64
}

func pqSchemaElement(th *thrift) pqElement {
	e := pqElement{typ: -1}
	th.fields(func(id int16, typ byte) bool {
		switch id {
		case 1:
			e.typ = th.int(typ)
		case 3:
			e.rep = th.int(typ)
		case 4:
			e.name = string(th.str(typ))
		case 5:
			e.numChildren = th.int(typ)
		default:
			return false
		}
		return true
	})
	return e
}

// rowGroup reads a RowGroup: its column chunks and rows.
func (p *parquetSource) rowGroup(th *thrift) {
	var cols []pqChunk
	var rows int64
	th.fields(func(id int16, typ byte) bool {
		switch id {
		case 1:
			th.structs(typ, func() { cols = append(cols, pqColumnChunk(th)) })
		case 3:
			rows = th.int(typ)
		default:
			return false
		}
		return true
	})
	p.groups = append(p.groups, cols)
	p.groupRows = append(p.groupRows, rows)
}

// pqColumnChunk reads a ColumnChunk and its ColumnMetaData.
func pqColumnChunk(th *thrift) pqChunk {
	var c pqChunk
	var dataPage, dictPage int64
	th.fields(func(id int16, typ byte) bool {
		switch {
		case id == 1 && typ == ctBinary:
			c.external = len(th.binary()) > 0
		case id == 3 && typ == ctStruct:
			th.fields(func(id int16, typ byte) bool {
				switch id {
				case 4:
					c.codec = th.int(typ)
				case 7:
					c.size = th.int(typ)
				case 9:
					dataPage = th.int(typ)
				case 11:
					dictPage = th.int(typ)
				default:
					return false
				}
				return true
			})
		default:
			return false
		}
		return true
	})
	c.start = dataPage
	if dictPage > 0 && dictPage < dataPage {
		c.start = dictPage
	}
	return c
}

// pqLeaves flattens the schema's elements (depth first, the root first) into leaf columns, and
// returns the names of the top-level columns.
func pqLeaves(elems []pqElement) ([]pqLeaf, []string, error) {
	if len(elems) == 0 {
		return nil, nil, fmt.Errorf("no schema")
	}
	var leaves []pqLeaf
	var top []string
	next := 1
	var walk func(parent pqLeaf, n int64, depth int) error
	walk = func(parent pqLeaf, n int64, depth int) error {
		if depth > maxDepth || n < 0 || n > int64(len(elems)-next) {
			return fmt.Errorf("an element with %d children, %d elements left, at depth %d", n, len(elems)-next, depth)
		}
		for range n {
			if next == len(elems) {
				return fmt.Errorf("the schema's elements end within a group's children")
			}
			i := next
			e := elems[i]
			next++
			l := pqLeaf{path: append(slices.Clip(parent.path), e.name), typ: e.typ, maxDef: parent.maxDef, maxRep: parent.maxRep}
			if depth == 0 {
				top = append(top, e.name)
			}
			switch e.rep {
			case pqOptional:
				l.maxDef++
			case pqRepeated:
				l.maxDef++
				l.maxRep++
			}
			if e.numChildren > 0 {
				if err := walk(l, e.numChildren, depth+1); err != nil {
					return err
				}
				continue
			}
			l.index = len(leaves)
			leaves = append(leaves, l)
		}
		return nil
	}
	if err := walk(pqLeaf{}, elems[0].numChildren, 0); err != nil {
		return nil, nil, err
	}
	return leaves, top, nil
}

// batch reads the next row group's rows.
func (p *parquetSource) batch(rows []Row, first int64) ([]Row, error) {
	if p.next == len(p.groups) {
		return rows, io.EOF
	}
	g := p.next
	p.next++
	n := p.groupRows[g]
	if size := p.groups[g][p.image.index].size; n < 0 || n > maxRowsPerByte*size+1024 {
		return rows, p.s.errorf("row group %d: %d rows, its image column chunk %d bytes", g, n, size)
	}
	base := len(rows)
	for i := range n {
		rows = append(rows, Row{Index: first + i})
	}
	rg := rows[base:]
	// The image column: its values must be PLAIN in uncompressed pages.
	err := p.column(g, p.image, true, func(i int, v []byte, at int64) {
		rg[i].HasImage, rg[i].ImageOff, rg[i].ImageSize = true, at, int64(len(v))
		rg[i].HasHead = true
		copy(rg[i].ImageHead[:], v)
		if p.s.opt.Checksums {
			rg[i].ImageCRC = crc32c(v)
		}
	}, nil)
	if err == nil && p.path != nil {
		err = p.column(g, p.path, false, func(i int, v []byte, _ int64) { rg[i].Path = baseName(v) }, nil)
	}
	if err == nil && p.label != nil {
		err = p.column(g, p.label, false, nil, func(i int, v int64) { rg[i].HasLabel, rg[i].Label = true, v })
	}
	if err != nil {
		return rows[:base], err
	}
	for i := range rg {
		if !rg[i].HasImage {
			rg[i].Path = nil
		}
	}
	return rows, nil
}

// column reads leaf l's chunk in row group g, calling bytesFn (BYTE_ARRAY) or intFn (INT32,
// INT64) with the row number and value of each non-null value. For a bytes value, at is its
// offset in the file, meaningful where the value is PLAIN in an uncompressed page (inPlace
// demands that, refusing anything else).
func (p *parquetSource) column(g int, l *pqLeaf, inPlace bool, bytesFn func(int, []byte, int64), intFn func(int, int64)) error {
	c := p.groups[g][l.index]
	s := p.s
	name := strings.Join(l.path, ".")
	fail := func(format string, a ...any) error {
		return s.errorf("row group %d, column %q: "+format, append([]any{g, name}, a...)...)
	}
	refuse := func(what string) error {
		return s.refused(fmt.Sprintf("row group %d, column %q: %s", g, name, what), pqHint)
	}
	codec := codecName(c.codec)
	if inPlace && c.codec != pqUncompressed {
		return refuse("compressed with " + codec)
	}
	if c.codec != pqUncompressed && c.codec != pqSnappy {
		return fail("compressed with %s, which is not read (only UNCOMPRESSED and SNAPPY)", codec)
	}
	var chunk []byte
	var err error
	if inPlace && c.size <= windowSize {
		// The image column's values are used before the next read, so its chunks are read
		// through the window, in reads of windowSize that the label and path chunks after them
		// are read from too: each byte of the file read once, not copied again
		// (docs/bench/formats-notes.md#parquet-reads).
		if chunk, err = s.win.bytes(c.start, c.size); err != nil {
			return s.errorf("read column %s [%d,+%d): %w", name, c.start, c.size, err)
		}
	} else if chunk, err = s.readAt(c.start, c.size, "column "+name); err != nil {
		return err
	}
	rows := int(p.groupRows[g])
	var dict [][]byte // a BYTE_ARRAY dictionary
	var dictInts []int64
	row := 0
	levels := make([]uint8, 0, rows)
	for pos := 0; pos < len(chunk) && row < rows; {
		hdr, body, next, err := p.pageHeader(chunk, pos)
		if err != nil {
			return fail("page at byte %d: %w", c.start+int64(pos), err)
		}
		bodyAt := c.start + int64(pos+hdr.headerLen)
		pos = next
		switch hdr.typ {
		case pqDictionaryPage:
			if inPlace {
				return refuse("dictionary-encoded")
			}
			if hdr.encoding != pqPlain && hdr.encoding != pqPlainDict {
				return fail("a dictionary page of encoding %d", hdr.encoding)
			}
			v, err := p.decompress(c.codec, body, hdr.uncompressed)
			if err != nil {
				return fail("%w", err)
			}
			dict, dictInts, err = plainValues(v, l.typ, hdr.numValues)
			if err != nil {
				return fail("dictionary page: %w", err)
			}
			continue
		case pqDataPage, pqDataPageV2:
		default:
			continue // index pages
		}
		if hdr.numValues < 0 || hdr.numValues > int64(rows-row) {
			return fail("a page of %d values, %d rows left", hdr.numValues, rows-row)
		}
		nv := int(hdr.numValues)
		var values []byte
		var valuesAt int64 // the file offset of values[0], where values is read in place
		levels = levels[:0]
		if inPlace && hdr.encoding != pqPlain {
			return refuse(encodingName(hdr.encoding) + "-encoded, not PLAIN")
		}
		var defs []byte // the definition levels (RLE/bit-packed hybrid), if l.maxDef > 0
		if hdr.typ == pqDataPage {
			page, err := p.decompress(c.codec, body, hdr.uncompressed)
			if err != nil {
				return fail("%w", err)
			}
			at := 0
			if l.maxDef > 0 {
				if hdr.defEncoding != pqRLE {
					return fail("definition levels encoded %d, not RLE", hdr.defEncoding)
				}
				n, ok := leU32(page, 0)
				if !ok || int64(n) > int64(len(page)-4) {
					return fail("definition levels of %d bytes in a page of %d", n, len(page))
				}
				defs, at = page[4:4+n], 4+int(n)
			}
			values, valuesAt = page[at:], bodyAt+int64(at)
		} else {
			if hdr.repLen != 0 || hdr.defLen < 0 || hdr.defLen > int64(len(body)) {
				return fail("levels of %d and %d bytes in a page of %d", hdr.repLen, hdr.defLen, len(body))
			}
			defs, values, valuesAt = body[:hdr.defLen], body[hdr.defLen:], bodyAt+hdr.defLen
		}
		if l.maxDef > 0 {
			if levels, err = decodeHybrid(defs, bits.Len(uint(l.maxDef)), nv, levels); err != nil {
				return fail("definition levels: %w", err)
			}
		}
		if hdr.typ == pqDataPageV2 && hdr.compressedV2 && c.codec != pqUncompressed {
			if values, err = p.decompress(c.codec, values, hdr.uncompressed-hdr.defLen); err != nil {
				return fail("%w", err)
			}
		}
		present := nv
		if l.maxDef > 0 {
			present = 0
			for _, d := range levels {
				if int(d) == l.maxDef {
					present++
				}
			}
		}
		var vb [][]byte
		var vi []int64
		var offs []int
		switch hdr.encoding {
		case pqPlain:
			if l.typ == pqByteArray {
				offs, err = plainByteArrays(values, present)
			} else {
				_, vi, err = plainValues(values, l.typ, int64(present))
			}
		case pqPlainDict, pqRLEDict:
			vb, vi, err = dictValues(values, present, dict, dictInts, l.typ)
		default:
			err = fmt.Errorf("%s values are not read", encodingName(hdr.encoding))
		}
		if err != nil {
			return fail("page at byte %d: %w", bodyAt, err)
		}
		k := 0
		for i := range nv {
			if l.maxDef > 0 && int(levels[i]) != l.maxDef {
				continue
			}
			switch {
			case offs != nil:
				bytesFn(row+i, values[offs[2*k]:offs[2*k+1]], valuesAt+int64(offs[2*k]))
			case vb != nil:
				bytesFn(row+i, vb[k], -1)
			case vi != nil && intFn != nil:
				intFn(row+i, vi[k])
			}
			k++
		}
		row += nv
	}
	if row != rows {
		return fail("%d values for %d rows", row, rows)
	}
	return nil
}

func codecName(c int64) string {
	if c >= 0 && c < int64(len(pqCodecs)) {
		return pqCodecs[c]
	}
	return fmt.Sprintf("codec %d", c)
}

var pqEncodings = []string{"PLAIN", "GROUP_VAR_INT", "PLAIN_DICTIONARY", "RLE", "BIT_PACKED", "DELTA_BINARY_PACKED",
	"DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY", "RLE_DICTIONARY", "BYTE_STREAM_SPLIT"}

func encodingName(e int64) string {
	if e >= 0 && e < int64(len(pqEncodings)) {
		return pqEncodings[e]
	}
	return fmt.Sprintf("encoding %d", e)
}

// pqPage is a PageHeader, as far as it is read.
type pqPage struct {
	typ, encoding, defEncoding int64
	numValues                  int64
	uncompressed, compressed   int64
	defLen, repLen             int64
	compressedV2               bool // DataPageHeaderV2.is_compressed
	headerLen                  int
}

// pageHeader reads the page header at chunk[pos:] and returns it, the page's body and the
// position after it.
func (p *parquetSource) pageHeader(chunk []byte, pos int) (pqPage, []byte, int, error) {
	th := &thrift{b: chunk[pos:]}
	h := pqPage{compressedV2: true}
	th.fields(func(id int16, typ byte) bool {
		switch {
		case id == 1:
			h.typ = th.int(typ)
		case id == 2:
			h.uncompressed = th.int(typ)
		case id == 3:
			h.compressed = th.int(typ)
		case (id == 5 || id == 7 || id == 8) && typ == ctStruct: // data, dictionary, data v2
			th.fields(func(fid int16, ft byte) bool {
				switch {
				case fid == 1:
					h.numValues = th.int(ft)
				case id == 5 && fid == 2 || id == 7 && fid == 2 || id == 8 && fid == 4:
					h.encoding = th.int(ft)
				case id == 5 && fid == 3:
					h.defEncoding = th.int(ft)
				case id == 8 && fid == 5:
					h.defLen = th.int(ft)
				case id == 8 && fid == 6:
					h.repLen = th.int(ft)
				case id == 8 && fid == 7 && (ft == ctTrue || ft == ctFalse):
					h.compressedV2 = ft == ctTrue
				default:
					return false
				}
				return true
			})
		default:
			return false
		}
		return true
	})
	if th.err != nil {
		return h, nil, 0, th.err
	}
	h.headerLen = th.pos
	if h.compressed < 0 || h.compressed > int64(len(chunk)-pos-th.pos) || h.uncompressed < 0 || h.uncompressed > maxPage {
		return h, nil, 0, fmt.Errorf("a page of %d bytes (%d uncompressed), %d left in the chunk", h.compressed, h.uncompressed, len(chunk)-pos-th.pos)
	}
	start := pos + th.pos
	return h, chunk[start : start+int(h.compressed)], start + int(h.compressed), nil
}

// decompress returns a page's body decompressed (codec UNCOMPRESSED: as it is).
func (p *parquetSource) decompress(codec int64, b []byte, size int64) ([]byte, error) {
	if codec == pqUncompressed {
		return b, nil
	}
	if size < 0 || size > maxPage {
		return nil, fmt.Errorf("a page of %d bytes uncompressed", size)
	}
	out, err := unsnappy(nil, b, int(size))
	return out, err
}

// plainByteArrays returns where n PLAIN BYTE_ARRAY values (each a 4-byte length, then the
// bytes) lie in b: value k is b[offs[2k]:offs[2k+1]].
func plainByteArrays(b []byte, n int) ([]int, error) {
	offs := make([]int, 0, 2*n)
	pos := 0
	for k := 0; k < n; k++ {
		l, ok := leU32(b, pos)
		if !ok || int64(l) > int64(len(b)-pos-4) {
			return nil, fmt.Errorf("value %d of %d runs past the page's end", k, n)
		}
		offs = append(offs, pos+4, pos+4+int(l))
		pos += 4 + int(l)
	}
	return offs, nil
}

// plainValues decodes n PLAIN values of type typ from b: byte arrays (copied) or integers.
func plainValues(b []byte, typ int64, n int64) ([][]byte, []int64, error) {
	if n < 0 || n > int64(len(b)) {
		return nil, nil, fmt.Errorf("%d values in %d bytes", n, len(b))
	}
	switch typ {
	case pqByteArray:
		offs, err := plainByteArrays(b, int(n))
		if err != nil {
			return nil, nil, err
		}
		vals := make([][]byte, n)
		for k := range vals {
			vals[k] = b[offs[2*k]:offs[2*k+1]]
		}
		return vals, nil, nil
	case pqInt32, pqInt64:
		w := int64(4)
		if typ == pqInt64 {
			w = 8
		}
		if n*w > int64(len(b)) {
			return nil, nil, fmt.Errorf("%d values of %d bytes in %d bytes", n, w, len(b))
		}
		vals := make([]int64, n)
		for k := range vals {
			if w == 8 {
				vals[k] = int64(binary.LittleEndian.Uint64(b[8*k:]))
			} else {
				vals[k] = int64(int32(binary.LittleEndian.Uint32(b[4*k:])))
			}
		}
		return nil, vals, nil
	}
	return nil, nil, fmt.Errorf("values of type %d are not read", typ)
}

// dictValues decodes n dictionary indices (a bit width byte, then the RLE/bit-packed hybrid)
// and returns the values they index.
func dictValues(b []byte, n int, dict [][]byte, dictInts []int64, typ int64) ([][]byte, []int64, error) {
	if n == 0 {
		return nil, nil, nil
	}
	if len(b) == 0 || b[0] > 32 {
		return nil, nil, fmt.Errorf("no dictionary index width")
	}
	idx, err := decodeHybrid32(b[1:], int(b[0]), n)
	if err != nil {
		return nil, nil, fmt.Errorf("dictionary indices: %w", err)
	}
	size := len(dict)
	if typ != pqByteArray {
		size = len(dictInts)
	}
	for _, i := range idx {
		if int(i) >= size {
			return nil, nil, fmt.Errorf("dictionary index %d of %d values", i, size)
		}
	}
	if typ == pqByteArray {
		vals := make([][]byte, n)
		for k, i := range idx {
			vals[k] = dict[i]
		}
		return vals, nil, nil
	}
	vals := make([]int64, n)
	for k, i := range idx {
		vals[k] = dictInts[i]
	}
	return nil, vals, nil
}

// decodeHybrid decodes n levels of width bits (at most 8) from Parquet's RLE/bit-packed hybrid
// encoding in b, appending them to out.
func decodeHybrid(b []byte, width, n int, out []uint8) ([]uint8, error) {
	v, err := decodeHybrid32(b, width, n)
	for _, x := range v {
		out = append(out, uint8(x))
	}
	return out, err
}

// decodeHybrid32 decodes n values of width bits from the RLE/bit-packed hybrid encoding.
func decodeHybrid32(b []byte, width, n int) ([]uint32, error) {
	out := make([]uint32, 0, n)
	pos := 0
	for len(out) < n {
		h, k := binary.Uvarint(b[pos:])
		if k <= 0 {
			return nil, fmt.Errorf("%d of %d values, then no run header", len(out), n)
		}
		pos += k
		if h&1 == 1 { // bit-packed: h>>1 groups of 8 values
			groups := h >> 1
			if groups > uint64(len(b)-pos)/uint64(max(width, 1)) {
				return nil, fmt.Errorf("%d bit-packed groups of width %d, %d bytes left", groups, width, len(b)-pos)
			}
			bitsAt := pos * 8
			for i := uint64(0); i < groups*8 && len(out) < n; i++ {
				var v uint32
				for j := range width {
					bit := bitsAt + int(i)*width + j
					v |= uint32(b[bit>>3]>>(bit&7)&1) << j
				}
				out = append(out, v)
			}
			pos += int(groups) * width
			continue
		}
		count, w := h>>1, (width+7)/8
		if pos+w > len(b) {
			return nil, fmt.Errorf("a run's value past the end")
		}
		var v uint32
		for j := range w {
			v |= uint32(b[pos+j]) << (8 * j)
		}
		pos += w
		for i := uint64(0); i < count && len(out) < n; i++ {
			out = append(out, v)
		}
	}
	return out, nil
}
