package fs

import (
	"bytes"
	"encoding/binary"
	"slices"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/aifs/aifs/layout"
)

// TestLocations: .aifs/locations, read whole and in pieces that cut its header, records and
// shard table anywhere, says for every entry what the index says, and names the shards and the
// source.
func TestLocations(t *testing.T) {
	f, s := newTestFS(t, Options{Source: "/data/set"})
	dir, st := lookup(f, fuse.FUSE_ROOT_ID, ".aifs")
	if st != fuse.OK {
		t.Fatalf("Lookup .aifs: %v", st)
	}
	out, st := lookup(f, dir.NodeId, "locations")
	if st != fuse.OK || out.Mode != syscall.S_IFREG|0o444 || out.EntryTimeout() == 0 {
		t.Fatalf("Lookup .aifs/locations: %v, attr %+v", st, out.Attr)
	}
	ents, _, _ := listAll(t, f, dir.NodeId, false, 1<<16)
	if !slices.Contains(names(ents), "locations") {
		t.Errorf(".aifs lists %q; want locations among them", names(ents))
	}
	whole, st := readFile(t, f, out.NodeId, 0, uint32(out.Size)+100)
	if st != fuse.OK || uint64(len(whole)) != out.Size {
		t.Fatalf("Read locations: %v, %d bytes of %d", st, len(whole), out.Size)
	}
	for _, piece := range []uint64{1, 7, 23, 24, 25, 64, 1000} {
		var got []byte
		for off := uint64(0); off < out.Size; off += piece {
			b, st := readFile(t, f, out.NodeId, off, uint32(piece))
			if st != fuse.OK || len(b) == 0 {
				t.Fatalf("Read locations [%d,+%d): %v, %d bytes", off, piece, st, len(b))
			}
			got = append(got, b...)
		}
		if !bytes.Equal(got, whole) {
			t.Fatalf("locations read in pieces of %d differ from the whole", piece)
		}
	}

	le := binary.LittleEndian
	x := s.x
	if string(whole[:8]) != "AIFSLOC\x00" || le.Uint32(whole[8:]) != 1 || le.Uint32(whole[12:]) != 24 ||
		le.Uint64(whole[16:]) != uint64(x.Len()) || le.Uint64(whole[24:]) != 64+24*uint64(x.Len()) ||
		le.Uint32(whole[32:]) != uint32(len(x.Shards())) || le.Uint32(whole[36:]) != x.Identity() || x.Identity() == 0 {
		t.Fatalf("header %x; index has %d entries, %d shards, identity %#x", whole[:64], x.Len(), len(x.Shards()), x.Identity())
	}
	files := 0
	for id := layout.ID(0); int(id) < x.Len(); id++ {
		e, r := x.Entry(id), whole[64+24*int(id):]
		if e.IsDir() {
			if le.Uint32(r[16:]) != 0xFFFFFFFF || le.Uint64(r) != 0 || le.Uint64(r[8:]) != 0 {
				t.Errorf("record of directory %q: %x", x.Path(id), r[:24])
			}
			continue
		}
		files++
		if le.Uint64(r) != e.Offset || le.Uint64(r[8:]) != e.Size || le.Uint32(r[16:]) != e.Shard || le.Uint32(r[20:]) != e.CRC {
			t.Errorf("record of %q: %x; entry %+v", x.Path(id), r[:24], e)
		}
	}
	if files != x.Files() || files == 0 {
		t.Errorf("%d file records, index has %d files", files, x.Files())
	}
	tail := whole[le.Uint64(whole[24:]):]
	for _, sh := range x.Shards() {
		n := int(le.Uint16(tail[8:]))
		if le.Uint64(tail) != sh.Size || string(tail[10:10+n]) != sh.Name {
			t.Fatalf("shard table entry %x; want %q of %d bytes", tail[:10+n], sh.Name, sh.Size)
		}
		tail = tail[10+n:]
	}
	if n := int(le.Uint16(tail)); n != len(tail)-2 || string(tail[2:]) != "/data/set" {
		t.Errorf("source %q (length %d)", tail[2:], n)
	}
}
