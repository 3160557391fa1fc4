package fs

import (
	"encoding/binary"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/aifs/aifs/plan"
)

// planPiece builds the argument of one plan.Ioctl.
func planPiece(data string, flags uint32) []byte {
	arg := make([]byte, plan.ArgBytes)
	binary.LittleEndian.PutUint32(arg, uint32(len(data)))
	binary.LittleEndian.PutUint32(arg[4:], flags)
	copy(arg[8:], data)
	return arg
}

func ioctl(f *FS, ino uint64, pid uint32, cmd uint32, arg []byte) fuse.Status {
	in := &fuse.IoctlIn{InHeader: fuse.InHeader{NodeId: ino, Caller: fuse.Caller{Pid: pid}}, Cmd: cmd, InSize: uint32(len(arg))}
	return f.Ioctl(nil, in, arg, &fuse.IoctlOut{}, nil)
}

// TestPlanIoctl: a plan sent in pieces by plan.Ioctl reaches the loader (a piece flagged
// plan.FlagStart replaces the thread's plan, later ones append); a bad plan or a malformed piece is
// EINVAL, another command or file ENOTTY, and with NoPlans every piece is EPERM.
func TestPlanIoctl(t *testing.T) {
	f, s := newTestFS(t, Options{})
	sent := []struct {
		pid   uint32
		data  string
		flags uint32
		want  fuse.Status
	}{
		{7, "aifs-plan 1 paths\na.txt\n", plan.FlagStart, fuse.OK},
		{7, "nested/deeper/leaf.dat\n", 0, fuse.OK},              // appends: 2 samples
		{8, "aifs-plan 1 indices\n0\n", plan.FlagStart, fuse.OK}, // another thread's plan
		{8, "1\n", plan.FlagStart, fuse.EINVAL},                  // a new plan without a header
		{9, "aifs-plan 1 paths\nno/such/file\n", plan.FlagStart, fuse.EINVAL},
	}
	for _, p := range sent {
		if st := ioctl(f, ctlPlanIno, p.pid, plan.Ioctl, planPiece(p.data, p.flags)); st != p.want {
			t.Errorf("piece %q from %d: %v, want %v", p.data, p.pid, st, p.want)
		}
	}
	bad := planPiece("x", plan.FlagStart)
	binary.LittleEndian.PutUint32(bad, plan.PieceBytes+1)
	for name, arg := range map[string][]byte{
		"len over PieceBytes": bad,
		"unknown flag":        planPiece("aifs-plan 1 indices\n", 2),
		"short argument":      planPiece("", plan.FlagStart)[:8],
	} {
		if st := ioctl(f, ctlPlanIno, 10, plan.Ioctl, arg); st != fuse.EINVAL {
			t.Errorf("%s: %v, want EINVAL", name, st)
		}
	}
	if st := ioctl(f, ctlPlanIno, 10, syscall.TCGETS, nil); st != fuse.Status(syscall.ENOTTY) {
		t.Errorf("TCGETS on the plan file: %v, want ENOTTY", st)
	}
	if st := ioctl(f, s.inoOf(t, "a.txt"), 10, plan.Ioctl, planPiece("aifs-plan 1 indices\n0\n", plan.FlagStart)); st != fuse.Status(syscall.ENOTTY) {
		t.Errorf("plan.Ioctl on a sample: %v, want ENOTTY", st)
	}
	snap := f.Stats().Snapshot()
	samples := map[uint32]int{}
	for _, p := range snap.Plans {
		samples[p.Writer] = p.Samples
	}
	if samples[7] != 2 || snap.Prefetch.PlanErrors != 2 {
		t.Errorf("plans %+v, plan errors %d; want 2 samples from writer 7 and 2 errors", snap.Plans, snap.Prefetch.PlanErrors)
	}
	if got := snap.Ops["plan"]; got.Count != 8 || got.Errors != 5 {
		t.Errorf("plan stats %+v, want 8 requests, 5 errors", got)
	}

	f, _ = newTestFS(t, Options{NoPlans: true})
	if st := ioctl(f, ctlPlanIno, 7, plan.Ioctl, planPiece("aifs-plan 1 indices\n0\n", plan.FlagStart)); st != fuse.EPERM {
		t.Errorf("NoPlans: %v, want EPERM", st)
	}
	if plans := f.Stats().Snapshot().Plans; len(plans) != 0 {
		t.Errorf("NoPlans: plans %+v, want none", plans)
	}
}
