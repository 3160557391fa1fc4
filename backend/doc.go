// Package backend will define the small contract for reading shard bytes (ReadAt with a
// context, no short reads), with implementations in subpackages: local (O_DIRECT from NVMe),
// s3 (ranged GETs, minio-go) and memory (tests). Metrics and fault injection wrap the same
// interface. It may import layout only.
package backend
