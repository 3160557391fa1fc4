// Package prefetch will hold the loader (whole-sample fetches shared between readers), the
// byte-bounded memory cache and the epoch planner, a pure state machine that watches reads and
// plan hints and decides what to fetch ahead. It may import layout and backend, never FUSE.
package prefetch
