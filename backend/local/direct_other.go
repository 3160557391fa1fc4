//go:build !linux

package local

import (
	"fmt"
	"os"
	"runtime"
)

// openDirect refuses: aifs uses O_DIRECT on Linux only, and reads buffered elsewhere.
func openDirect(path string, size int64) (reader, error) {
	return nil, fmt.Errorf("%w: not supported on %s", errRefused, runtime.GOOS)
}

// openDirectFile refuses, like openDirect.
func openDirectFile(path string) (reader, error) {
	return nil, fmt.Errorf("%w: not supported on %s", errRefused, runtime.GOOS)
}

// writeDirect refuses, like openDirect; WriteFile then writes through the page cache.
func writeDirect(path string, data []byte) error {
	return fmt.Errorf("%w: not supported on %s", errRefused, runtime.GOOS)
}

// datasync flushes f's data: fsync where fdatasync is not at hand.
func datasync(f *os.File) error { return f.Sync() }
