//go:build integration

package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	aifsfs "github.com/aifs/aifs/fs"
	"github.com/aifs/aifs/internal/mountinfo"
	"github.com/aifs/aifs/plan"
)

// The kernel data plane (aifs mount -o data=kernel, docs/kernel.md): the kernel's EROFS serves
// the shards, a FUSE mount at /run/aifs/MAJOR:MINOR serves the control files. These tests need
// root and EROFS with file-backed mounts (Linux 6.12+): CI has both.

// needKernelPlane fails where the kernel plane cannot be mounted: CI has root and EROFS.
func needKernelPlane(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the kernel plane tests need root (they mount EROFS)")
	}
	b, _ := os.ReadFile("/proc/filesystems")
	if !strings.Contains(string(b), "erofs") {
		exec.Command("modprobe", "erofs").Run()
		b, _ = os.ReadFile("/proc/filesystems")
	}
	if !strings.Contains(string(b), "erofs") {
		t.Fatal("the running kernel has no EROFS")
	}
}

// mountKernel mounts set at a new directory with -o data=kernel (and args) and returns the
// mountpoint; cleanup unmounts the plane and checks that the daemon ended and left nothing
// behind (the control mount and its directory). A failed test shows the daemon's log.
func mountKernel(t *testing.T, set string, args ...string) string {
	t.Helper()
	mnt := filepath.Join(t.TempDir(), "kmnt")
	mkdir(t, mnt)
	logFile := daemonLog(t)
	mustAifs(t, append([]string{"mount", "--log-file", logFile, "-o", "data=kernel", set, mnt}, args...)...)
	pid := daemonPID(t, mnt)
	ctl := controlOf(t, mnt)
	m, _ := mountinfo.At(ctl)
	t.Cleanup(func() {
		unmount(t, mnt, pid)
		// By its mount ID: another plane may have the device number, and its control directory,
		// by now (another test binary's).
		if now, ok := mountinfo.At(ctl); ok && now.ID == m.ID {
			t.Errorf("the control mount %s is still mounted after the plane's daemon ended", ctl)
			syscall.Unmount(ctl, syscall.MNT_DETACH)
		}
	})
	return mnt
}

// kernelUmount unmounts the kernel plane at mnt with umount(8), as a user would, trying again
// for a second while it is busy: the daemon holds a file of the plane open for a few
// microseconds at a time (a read's fanotify event, a read ahead, a drop: docs/kernel.md).
func kernelUmount(t testing.TB, mnt string) {
	t.Helper()
	var out []byte
	var err error
	for end := time.Now().Add(time.Second); ; time.Sleep(20 * time.Millisecond) {
		if out, err = exec.Command("umount", mnt).CombinedOutput(); err == nil || !strings.Contains(string(out), "busy") || time.Now().After(end) {
			break
		}
	}
	if err != nil {
		t.Errorf("umount %s: %v: %s", mnt, err, out)
	}
}

// controlOf returns the control mount of the kernel plane at mnt, checking that mnt is one.
func controlOf(t *testing.T, mnt string) string {
	t.Helper()
	m, ok := mountinfo.At(mnt)
	if !ok || m.FSType != "erofs" {
		t.Fatalf("%s is not an EROFS mount: %+v", mnt, m)
	}
	ctl := filepath.Dir(plan.Control(mnt))
	if ctl != filepath.Join(plan.KernelControlRoot, m.Dev) || !isMounted(ctl) {
		t.Fatalf("the control mount of %s is %s (mounted: %v), want %s", mnt, ctl, isMounted(ctl), filepath.Join(plan.KernelControlRoot, m.Dev))
	}
	return ctl
}

