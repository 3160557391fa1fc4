//go:build !linux

package diskcache

// newChunkBuffer returns a new zeroed buffer of n bytes for fetched chunks (huge pages are
// advised on Linux only: huge_linux.go).
func newChunkBuffer(n int64) []byte { return make([]byte, n) }
