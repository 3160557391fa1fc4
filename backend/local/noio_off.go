//go:build !aifs_noio

package local

// NoIO is false: reads reach the device (see noio_on.go for the benchmark's no-I/O build).
const NoIO = false