// TestKernelPlaneTree: the kernel plane shows the edge-case tree as the source has it, and as
// the FUSE plane shows it, byte for byte; no .aifs in it; the control files work through
// plan.Control (aifs stats names the plane).
func TestKernelPlaneTree(t *testing.T) {
	needKernelPlane(t)
	src := edgeTree(t)
	set := filepath.Join(t.TempDir(), "set")
	mustAifs(t, "pack", "--quiet", src, set)
	kmnt := mountKernel(t, set)
	fmnt := mountSet(t, set)

	want := sourceEntries(t, src, true)
	compareEntries(t, "kernel plane", want, sourceEntries(t, kmnt, true))
	compareEntries(t, "kernel plane against the FUSE plane", sourceEntries(t, fmnt, true), sourceEntries(t, kmnt, true))
	if g, w := names(t, kmnt), names(t, fmnt); !slices.Equal(g, w) {
		t.Errorf("root listing: kernel plane %q, FUSE plane %q", g, w)
	}
	if _, err := os.Lstat(filepath.Join(kmnt, ".aifs")); err == nil {
		t.Errorf("the kernel plane's tree has a .aifs")
	}
	r := mustAifs(t, "stats", kmnt)
	if !strings.Contains(r.stdout, "data plane    kernel") {
		t.Errorf("aifs stats of the kernel plane does not name it:\n%s", r.stdout)
	}
	s := readStats(t, filepath.Dir(plan.Control(kmnt)))
	if s.DataPlane.Plane != "kernel" || s.DataPlane.Mountpoint != kmnt || s.Files != uint64(countFiles(want)) {
		t.Errorf("stats: data plane %+v, files %d; want kernel at %s, %d files", s.DataPlane, s.Files, kmnt, countFiles(want))
	}
	// EROFS is read-only in the kernel: root's remount,rw leaves its superblock read-only (the
	// kernel takes the remount and keeps SB_RDONLY), and no file opens for writing (issue 52's
	// item 2).
	exec.Command("mount", "-o", "remount,rw", kmnt).Run()
	if opts := superOptions(t, kmnt); len(opts) == 0 || opts[0] != "ro" {
		t.Errorf("the kernel plane's superblock after mount -o remount,rw: %v, want ro", opts)
	}
	if _, err := os.OpenFile(filepath.Join(kmnt, "a", "one"), os.O_RDWR, 0); !errors.Is(err, syscall.EROFS) {
		t.Errorf("open O_RDWR on the kernel plane after mount -o remount,rw: %v, want EROFS", err)
	}
}

// TestKernelPlaneTar: a tar set (aifs index, 512-byte aligned members) through the kernel plane
// reads as through the FUSE plane.
func TestKernelPlaneTar(t *testing.T) {
	needKernelPlane(t)
	src := edgeTree(t)
	dir := t.TempDir()
	tarPath := filepath.Join(dir, "edge.tar")
	run(t, "tar", "--format=gnu", "--sort=name", "--exclude", "./big", "-cf", tarPath, "-C", src, ".")
	set := filepath.Join(dir, "index")
	mustAifs(t, "index", "--quiet", tarPath, set)
	kmnt := mountKernel(t, set)
	fmnt := mountSet(t, set)
	compareEntries(t, "tar set, kernel plane against the FUSE plane", sourceEntries(t, fmnt, true), sourceEntries(t, kmnt, true))
}

// TestKernelPlaneRefusals: where the kernel plane cannot serve a set, data=kernel fails with the
// reason and data=auto mounts the FUSE plane and says why (first line, stats).
func TestKernelPlaneRefusals(t *testing.T) {
	needKernelPlane(t)
	src := t.TempDir()
	for i := range 20 {
		writeFile(t, filepath.Join(src, "c", fmt.Sprintf("s-%02d.bin", i)), randomBytes(uint64(i)+7, 1000+i))
	}
	tight := filepath.Join(t.TempDir(), "tight")
	mustAifs(t, "pack", "--quiet", "--align", "0", src, tight)
	mnt := filepath.Join(t.TempDir(), "mnt")
	mkdir(t, mnt)
	r := aifs(t, "mount", "-o", "data=kernel", tight, mnt)
	if r.code == 0 || !strings.Contains(r.stderr, "align") {
		t.Errorf("data=kernel of a set packed end to end: want a refusal naming the alignment, got %s", r)
	}
	if isMounted(mnt) {
		t.Fatalf("%s is mounted after a refused mount", mnt)
	}
	aligned := filepath.Join(t.TempDir(), "aligned")
	mustAifs(t, "pack", "--quiet", src, aligned)
	for _, c := range []struct {
		set, opts, why string
	}{
		{tight, "data=auto", "align"},
		{aligned, "data=auto,verify=on", "verify=on"},
		{aligned, "data=auto,kernel_cache=off", "kernel_cache=off"},
		{aligned, "data=fuse", "data=fuse"},
	} {
		r := mustAifs(t, "mount", "-o", c.opts, c.set, mnt)
		pid := daemonPID(t, mnt)
		s := readStats(t, mnt)
		if s.DataPlane.Plane != "fuse" || !strings.Contains(s.DataPlane.Reason, c.why) {
			t.Errorf("-o %s: data plane %+v, want fuse because of %q", c.opts, s.DataPlane, c.why)
		}
		if c.opts != "data=fuse" && !strings.Contains(r.stderr, "data plane: fuse") {
			t.Errorf("-o %s: the mount did not say which plane and why: %s", c.opts, r)
		}
		unmount(t, mnt, pid)
	}
}

