// Package kernel is the kernel data plane (aifs mount -o data=kernel): the kernel's EROFS serves
// the shard set's files, with no daemon on the read path, while the prefetch.Loader keeps
// deciding what is read ahead, kept and dropped. A metadata-only EROFS image of the index
// (layout/erofsmeta) is mounted file-backed with one EROFS device per shard (Mount); its files
// are the shards' byte ranges, read by the kernel (with directio, O_DIRECT from the shards, and
// cached once, in the EROFS files' pages).
//
// The Loader's decisions are carried out on the mount's files (Plane): a read ahead is
// readahead(2) (WillNeed), a drop is POSIX_FADV_DONTNEED (Drop). What the Loader must observe,
// which samples were read and by whom, comes from fanotify: a FAN_CLOSE_NOWRITE event per file
// read, taken in batches by one goroutine (Watch), which never blocks a reader (notification
// events, not permission events).
//
// The control files (plans, stats, locations) cannot live in the EROFS tree: a .aifs directory
// there would be listed, and torchvision would take it for a class. They are served by a FUSE
// mount of the same set at ControlDir(dev), found from the data mount's device number
// (docs/kernel.md); clients look there when the mount root holds no .aifs.
//
// This package may import layout, plan and internal packages; it knows nothing of FUSE or of the
// Loader, which it is handed as functions.
package kernel
