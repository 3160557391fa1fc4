package fs

import (
	"encoding/binary"

	"github.com/hanwen/go-fuse/v2/fuse"
	"go.uber.org/zap"

	"github.com/aifs/aifs/plan"
)

// The daemon's end of the plan protocol (docs/plan.md, package plan): the plan file,
// .aifs/plan, takes a plan in pieces, one plan.Ioctl each, and hands them to the Loader, which
// parses and plans them.

// ioctlPlan takes one piece of a plan from the writing thread writer.
func (c *control) ioctlPlan(writer uint32, arg []byte) fuse.Status {
	if c.f.opt.NoPlans {
		return fuse.EPERM
	}
	if len(arg) < plan.ArgBytes {
		return fuse.EINVAL
	}
	n, flags := binary.LittleEndian.Uint32(arg), binary.LittleEndian.Uint32(arg[4:])
	if n > plan.PieceBytes || flags&^plan.FlagStart != 0 {
		return fuse.EINVAL
	}
	if err := c.f.loader.WritePlan(writer, flags&plan.FlagStart != 0, arg[8:8+n]); err != nil {
		c.f.log.Warn("plan refused", zap.Uint32("pid", writer), zap.Error(err))
		return fuse.EINVAL
	}
	return fuse.OK
}
