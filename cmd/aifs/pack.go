package main

import (
	"context"
	"fmt"
	"os"

	"go.uber.org/zap"

	"github.com/aifs/aifs/backend/s3"
	"github.com/aifs/aifs/internal/human"
	"github.com/aifs/aifs/layout/pack"
)

func runPack(ctx context.Context, args []string) int {
	fs := newFlags("pack", "[flags] SRC DST", `
Packs the directory tree SRC into a new shard set in directory DST (created if missing; it must
otherwise be empty), or uploads it to s3://BUCKET/PREFIX: shards are uploaded as they are
written (multipart, in parallel) and the index last, so a half-uploaded set is never valid.
With --force an existing set there is invalidated (its index deleted) when the upload starts. Samples are stored in sorted path order in shards of about --shard-size
bytes, each starting on a multiple of --align bytes (zeros pad the space before it), with an
index holding the tree, every file's size, mode, mtime and CRC32C. The same input always gives
byte-identical output. A set aligned to 512 bytes or more can be served by the kernel's EROFS;
4096 is what EROFS's directio needs over a disk of 4 KiB sectors, and costs about 2% of space
for samples of ~110 KB (sets of small files may prefer 512).

Symlinks to files and directories inside SRC are followed (a symlink back to an ancestor is
skipped); a symlink out of SRC stops the pack, naming it, unless --follow-external-symlinks;
sockets, FIFOs, devices and dangling symlinks are skipped with a warning. An unreadable file, a
file that changes size while being packed, or a name that cannot be stored stops the pack with an
error naming the path. The index is written last and atomically: an interrupted or failed pack
leaves nothing that aifs accepts as a shard set, and removes its temporary files when it can.`+s3Help)
	shardSize := sizeFlag(1 << 30)
	fs.Var(&shardSize, "shard-size", "target shard size (K, M, G, T suffixes are powers of 1024)")
	align := fs.Int64("align", pack.DefaultAlign, "boundary in bytes each sample starts on in its shard: a power of two (512 or more for the kernel's EROFS), or 0 or 1 to pack samples end to end")
	jobs := fs.Int("jobs", 16, "source files read in parallel")
	force := fs.Bool("force", false, "replace a shard set (or an interrupted pack's leftovers) already at DST; other files there are never touched")
	quiet := fs.Bool("quiet", false, "print no progress bar and no summary")
	external := fs.Bool("follow-external-symlinks", false, "follow symlinks that lead out of SRC and pack what they point to")
	var s3c s3Config
	s3c.register(fs)
	pos, code, ok := parseArgs(fs, args, 2, 2)
	if !ok {
		return code
	}
	if *jobs < 1 {
		return usageError(fs, "--jobs must be at least 1")
	}
	if *align == 0 {
		*align = 1 // packed tight, as pack.Options takes it
	}
	if *align < 0 || *align&(*align-1) != 0 {
		return usageError(fs, "--align must be a power of two, or 0")
	}
	opt := pack.Options{
		ShardSize:      int64(shardSize),
		Align:          *align,
		Jobs:           *jobs,
		Force:          *force,
		FollowExternal: *external,
		Warn:           func(msg string) { fmt.Fprintf(os.Stderr, "aifs pack: warning: %s\n", human.Name(msg)) },
	}
	var bar *progressBar
	if !*quiet && isTerminal(os.Stderr) {
		bar = newProgressBar(os.Stderr)
		opt.Progress = func(p pack.Progress) {
			bar.update(p.Bytes, p.TotalBytes, fmt.Sprintf("%d/%d files", p.Files, p.TotalFiles))
		}
	}
	res, err := packSet(ctx, pos[0], pos[1], &s3c, opt)
	if bar != nil {
		bar.clear()
	}
	if err != nil {
		return fail("pack", err)
	}
	if !*quiet {
		secs := res.Duration.Seconds()
		fmt.Printf("packed %d files (%d directories), %s into %d shards in %.2f s (%s/s)\n",
			res.Files, res.Dirs, human.Bytes(res.Bytes), res.Shards, secs, human.Bytes(int64(float64(res.Bytes)/max(secs, 1e-9))))
	}
	return exitOK
}

// packSet packs src into the directory or s3:// URL dst.
func packSet(ctx context.Context, src, dst string, s3c *s3Config, opt pack.Options) (pack.Result, error) {
	if !s3.IsURL(dst) {
		return pack.Pack(ctx, src, dst, opt)
	}
	be, err := openS3(ctx, dst, s3c, zap.NewNop())
	if err != nil {
		return pack.Result{}, err
	}
	defer be.Close()
	sink, err := be.NewSink(ctx, opt.Force)
	if err != nil {
		return pack.Result{}, err
	}
	return pack.PackTo(ctx, src, sink, opt)
}
