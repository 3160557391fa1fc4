package pack

import (
	"context"
	"fmt"
	"math"
	"path/filepath"

	"github.com/aifs/aifs/layout"
)

// packTree is the tree Pack walks, held flat so that a file costs 24 bytes and its name: one
// packEntry per entry in id order (FORMAT.md), the names end to end in an arena in the same
// order, and one packDir per directory. It stores no path: a file's source path is its
// directory's, rebuilt from the chain of parents, joined with its name.
//
// The walk adds a directory's kept entries as one block, in name order, then expands its
// subdirectories in that order, depth first: the order in which the index numbers them. So ids
// are assigned as entries are added, and files come in pack order. A packTree is built by one
// goroutine; afterwards only the writer changes it (packEntry.crc), one entry at a time behind
// the readers.
type packTree struct {
	entries entryStore
	names   nameArena
	// dirs in the order their blocks were added: dirs[0] is the root, and dirs[k]'s children
	// are entries [first, first+num), right after those of dirs[k-1].
	dirs []packDir
}

// packEntry is one file or directory of a packTree.
type packEntry struct {
	size    uint64 // a file's size; a directory's index in packTree.dirs
	mtime   int64
	crc     uint32 // a file's CRC32C, set when it is written
	mode    uint16 // Unix st_mode (every bit unixMode sets fits in 16)
	nameLen uint8
}

func (e *packEntry) isDir() bool { return e.mode&layout.ModeType == layout.ModeDir }

// packDir is one directory of a packTree.
type packDir struct {
	nameOff uint64    // of its name, in packTree.names
	id      layout.ID // its entry
	parent  uint32    // its parent's index in packTree.dirs; 0 for the root
	first   layout.ID // its children are entries [first, first+num)
	num     uint32
}

// add appends an entry named name and returns its id and where its name lies in the arena.
func (t *packTree) add(e packEntry, name string) (layout.ID, uint64, error) {
	if t.entries.n >= math.MaxUint32 {
		return 0, 0, fmt.Errorf("more than %d files and directories: ids are 32 bits", uint32(math.MaxUint32))
	}
	e.nameLen = uint8(len(name)) // checked by walker.entry: at most 255 bytes
	t.entries.add(e)
	return layout.ID(t.entries.n - 1), t.names.add(name), nil
}

func (t *packTree) len() int { return t.entries.n }

// packItem is an entry of a packTree as inOrder yields it.
type packItem struct {
	id   layout.ID
	dir  int    // its parent's index in packTree.dirs
	name []byte // in the arena: not to be changed
	*packEntry
}

// inOrder yields the entries after the root in id order.
func (t *packTree) inOrder(yield func(packItem) bool) {
	var off uint64 // the arena's end as the names were added; the root's name is empty
	for k := range t.dirs {
		d := &t.dirs[k]
		for id := d.first; id < d.first+layout.ID(d.num); id++ {
			e := t.entries.at(id)
			off = nameStart(off, int(e.nameLen))
			if !yield(packItem{id: id, dir: k, name: t.names.at(off, e.nameLen), packEntry: e}) {
				return
			}
			off += uint64(e.nameLen)
		}
	}
}

// dirPath returns the source path of dirs[k]: root joined with the names down to it, as the
// walk joined them.
func (t *packTree) dirPath(root string, k int) string {
	if k == 0 {
		return root
	}
	d := &t.dirs[k]
	return filepath.Join(t.dirPath(root, int(d.parent)), string(t.names.at(d.nameOff, t.entries.at(d.id).nameLen)))
}

