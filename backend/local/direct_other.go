//go:build !linux

package local

import (
	"fmt"
	"runtime"
)

// openDirect refuses: aifs uses O_DIRECT on Linux only, and reads buffered elsewhere.
func openDirect(path string, size int64) (reader, error) {
	return nil, fmt.Errorf("%w: not supported on %s", errRefused, runtime.GOOS)
}
