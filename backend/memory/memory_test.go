package memory

import (
	"bytes"
	"context"
	"testing"

	"github.com/aifs/aifs/backend"
	"github.com/aifs/aifs/backend/backendtest"
	"github.com/aifs/aifs/layout"
)

func TestSuite(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, files map[string][]byte) backend.Backend {
		return New(files)
	})
}

// TestNewCopiesMap checks that shards added to or removed from the caller's map after New do not
// change the Backend.
func TestNewCopiesMap(t *testing.T) {
	files := map[string][]byte{layout.ShardName(0): []byte("abc")}
	b := New(files)
	t.Cleanup(func() { b.Close() })
	delete(files, layout.ShardName(0))
	files[layout.ShardName(1)] = []byte("x")
	if sh, err := b.Open(t.Context(), layout.Shard{Name: layout.ShardName(0), Size: 3}); err != nil {
		t.Errorf("Open of a shard deleted from the caller's map: %v", err)
	} else {
		sh.Close()
	}
	if _, err := b.Open(t.Context(), layout.Shard{Name: layout.ShardName(1), Size: 1}); err == nil {
		t.Error("Open of a shard added to the caller's map after New succeeded")
	}
}

// TestNoAllocs checks that ReadAt and View/Release allocate nothing (sync.Pool may drop a view
// now and then under the race detector; AllocsPerRun's integer average absorbs that).
func TestNoAllocs(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 1000)
	b := New(map[string][]byte{layout.ShardName(0): data})
	t.Cleanup(func() { b.Close() })
	sh, err := b.Open(t.Context(), layout.Shard{Name: layout.ShardName(0), Size: uint64(len(data))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Close() })
	ctx, p := context.Background(), make([]byte, 100)
	if n := testing.AllocsPerRun(1000, func() {
		if err := sh.ReadAt(ctx, p, 123); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("ReadAt: %v allocations per read, want 0", n)
	}
	v := sh.(backend.Viewer)
	if n := testing.AllocsPerRun(1000, func() {
		view, err := v.View(ctx, 123, 100)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(view.Bytes(), data[123:223]) {
			t.Fatal("View: wrong bytes")
		}
		view.Release()
	}); n != 0 {
		t.Errorf("View: %v allocations per view, want 0", n)
	}
}
