package main

import (
	"context"
	"errors"
	"fmt"
	"os"
)

const mountHelp = `
Mounts the shard set in directory SRC (or at s3://BUCKET/PREFIX) read-only at MOUNTPOINT, an
empty directory, presenting it as the original tree of files. By default aifs starts a daemon and returns once the mount is
live (or exits non-zero with the reason); -f keeps it in the foreground. The mount ends with
'umount MOUNTPOINT' or 'fusermount3 -u MOUNTPOINT', or SIGINT/SIGTERM to the daemon.

The same mount from mount(8) or /etc/fstab (after scripts/install.sh):
  mount -t fuse.aifs SRC MOUNTPOINT -o allow_other
  SRC  MOUNTPOINT  fuse.aifs  ro,nofail,allow_other  0 0

Mount options (-o, comma-separated, repeatable):
  data=fuse|kernel|auto     which path serves the files' bytes (docs/kernel.md). fuse
                            (default): aifs's FUSE server. kernel: the kernel's EROFS over the
                            same shards, with no daemon on the read path (aifs still reads
                            ahead by plan, keeps and drops); needs root, a kernel with EROFS
                            mounted from files (Linux 6.12+), local shards whose samples start
                            on 512-byte boundaries (aifs pack since --align, aifs index), and
                            neither verify=on nor kernel_cache=off; the control files are then
                            at /run/aifs/MAJOR:MINOR/.aifs (aifs stats, aifs plan and
                            aifs_plan find them). auto: kernel where it can be, else fuse; the
                            mount's first line says which and why
  kernel_cache=on|off       on (default): sample pages stay in the kernel page cache, so warm
                            epochs are served by the kernel, at 2 FUSE requests per sample;
                            off: every read reaches aifs and nothing is cached in the kernel,
                            at 5 requests per sample (on was faster in every case measured,
                            even with a memory limit of 1/8 of the dataset: docs/bench)
  page_cache=SIZE|auto      with kernel_cache=on: the bytes of sample pages aifs lets the
                            kernel's page cache keep. When the dataset fits, nothing is
                            dropped; otherwise the page cache keeps a stable subset (the same
                            samples every epoch) and aifs drops the other samples soon after
                            their read. auto (default): the least of MemAvailable and the
                            memory cgroup limits of the daemon and of its readers, less what
                            they use besides the page cache and some headroom, read again
                            every second (docs/prefetch.md)
  chunk_reads=on|off        on (default): with kernel_cache=on and no cache_dir, while READs
                            miss at 1,000 a second or more, reads in the background the
                            samples this epoch has not read that the page cache will keep
                            (those after a cold miss first, then the shards in order, up to
                            1 MiB a read, 4 MiB from S3, 16 MiB in flight, never a byte
                            twice) and puts them
                            there, so a cold epoch reads the shards in large reads (readers
                            that decode slower wait on no read)
  mem_cache=SIZE            memory for samples read ahead and, with kernel_cache=off, a stable
                            subset of the samples read (K, M, G, T suffixes; default 1G, or in
                            a memory cgroup 1/8 of its limit, 1/2 with kernel_cache=off, if less)
  verify=on|off             on: check each sample's CRC32C (from the index) when it is read;
                            a corrupt sample gets EIO and is logged once with its path and
                            shard offset (default off: 'aifs verify' finds corruption)
  push_chunks=auto|on|off   with cache_dir and kernel_cache=on: when the disk cache fetches a
                            chunk from S3, the other samples in it go into the kernel's page
                            cache, so the epoch reads them with no request; auto (default): on
                            when the shard set is at most half the memory available at mount
  prefetch_shards=on|off    with cache_dir: on stages into the disk cache, in the
                            background, what the trainers' plans name (on a cluster, this
                            node's range: docs/multinode.md), and before any plan whole
                            shards on their first read (default off)
  cache_dir=DIR, cache_size=SIZE, s3_endpoint=URL, s3_region=R,
  s3_addressing=A, s3_timeout=D, s3_retries=N   the same as the flags below
  plans=on|off              on (default): take plans sent to MOUNTPOINT/.aifs/plan; off:
                            refuse them (EPERM), read ahead only from the reads seen
  restart=on|off            on (default; root only): the daemon runs under a keeper process
                            that holds the mount's FUSE connection; if the daemon dies
                            (kill -9, a crash, the OOM killer) the keeper starts another
                            within a second, which takes the mount over with no remount, and
                            the kernel gives it the requests the dead one was serving (Linux
                            6.9+), so readers see a pause, not an error; 'aifs upgrade
                            MOUNTPOINT' replaces the daemon with the binary on disk the same
                            way (docs/reliability.md); a keeper killed ends its daemon as
                            SIGTERM does. off: one process; if it dies, the mount answers
                            ENOTCONN until it is mounted again (the kernel plane over S3
                            needs on)
  allow_other               let all users read the mount, as the files' modes allow
                            (non-root mounters need user_allow_other in /etc/fuse.conf);
                            without it only the mounting user can, not even root
  log_level=L, log_file=F, metrics_addr=A   the same as the flags below
  Generic options (ro, rw, defaults, nofail, _netdev, noatime, x-..., ...) are accepted and
  ignored: the kernel mount is always read-only, so no open for writing, writable shared
  mapping or truncate succeeds, for any user, root included (EROFS); a daemon running as
  root undoes root's remount,rw at once (README: the window). -o remount is refused:
  unmount and mount again to change options. An unknown option is an error of one line.

The statistics of a live mount are in MOUNTPOINT/.aifs/stats (JSON; the directory is never
listed) and 'aifs stats MOUNTPOINT' prints them. MOUNTPOINT/.aifs/plan takes the coming order
of samples by ioctl (python/aifs_plan.py sends it from any torch Sampler, 'aifs plan' from a
file; docs/prefetch.md). MOUNTPOINT/.aifs/locations gives each file's shard, offset, length
and CRC32C in binary records by inode (fs/locations.go; python/aifs_plan.py's
DistributedSampler reads it: docs/multinode.md).

For a shard set in S3, --cache-dir keeps the shard ranges fetched on local disk (O_DIRECT) and
serves them from there afterwards, across unmounts and restarts; entries are keyed by each
shard's size, checksum and ETag, so a re-uploaded shard is never served from a stale cache.
The cache keeps a stable subset of the data when it cannot hold all of it (not LRU: the next
shuffled epoch then hits in proportion to its size), and two mounts may share one directory.
docs/s3.md has the details.` + s3Help