// TestKernelPlaneLifecycle: umount, SIGTERM and SIGINT each end the daemon and leave nothing
// mounted; after kill -9 of the daemon, 8 readers of the plane go on reading right bytes (the
// kernel serves them), and a new mount takes the mountpoint back.
func TestKernelPlaneLifecycle(t *testing.T) {
	needKernelPlane(t)
	src := t.TempDir()
	const n = 64
	for i := range n {
		writeFile(t, filepath.Join(src, fmt.Sprintf("c%d", i%4), fmt.Sprintf("s-%02d.bin", i)), randomBytes(uint64(i)+100, 5000+97*i))
	}
	set := filepath.Join(t.TempDir(), "set")
	mustAifs(t, "pack", "--quiet", "--shard-size", "64K", src, set)
	mnt := filepath.Join(t.TempDir(), "kmnt")
	mkdir(t, mnt)
	read := func(i int) error {
		p := fmt.Sprintf("c%d/s-%02d.bin", i%4, i)
		b, err := os.ReadFile(filepath.Join(mnt, p))
		if err != nil {
			return err
		}
		if !bytes.Equal(b, randomBytes(uint64(i)+100, 5000+97*i)) {
			return fmt.Errorf("%s: wrong bytes", p)
		}
		return nil
	}
	for how, end := range map[string]func(pid int) error{
		"umount":  func(int) error { kernelUmount(t, mnt); return nil },
		"SIGTERM": func(pid int) error { return syscall.Kill(pid, syscall.SIGTERM) },
		"SIGINT":  func(pid int) error { return syscall.Kill(pid, syscall.SIGINT) },
	} {
		mustAifs(t, "mount", "-o", "data=kernel", set, mnt)
		pid := daemonPID(t, mnt)
		ctl := controlOf(t, mnt)
		t.Cleanup(func() { unmount(t, mnt, pid) })
		if err := read(5); err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		if err := end(pid); err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		if !waitExit(pid, 10*time.Second) {
			t.Fatalf("%s: the daemon did not exit", how)
		}
		if isMounted(mnt) || isMounted(ctl) {
			t.Fatalf("%s: left mounted: plane %v, control %v", how, isMounted(mnt), isMounted(ctl))
		}
		if _, err := os.Stat(ctl); err == nil {
			t.Errorf("%s: the control directory %s is left", how, ctl)
		}
	}

	// umount of the plane while another mount of it lives (a bind mount here; a copy propagated
	// into another mount namespace elsewhere): the superblock outlives the umount, so inotify's
	// IN_UNMOUNT does not come, and the daemon must end from the mount table (kernel.WaitGone).
	mustAifs(t, "mount", "-o", "data=kernel", set, mnt)
	pid := daemonPID(t, mnt)
	ctl := controlOf(t, mnt)
	bind := bindMount(t, mnt)
	// Reads through the other mount reach the daemon too (its marks are on the file system).
	for i := range 16 {
		os.ReadFile(filepath.Join(bind, fmt.Sprintf("c%d", i%4), fmt.Sprintf("s-%02d.bin", i)))
	}
	for end := time.Now().Add(5 * time.Second); readStats(t, ctl).Epoch.Coverage < 16.0/n; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("16 files read through a bind mount of the plane: the daemon saw %.2f of the epoch, want %.2f", readStats(t, ctl).Epoch.Coverage, 16.0/n)
		}
	}
	kernelUmount(t, mnt)
	if !waitExit(pid, 10*time.Second) {
		t.Fatal("umount with a bind mount of the plane elsewhere: the daemon did not exit")
	}
	if isMounted(ctl) {
		t.Errorf("umount with a bind mount of the plane elsewhere: the control mount %s is left", ctl)
	}
	if b, err := os.ReadFile(filepath.Join(bind, "c1/s-05.bin")); err != nil || !bytes.Equal(b, randomBytes(105, 5000+97*5)) {
		t.Errorf("the bind mount after the daemon ended: %v (%d bytes)", err, len(b))
	}

	mustAifs(t, "mount", "-o", "data=kernel,restart=off", set, mnt) // one process, killed below
	pid = daemonPID(t, mnt)
	t.Cleanup(func() { unmount(t, mnt, 0) })
	var stop atomic.Bool
	var reads atomic.Int64
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for r := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := r; !stop.Load(); i = (i + 7) % n {
				if err := read(i); err != nil {
					errs <- err
					return
				}
				reads.Add(1)
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	syscall.Kill(pid, syscall.SIGKILL)
	if !waitExit(pid, 10*time.Second) {
		t.Fatal("the daemon survived SIGKILL")
	}
	before := reads.Load()
	time.Sleep(500 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a reader of the plane after kill -9 of its daemon: %v", err)
	}
	if reads.Load() <= before {
		t.Errorf("no reads after the daemon was killed (%d before, %d in all)", before, reads.Load())
	}
	r := mustAifs(t, "mount", "-o", "data=kernel", set, mnt)
	if !strings.Contains(r.stderr, "aifs daemon that died") {
		t.Errorf("a new mount over the plane of a killed daemon: want a notice, got %s", r)
	}
	controlOf(t, mnt)
	if err := read(9); err != nil {
		t.Errorf("read after the mountpoint was taken back: %v", err)
	}
	unmount(t, mnt, daemonPID(t, mnt))
	if isMounted(mnt) {
		t.Error("mounts are stacked on the mountpoint after the recovery")
	}
}

