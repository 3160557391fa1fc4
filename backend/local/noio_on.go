//go:build aifs_noio

package local

// NoIO is true in a build with tag aifs_noio: the O_DIRECT reads skip the device and return
// their buffers' stale bytes. integration/bench/compare.sh builds one (never shipped) to measure
// what aifs's own path costs without a disk: the CPU bound of a figure on that machine.
const NoIO = true
