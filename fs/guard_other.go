//go:build !linux

package fs

// guardReadOnly does nothing: mounts are watched on Linux only (guard_linux.go).
func (f *FS) guardReadOnly(string, <-chan struct{}) {}