// TestKernelPlanePlan: a plan sent to the kernel plane (aifs plan, through the control mount)
// brings its samples into the page cache before their read (cachestat), and the plane's reads
// reach the daemon's Loader (fanotify: the plan's cursor moves).
func TestKernelPlanePlan(t *testing.T) {
	needKernelPlane(t)
	src := t.TempDir()
	const n = 200
	var paths []string
	for i := range n {
		p := fmt.Sprintf("c%d/s-%03d.bin", i%5, i)
		writeFile(t, filepath.Join(src, p), randomBytes(uint64(i)+300, 40000+i))
		paths = append(paths, p)
	}
	set := filepath.Join(t.TempDir(), "set")
	mustAifs(t, "pack", "--quiet", src, set)
	mnt := mountKernel(t, set)
	ctl := filepath.Dir(plan.Control(mnt))
	// A look at a file (residentPages) opens and closes it, which the daemon takes for its read,
	// and a plan skips samples read this epoch: the looks come once the daemon says it has read
	// the plan's samples ahead. Other test binaries of the suite drop the caches (drop_caches)
	// while this one runs: a plan whose samples are found missing after one did is tried again
	// with other samples.
	var planned []string
	for try := 0; ; try++ {
		planned = []string{paths[150+try], paths[3+try], paths[77+try], paths[120+try], paths[42+try]}
		exec.Command("sh", "-c", "sync; echo 3 > /proc/sys/vm/drop_caches").Run()
		drops := dropCount(t)
		before := readStats(t, ctl).Prefetch.Stored
		planFile := filepath.Join(t.TempDir(), "plan")
		writeFile(t, planFile, []byte(plan.HeaderPaths+"\n"+strings.Join(planned, "\n")+"\n"))
		mustAifs(t, "plan", mnt, planFile)
		for end := time.Now().Add(5 * time.Second); readStats(t, ctl).Prefetch.Stored < before+uint64(len(planned)); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("the daemon read %d of the plan's %d samples ahead in 5 s", readStats(t, ctl).Prefetch.Stored-before, len(planned))
			}
		}
		var missed []string
		for _, p := range planned {
			if residentPages(t, filepath.Join(mnt, p)) == 0 {
				missed = append(missed, p)
			}
		}
		if len(missed) == 0 {
			break
		}
		if dropCount(t) == drops || try == 2 {
			t.Fatalf("planned samples not in the page cache after the daemon read them ahead: %q", missed)
		}
	}
	if res := residentPages(t, filepath.Join(mnt, paths[100])); res != 0 {
		t.Errorf("%s, not planned, has %d pages in the page cache", paths[100], res)
	}
	for _, p := range planned {
		if _, err := os.ReadFile(filepath.Join(mnt, p)); err != nil {
			t.Fatal(err)
		}
	}
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		s := readStats(t, ctl)
		if n := len(s.Plans); n > 0 && s.Plans[n-1].Read == len(planned) { // the last plan sent
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the plan's cursor after its samples were read on the plane: %+v, want %d read", s.Plans, len(planned))
		}
	}
}

