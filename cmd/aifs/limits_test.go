package main

import (
	"testing"

	"go.uber.org/zap"

	"github.com/aifs/aifs/fs"
)

// TestMemCacheFor: mem_cache given is kept; otherwise a memory cgroup's limit bounds it, to 1/8
// with kernel_cache=on and 1/2 with off, and a large limit or none leaves the default.
func TestMemCacheFor(t *testing.T) {
	log := zap.NewNop()
	for _, tc := range []struct {
		c    mountConfig
		cg   int64
		want int64
	}{
		{mountConfig{memCache: 64 << 20}, 512 << 20, 64 << 20},
		{mountConfig{}, 0, 0},
		{mountConfig{}, 512 << 20, 64 << 20},
		{mountConfig{kernelCache: fs.CacheOff}, 512 << 20, 256 << 20},
		{mountConfig{}, 64 << 30, 0},
	} {
		if got := tc.c.memCacheFor(log, tc.cg); got != tc.want {
			t.Errorf("%+v in a cgroup of %d: mem_cache %d, want %d", tc.c, tc.cg, got, tc.want)
		}
	}
}
