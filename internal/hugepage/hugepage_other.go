//go:build !linux

package hugepage

// Advise does nothing: huge pages are advised on Linux only (hugepage_linux.go).
func Advise([]byte) {}