// EncodeIndex returns the index of the tree written into shards, each file placed as
// place (a fresh shardPlacer) places it.
func (t *packTree) encodeIndex(shards []layout.Shard, place shardPlacer) ([]byte, error) {
	out := layout.NewBuffer(t.indexSizeHint(shards))
	w := layout.NewIndexWriter(out, t.len(), false)
	entry := func(e *packEntry, parent layout.ID) layout.Entry {
		x := layout.Entry{Parent: parent, Mode: uint32(e.mode), MTime: e.mtime}
		if !e.isDir() {
			x.Shard, x.Offset = place.place(e.size)
			x.Size, x.CRC = e.size, e.crc
		} else if d := &t.dirs[e.size]; d.num > 0 {
			x.FirstChild, x.NumChildren = d.first, d.num
		}
		return x
	}
	w.Add(nil, entry(t.entries.at(layout.Root), layout.Root))
	for it := range t.inOrder {
		w.Add(it.name, entry(it.packEntry, t.dirs[it.dir].id))
	}
	if _, err := w.Finish(shards, nil); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// indexSizeHint returns at least the size of the index IndexWriter writes for the tree and
// shards (IndexSize).
func (t *packTree) indexSizeHint(shards []layout.Shard) int {
	return layout.IndexSize(t.len(), len(t.dirs), 0, t.names.end, shards) // the arena's end is at least the names' total
}

// walkTree walks the tree at src into a packTree, following symlinks and skipping what cannot
// be packed, as PackTo documents.
func (p *packer) walkTree(ctx context.Context, src string) (*packTree, error) {
	fi, err := p.w.root(src)
	if err != nil {
		return nil, err
	}
	t := &packTree{dirs: []packDir{{}}}
	if _, _, err := t.add(packEntry{mode: uint16(unixMode(fi)), mtime: fi.ModTime().UnixNano()}, ""); err != nil {
		return nil, err
	}
	return t, p.expand(ctx, t, 0, src, []fileID{idOf(fi)})
}

// expand adds the block of children of dirs[k], whose source path is dir, then expands each
// subdirectory among them. ancestors identifies dir and those above it.
func (p *packer) expand(ctx context.Context, t *packTree, k int, dir string, ancestors []fileID) error {
	ents, err := readDir(ctx, dir)
	if err != nil {
		return err
	}
	type subdir struct {
		id      layout.ID
		nameOff uint64
		path    string
		fid     fileID
	}
	var subdirs []subdir
	first := layout.ID(t.len())
	for _, de := range ents { // sorted by name: the block's order
		e, ok, err := p.w.entry(dir, de, ancestors)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		pe := packEntry{mode: uint16(unixMode(e.info)), mtime: e.info.ModTime().UnixNano()}
		if !e.dir {
			pe.size = uint64(e.info.Size())
		}
		id, nameOff, err := t.add(pe, e.name)
		if err != nil {
			return err
		}
		if e.dir {
			subdirs = append(subdirs, subdir{id, nameOff, e.path, e.id})
		}
	}
	t.dirs[k].first, t.dirs[k].num = first, uint32(layout.ID(t.len())-first)
	for _, s := range subdirs {
		t.entries.at(s.id).size = uint64(len(t.dirs))
		t.dirs = append(t.dirs, packDir{nameOff: s.nameOff, id: s.id, parent: uint32(k)})
		if err := p.expand(ctx, t, len(t.dirs)-1, s.path, append(ancestors, s.fid)); err != nil {
			return err
		}
	}
	return nil
}

// shardPlacer places files, in pack order, into shards of about target bytes each, each
// non-empty file starting on a multiple of align (a power of two; 1 packs them end to end) with
// zero bytes before it to pad: a new shard starts when the next file would take the current one
// past target. A shard is padded with zeros to a multiple of align after its last file: the
// kernel's EROFS fails a read of a shard's last block if the file ends inside it. An empty file
// occupies no bytes and has the offset at which the shard ended before it.
type shardPlacer struct {
	target uint64
	align  uint64
	shards []layout.Shard // the shards so far; the last one is being filled
	end    uint64         // where the last one's last file ends
}

// place places the next file, of size bytes, returning its shard and offset.
func (p *shardPlacer) place(size uint64) (shard uint32, offset uint64) {
	k := len(p.shards)
	if k == 0 || p.end > 0 && p.aligned(p.end, size)+size > p.target {
		p.finish()
		p.shards = append(p.shards, layout.Shard{Name: layout.ShardName(k), Kind: layout.ShardData})
		p.end = 0
	}
	shard, offset = uint32(len(p.shards)-1), p.aligned(p.end, size)
	p.end = offset + size
	return shard, offset
}

// finish pads the last shard, ending its size on a multiple of align. Call it once all files are
// placed, before reading the shards' sizes.
func (p *shardPlacer) finish() {
	if k := len(p.shards); k > 0 {
		p.shards[k-1].Size = p.aligned(p.end, 1)
	}
}

// aligned returns where a file of size bytes starts in a shard that ends at end.
func (p *shardPlacer) aligned(end, size uint64) uint64 {
	if size == 0 || p.align <= 1 {
		return end
	}
	return (end + p.align - 1) &^ (p.align - 1)
}

const entryChunk = 1 << 12

// entryStore holds packEntries in chunks of entryChunk, so that growing it copies nothing
// and leaves at most one chunk unused.
type entryStore struct {
	chunks [][]packEntry
	n      int
}

func (s *entryStore) add(e packEntry) {
	if s.n%entryChunk == 0 {
		s.chunks = append(s.chunks, make([]packEntry, 0, entryChunk))
	}
	c := &s.chunks[len(s.chunks)-1]
	*c = append(*c, e)
	s.n++
}

func (s *entryStore) at(id layout.ID) *packEntry { return &s.chunks[id/entryChunk][id%entryChunk] }

const arenaChunk = 1 << 16

// nameArena holds names end to end in chunks of arenaChunk bytes, never splitting a name, so
// that growing it copies nothing. A name's offset is its chunk's number × arenaChunk plus its
// position there.
type nameArena struct {
	chunks [][]byte
	end    uint64 // where the last name added ends
}

// nameStart returns the offset of a name of n bytes added when the arena ends at end: end, or
// the next chunk's start if the name would cross into it.
func nameStart(end uint64, n int) uint64 {
	if end%arenaChunk+uint64(n) > arenaChunk {
		return end - end%arenaChunk + arenaChunk
	}
	return end
}

func (a *nameArena) add(name string) uint64 {
	off := nameStart(a.end, len(name))
	if off/arenaChunk == uint64(len(a.chunks)) {
		a.chunks = append(a.chunks, make([]byte, 0, arenaChunk))
	}
	c := &a.chunks[off/arenaChunk]
	*c = append(*c, name...)
	a.end = off + uint64(len(name))
	return off
}

func (a *nameArena) at(off uint64, n uint8) []byte {
	i := off % arenaChunk
	return a.chunks[off/arenaChunk][i : i+uint64(n) : i+uint64(n)]
}
