package main

import (
	"context"
	"fmt"
	"os"

	"go.uber.org/zap"

	"github.com/aifs/aifs/internal/human"
	"github.com/aifs/aifs/layout"
)

func runVerify(ctx context.Context, args []string) int {
	fs := newFlags("verify", "[flags] SRC", `
Checks the shard set in directory SRC (or at s3://BUCKET/PREFIX): loads and validates its index, re-reads every sample and
compares its checksum with the index (CRC32C; for a ZIP indexed in place, the CRC-32 of its
central directory), and checks each shard's size and checksum (a ZIP's size only). Prints one line per
corrupt or unreadable sample ("corrupt: PATH ...") and per bad shard, and exits with status 1 if
there are any, 0 if everything matches.`+s3Help)
	jobs := fs.Int("jobs", 4, "shards checked in parallel")
	quiet := fs.Bool("quiet", false, "print only problems, no progress bar and no summary")
	var s3c s3Config
	s3c.register(fs)
	pos, code, ok := parseArgs(fs, args, 1, 1)
	if !ok {
		return code
	}
	if *jobs < 1 {
		return usageError(fs, "--jobs must be at least 1")
	}
	src, err := openSource(ctx, pos[0], &s3c, zap.NewNop())
	if err != nil {
		return fail("verify", err)
	}
	defer src.be.Close()
	x := src.x
	opt := layout.VerifyOptions{Jobs: *jobs}
	if src.s3 != nil {
		// A local set is verified from its files as they are (a truncated shard still has the
		// samples before the cut); an object is read only if it matches the index's size and
		// ETag, so a replaced one is reported as a bad shard with all its samples.
		opt.Open = backendShards(src.be)
	}
	total := int64(x.ShardBytes())
	var bar *progressBar
	if !*quiet && isTerminal(os.Stderr) {
		bar = newProgressBar(os.Stderr)
		opt.Progress = func(n int64) { bar.update(n, total, "") }
	}
	res, err := layout.Verify(ctx, pos[0], x, opt, func(p layout.Problem) {
		if bar != nil {
			bar.clear()
		}
		if p.Path == "" {
			fmt.Printf("bad shard: %s: %s\n", p.Shard, p.Reason)
			return
		}
		fmt.Printf("corrupt: %s: %s (%s [%d,+%d))\n", human.Name(p.Path), p.Reason, p.Shard, p.Offset, p.Size)
	})
	if bar != nil {
		bar.clear()
	}
	if err != nil {
		return fail("verify", err)
	}
	if res.Problems > 0 {
		fmt.Fprintf(os.Stderr, "aifs verify: %d problems in %s\n", res.Problems, pos[0])
		return exitFailure
	}
	if !*quiet {
		fmt.Printf("ok: %d samples, %s in %d shards verified\n", res.Samples, human.Bytes(res.Bytes), len(x.Shards()))
	}
	return exitOK
}
