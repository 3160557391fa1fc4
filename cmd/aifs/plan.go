package main

import (
	"context"
	"io"
	"os"

	"github.com/aifs/aifs/plan"
)

func runPlan(ctx context.Context, args []string) int {
	flags := newFlags("plan", "MOUNTPOINT [FILE]", `
Sends a plan, the order in which the samples of the coming epoch will be read, to the aifs
mount at MOUNTPOINT (its root), from FILE or, without FILE or with '-', from standard input.
The mount then reads ahead in that order. A plan is a header line and one sample per line:

  aifs-plan 1 paths     then paths relative to the mount root
  aifs-plan 1 indices   then decimal indices: i is the i-th regular file in pack order

It replaces the plan this command sent before. The kernel mount is read-only, so a plan
cannot be written to MOUNTPOINT/.aifs/plan; it is sent by ioctl on that file
(python/aifs_plan.py does the same for a PyTorch DataLoader; docs/plan.md). Exit status
1 if the mount refuses the plan (a bad line: the samples before it stay planned) or the
mount takes no plans (-o plans=off).`)
	pos, code, ok := parseArgs(flags, args, 1, 2)
	if !ok {
		return code
	}
	var r io.Reader = os.Stdin
	if len(pos) == 2 && pos[1] != "-" {
		f, err := os.Open(pos[1])
		if err != nil {
			return fail("plan", err)
		}
		defer f.Close()
		r = f
	}
	if err := plan.Send(pos[0], r); err != nil {
		return fail("plan", err)
	}
	return exitOK
}
