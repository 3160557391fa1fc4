package prefetch

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aifs/aifs/backend"
	"github.com/aifs/aifs/backend/memory"
	"github.com/aifs/aifs/layout"
)

// BenchmarkLoaderRead reads samples of 4-12 KiB whole, in a shuffled order, from readers
// goroutines at once over the memory backend: "miss" fetches every one (nothing is kept),
// "hit" finds every one in the stable subset. One op is one sample read. Figures:
// docs/bench/README.md, "Loader hot path".
func BenchmarkLoaderRead(b *testing.B) {
	const n = 4096
	x, shards, _ := dataset(b, n, 8<<10)
	files := map[string][]byte{}
	for i, s := range x.Shards() {
		files[s.Name] = shards[i].b
	}
	mem := memory.New(files)
	bs := make([]backend.Shard, len(shards))
	for i, s := range x.Shards() {
		sh, err := mem.Open(b.Context(), s)
		if err != nil {
			b.Fatal(err)
		}
		bs[i] = sh
	}
	var ids []layout.ID
	for id := range x.Len() {
		if !x.Entry(layout.ID(id)).IsDir() {
			ids = append(ids, layout.ID(id))
		}
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	for _, mode := range []string{"miss", "hit"} {
		for _, readers := range []int{8, 32} {
			b.Run(fmt.Sprintf("%s/readers=%d", mode, readers), func(b *testing.B) {
				l, err := newLoader(x, bs, Options{KeepRead: mode == "hit", CacheBytes: 256 << 20}, tickEvery)
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				read := func(id layout.ID) {
					e := x.Entry(id)
					s, err := l.Read(nil, 0, id, e, 0, int64(e.Size))
					if err != nil {
						b.Error(err)
						return
					}
					s.Release()
				}
				if mode == "hit" {
					for _, id := range ids {
						read(id)
					}
					l.mem.cache.Wait()
				}
				var next atomic.Int64
				var wg sync.WaitGroup
				b.ReportAllocs()
				b.ResetTimer()
				for range readers {
					wg.Go(func() {
						for i := next.Add(1) - 1; i < int64(b.N); i = next.Add(1) - 1 {
							read(ids[i%int64(len(ids))])
						}
					})
				}
				wg.Wait()
			})
		}
	}
}