func runMount(ctx context.Context, args []string) int {
	c, flags, err := parseMount(args)
	var bad optionError
	if errors.As(err, &bad) {
		fmt.Fprintf(os.Stderr, "aifs mount: %v ('aifs mount --help' lists the options)\n", err)
		return exitUsage
	}
	if err != nil {
		return argsError(flags, err)
	}
	if os.Getenv(keeperEnv) != "" { // a daemon that a keeper started (keeper.go)
		h, err := handoverFromEnv()
		if err != nil {
			return fail("mount", err)
		}
		return c.serve(ctx, daemonReady(), h)
	}
	ready := daemonReady()
	if !c.foreground && ready == nil {
		return startDaemon(args)
	}
	if c.restart && os.Geteuid() == 0 {
		return c.keep(ctx, args, ready)
	}
	return c.serve(ctx, ready, nil)
}

// runMountHelper runs aifs as mount(8) runs /sbin/mount.fuse.aifs: SRC MOUNTPOINT [-sfnv]
// [-o options]. There -f means "fake" (do nothing) and the others are ignored. A usage error
// exits with mount(8)'s status for an incorrect invocation, 1.
func runMountHelper(ctx context.Context, args []string) int {
	var rest []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; a {
		case "-f":
			return exitOK
		case "-s", "-n", "-v":
		case "-t", "-N": // type and namespace take a value
			i++
		default:
			rest = append(rest, a)
		}
	}
	if code := runMount(ctx, rest); code != exitUsage {
		return code
	}
	return exitFailure
}
