// Package prefetch holds the Loader, which serves samples to fs (whole samples shared between
// readers, a byte-bounded memory cache, read-ahead pushed into the kernel's page cache, samples
// over MaxWhole read range by range), and the Planner, a pure state machine that watches reads
// and plan hints and decides what to fetch ahead. It may import layout and backend, never FUSE.
// Measurements behind its constants are in docs/bench/README.md.
package prefetch