// dropCount returns how many times the page cache was dropped (drop_caches) since boot, from
// /proc/vmstat.
func dropCount(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/vmstat")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "drop_pagecache "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("/proc/vmstat: %q", line)
			}
			return n
		}
	}
	t.Fatal("/proc/vmstat has no drop_pagecache")
	return 0
}

// TestKernelPlaneTorchPlan: torchvision's ImageFolder through a shuffled DataLoader wrapped by
// aifs_plan.plan() reads the same decoded samples from the kernel plane as from the source; the
// plan reaches the daemon through the control mount, its cursor follows the plane's reads
// (fanotify) to the end, and samples were brought into the page cache ahead of their readers.
func TestKernelPlaneTorchPlan(t *testing.T) {
	needKernelPlane(t)
	src, set := jpegSet(t)
	mnt := mountKernel(t, set)
	out := torchCheck(t, "loader", src, mnt, "--workers", "2", "--plan")
	var res struct {
		Prefetch struct{ Stored int }
		Plans    []struct{ Writer, Samples, Read int }
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("check.py output: %v", err)
	}
	if len(res.Plans) != 1 || res.Plans[0].Samples != jpegFiles || res.Plans[0].Read < jpegFiles-16 {
		t.Errorf("plans %+v, want one plan of %d samples, read to its end", res.Plans, jpegFiles)
	}
	if res.Prefetch.Stored == 0 {
		t.Errorf("no sample was brought into the page cache ahead of its reader: %s", out)
	}
}

// bindMount bind-mounts the kernel plane at mnt at a new directory and returns it: another mount
// of the same superblock, as a container's volume is.
func bindMount(t *testing.T, mnt string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bind")
	mkdir(t, dir)
	if err := syscall.Mount(mnt, dir, "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount of the plane: %v", err)
	}
	// Cleanups run last first: this one before the plane's unmount, so that the plane's superblock
	// ends with it (a daemon also ends on an umount that leaves the superblock alive, up to a
	// second later: kernel.WaitGone).
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount of the bind mount %s: %v", dir, err)
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	return dir
}

// residentPages returns how many pages of file path are in the page cache (cachestat(2)).
func residentPages(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cs unix.Cachestat_t
	if err := unix.Cachestat(uint(f.Fd()), &unix.CachestatRange{}, &cs, 0); err != nil {
		t.Fatalf("cachestat %s: %v", path, err)
	}
	return int(cs.Cache)
}

// TestKernelPlaneQuiet: once the set is in the page cache and no plan is held, the daemon takes
// its fanotify marks off (the stats' quiet), and a cold read of the shards' disk wakes it; the
// reads give the source's bytes throughout.
func TestKernelPlaneQuiet(t *testing.T) {
	needKernelPlane(t)
	src, set := restartSet(t, 200)
	mnt := mountKernel(t, set)
	ctl := filepath.Dir(plan.Control(mnt))
	readAll := func() {
		t.Helper()
		// Another process: the daemon's own reads are not a reader's.
		out, err := exec.Command("diff", "-r", "-q", src, mnt).CombinedOutput()
		if err != nil {
			t.Fatalf("diff -r %s %s: %v\n%s", src, mnt, err, out)
		}
	}
	quiet := func() aifsfs.Snapshot {
		t.Helper()
		s := readStats(t, ctl)
		if s.Quiet == nil {
			t.Fatalf("the kernel plane's stats have no quiet: %+v", s)
		}
		return s
	}
	readAll()
	readAll()
	for end := time.Now().Add(10 * time.Second); quiet().Quiet.Quiets == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("not quiet 10 s after two epochs of a set that fits: %+v, page cache %+v", *quiet().Quiet, quiet().PageCache)
		}
	}
	wakes := quiet().Quiet.Wakes
	exec.Command("sh", "-c", "sync; echo 3 > /proc/sys/vm/drop_caches").Run()
	readAll()
	for end := time.Now().Add(5 * time.Second); quiet().Quiet.Wakes == wakes; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("a cold epoch did not wake the daemon: %+v", *quiet().Quiet)
		}
	}
}
