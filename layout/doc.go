// Package layout is the aifs shard-set format (FORMAT.md): data shards holding sample bytes, and
// one index file describing the directory tree and where each file's bytes lie. This package
// reads an index (Load, Parse: an Index answering lookups, listings and extents from memory),
// writes one (IndexWriter entry by entry; EncodeIndex of a tree of Nodes built in memory, or
// TreeWriter a subtree of its root at a time) and
// checks a shard set against its index (Verify). It knows nothing of FUSE, backends or caching.
//
// # Packages
//
// layout is the bottom of aifs's import graph. Each subpackage holds one concern and imports the
// standard library and, downwards only, what this table says (layout/imports_test.go keeps it so):
//
//	package          holds                                                   imports
//	layout           the index format: Index, IndexWriter, Node, Verify      standard library
//	layout/tar       a tar reader that gives each member's data offset       standard library
//	layout/tfrecord  a TFRecord reader: each tf.train.Example's image extent  standard library
//	layout/hfarrow   a reader of Hugging Face datasets' Arrow (IPC stream,    standard library
//	                 file) and Parquet files: each row's image extent, label
//	layout/pack      a directory tree copied into new shards: Pack, PackTo,  layout
//	                 Sink, ListFiles, WriteIndexFile
//	layout/view      the views of an index in place: a format's records      layout
//	                 become a tree or an ImageFolder (Builder, Record)
//	layout/tarindex  tars indexed in place, as a tree or an ImageFolder      layout, layout/tar,
//	                 (IndexTars, Options, WebDataset samples and labels)     layout/view
//	layout/zip       a ZIP's members and where stored ones' bytes lie        standard library
//	layout/zipindex  ZIPs indexed in place from their central directories    layout, layout/zip,
//	                 (IndexZips; CRC-32 checksums)                           layout/view
//	layout/tfrecordindex TFRecord files indexed in place (IndexTFRecords;    layout, layout/tfrecord,
//	                 ROW.EXT tree, synset or label ImageFolder)              layout/view
//	layout/hfindex   Hugging Face Arrow/Parquet files indexed in place       layout, layout/hfarrow,
//	                 (IndexHF; label or sanitized class-name ImageFolder)    layout/view
//	layout/erofsmeta the metadata-only EROFS image of an index, whose files  layout, go-erofs
//	                 point into the shards, for the kernel data plane:
//	                 Check, Build, Cached
//
// # Where a new source format goes
//
// A format whose files are indexed in place, where they lie (TFRecord, ZIP, Arrow/Parquet), takes
// two packages, as tar does. Its reader, layout/<format>, imports only the standard library and
// yields each record's name and the extent of its bytes in the file. Its indexer,
// layout/<format>index, reads the files with it and gives each file's records (path, extent,
// checksum, label) to a layout/view Builder, which builds the tree of Nodes of the view asked for
// (a directory per file, one merged tree, or an ImageFolder) with the rules every format shares:
// the last of a path wins, labels name class directories. TreeWriter (a directory per file,
// encoded as each is read) or Number and EncodeIndex turn the tree into an index with the source files as shards (Shard: kind 1, named by path, in FORMAT.md;
// Shard.Checksum says whether the entries hold CRC32C, computed while indexing, or a checksum the
// format records, CRC-32/IEEE for ZIP). A format that is converted into new shards instead is a
// source of layout/pack.
//
// # Concurrency and locks
//
// An Index is immutable once loaded and safe for concurrent use. A version 3 index is read
// lazily, block by block (validate.go): a bit per block says that its bytes are read and their
// CRC32C held, another that the rules of its entries or extent-order positions held. The bits are
// atomics and take no lock. The 64 mutexes of blocks.mu, striped by block number, serialise
// reading a block: the first touch of a block (an answer needing an entry, a name, a lookup-table
// slot or an extent-order position in it) takes its stripe's mutex and, holding it, reads the
// block from the index file (for an Index from Load; one from Parse holds its bytes already) and
// checks its CRC32C; later touches see the bit and lock nothing. Nothing else is locked while a
// stripe's mutex is held, so the stripes are leaves in any lock order, but a caller holding a lock
// of its own may wait on the disk when it touches a block first. Rule checks run without a lock
// (two callers may check one block at once; both only read). A version 1 or 2 index is read and
// checked whole at load and locks nothing afterwards.
//
// Verify checks shards on opt.Jobs goroutines and calls report and opt.Progress one at a time,
// holding a mutex of the call (verify.go): they must not wait on each other.
package layout
