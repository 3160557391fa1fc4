// Package prefetch holds the Loader, which serves samples to fs (whole samples shared between
// readers, a byte-bounded memory cache, read-ahead pushed into the kernel's page cache, samples
// over MaxWhole read range by range), and the Policy, a pure state machine that makes every
// decision (what to read ahead, what to read as chunks, what to push, what the page cache keeps
// and drops) from observations, with the Planner and the Residency as its parts. The Loader
// tells the Policy what happens and carries out the actions it returns. It may import layout
// and backend, never FUSE. Measurements behind its constants are in
// docs/bench/prefetch-notes.md and docs/bench/README.md.
package prefetch
