package layout

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// randomTree returns a tree whose root holds dirs directories (some empty, some holding
// directories), with files in shards, their extents in id order unless shuffled.
func randomTree(rng *rand.Rand, dirs int, shuffled bool) (*Node, []Shard) {
	root := &Node{Mode: ModeDir | 0o755, MTime: 99}
	shards := make([]Shard, dirs)
	var off uint64
	var fill func(d *Node, shard uint32, depth int)
	fill = func(d *Node, shard uint32, depth int) {
		for i := range rng.IntN(12) {
			name := fmt.Sprintf("%s%03d", strings.Repeat("n", 1+rng.IntN(9)), i)
			if depth < 2 && rng.IntN(4) == 0 {
				c := &Node{Name: name + ".d", Mode: ModeDir | 0o700, MTime: int64(rng.IntN(1000))}
				d.Children = append(d.Children, c)
				fill(c, shard, depth+1)
				continue
			}
			size := uint64(rng.IntN(3000))
			d.Children = append(d.Children, &Node{Name: name, Mode: ModeRegular | 0o444, MTime: int64(rng.IntN(1000)),
				Shard: shard, Offset: off, Size: size, CRC: rng.Uint32()})
			off += size
		}
	}
	for i := range dirs {
		d := &Node{Name: fmt.Sprintf("src-%04d", i), Mode: ModeDir | 0o755, MTime: int64(i)}
		root.Children = append(root.Children, d)
		off = 0
		if i%7 != 3 { // every seventh is empty
			fill(d, uint32(i), 0)
		}
		shards[i] = Shard{Name: d.Name + ".zip", Kind: ShardTar, Size: off, Version: fmt.Sprint(i), CRC: uint32(i)}
	}
	if shuffled { // the last source's first file goes last: not in extent order
		n := root.Children[len(root.Children)-1]
		if len(n.Children) > 1 && !n.Children[0].IsDir() {
			n.Children[0].Offset = off
		}
	}
	return root, shards
}

// TestTreeWriterBytes holds TreeWriter to EncodeIndex: the same bytes for the same tree, small
// blocks (TestMain) and aifs's, in extent order or not, with and without checksums.
func TestTreeWriterBytes(t *testing.T) {
	ordered := 0 // indexes with an extent order
	for _, real := range []bool{false, true} {
		if real {
			pb, bb := defaultPerBlock, defaultBlockBytes
			defaultPerBlock, defaultBlockBytes = 1024, 64<<10
			t.Cleanup(func() { defaultPerBlock, defaultBlockBytes = pb, bb })
		}
		for seed := range uint64(20) {
			rng := rand.New(rand.NewPCG(seed, 49))
			dirs := []int{1, 2, 5, 40, 300}[seed%5]
			root, shards := randomTree(rng, dirs, seed%3 == 0)
			noCRC := seed%4 == 1
			want := EncodeIndex(Number(root), shards, noCRC)
			tw, err := NewTreeWriter(root)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range root.Children {
				if _, err := tw.Add(d); err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
			}
			got, err := tw.Finish(shards, noCRC)
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("blocks %d, seed %d (%d directories): TreeWriter's %d bytes differ from EncodeIndex's %d", defaultPerBlock, seed, dirs, len(got), len(want))
			}
			if _, err := Parse(got); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			if le.Uint32(got[12:])&flagExtentOrder != 0 {
				ordered++
			}
		}
	}
	if ordered == 0 {
		t.Error("no index had an extent order: entriesExtentOrder went untested")
	}
}

// TestTreeWriterMisuse: subtrees out of order, missing, or a root child that is a file fail
// with an error, not a panic or a wrong index.
func TestTreeWriterMisuse(t *testing.T) {
	root, shards := randomTree(rand.New(rand.NewPCG(1, 2)), 3, false)
	tw, _ := NewTreeWriter(root)
	if _, err := tw.Add(root.Children[1]); err == nil {
		t.Error("Add of the second subtree first: no error")
	}
	if _, err := tw.Add(root.Children[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Finish(shards, false); err == nil || !strings.Contains(err.Error(), "never came") {
		t.Errorf("Finish with subtrees missing: %v", err)
	}
	root.Children[0], root.Children[1] = root.Children[1], root.Children[0]
	if _, err := NewTreeWriter(root); err == nil {
		t.Error("NewTreeWriter with the root's children out of order: no error")
	}
	root.Children[0], root.Children[1] = root.Children[1], root.Children[0]
	root.Children[2] = &Node{Name: "zz", Mode: ModeRegular}
	if _, err := NewTreeWriter(root); err == nil {
		t.Error("NewTreeWriter with a file among the root's children: no error")
	}
}
