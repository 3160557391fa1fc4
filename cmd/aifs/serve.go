package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/aifs/aifs/backend/diskcache"
	"github.com/aifs/aifs/backend/local"
	"github.com/aifs/aifs/fs"
	"github.com/aifs/aifs/internal/memlimit"
	"github.com/aifs/aifs/internal/mountinfo"
	"github.com/aifs/aifs/prefetch"
	"go.uber.org/zap"
)

// serve mounts and serves until the file system is unmounted or ctx is cancelled (SIGINT,
// SIGTERM). If ready is not nil (a daemon), serve reports on it once the mount is live or the
// error that prevented it. With h (a keeper's daemon taking over: keeper.go) it mounts nothing
// and serves the mount of h's connection.
func (c *mountConfig) serve(ctx context.Context, ready *readyPipe, h *handover) int {
	report := func(err error) { ready.report(c.notices, err) }
	log, closeLog, err := c.logger(!c.foreground)
	if err != nil {
		report(err)
		return fail("mount", err)
	}
	defer closeLog()
	srv, cleanup, err := c.mount(ctx, log, h)
	if err == nil && h == nil {
		plane, fuseAt := dataFUSE, c.mountpoint
		var fill []int
		if c.plane != nil {
			plane, fuseAt = dataKernel, c.plane.ctl
			if c.plane.fill != nil {
				fan, copies := c.plane.fill.filler.FDs()
				fill = append([]int{fan}, copies...)
			}
		}
		if err = handUp(srv.Conn(), plane, fuseAt, fill); err != nil {
			srv.Unmount()
			cleanup()
		}
	}
	if err != nil {
		log.Error("mount failed", zap.Error(err))
		report(err)
		return fail("mount", err)
	}
	defer cleanup()
	mounted, _ := mountinfo.At(c.mountpoint) // its dev tells this mount from one made at the path later
	if h != nil {
		log.Info("took over the mount", zap.String("source", c.src), zap.String("mountpoint", c.mountpoint), zap.Uint64("restarts", h.restarts))
	} else {
		log.Info("mounted", zap.String("source", c.src), zap.String("mountpoint", c.mountpoint))
	}
	if local.NoIO {
		log.Warn("this is a no-I/O build (tag aifs_noio), for benchmarks only: local reads skip the device and serve stale bytes")
	}
	if !c.foreground {
		os.Chdir("/") // a daemon must not keep a file system busy through its working directory
	}
	if c.plane != nil {
		c.plane.watchReads(log)
	}
	report(nil)

	done := make(chan struct{})
	go func() { srv.Wait(); close(done) }()
	if kp := c.plane; kp != nil {
		return kp.serve(ctx, log, srv, done)
	}
	select {
	case <-done:
		log.Info("unmounted", zap.String("mountpoint", c.mountpoint))
		return exitOK
	case <-ctx.Done():
	}
	if err := c.unmount(log, srv, mounted.Dev); err != nil {
		log.Error("unmount failed", zap.Error(err))
		return exitFailure
	}
	<-done
	log.Info("unmounted", zap.String("mountpoint", c.mountpoint))
	return exitOK
}

// unmount ends the mount on a signal: it unmounts it, or if files are open detaches it, and
// the server then serves them until they are closed. A mount that someone else has detached
// already (fusermount3 -u -z, umount -l: a Kubernetes preStop hook, the next pod's init
// container) needs nothing more, and what has been mounted at the path since, if anything, is
// left alone: this daemon's mount is the one with device dev ("": unknown, taken as still
// there).
func (c *mountConfig) unmount(log *zap.Logger, srv *fs.Server, dev string) error {
	ours := func() bool {
		m, ok := mountinfo.At(c.mountpoint)
		return dev == "" || ok && m.Dev == dev
	}
	detached := func() error {
		log.Info("signal: the mount was detached already; the daemon ends when the last file open in it is closed",
			zap.String("mountpoint", c.mountpoint))
		return nil
	}
	if !ours() {
		return detached()
	}
	log.Info("signal: unmounting", zap.String("mountpoint", c.mountpoint))
	err := srv.Unmount()
	if err == nil {
		return nil
	}
	if !ours() {
		return detached()
	}
	log.Warn("mountpoint busy; detaching it, the daemon ends when the last open file is closed", zap.Error(err))
	if err := lazyUnmount(c.mountpoint); errors.Is(err, errNotMounted) {
		return detached()
	} else if err != nil {
		return fmt.Errorf("lazy unmount: %w", err)
	}
	return nil
}

// mount checks the mountpoint, loads and checks the shard set, opens its shards and mounts it.
// Everything that can fail is checked before the kernel sees the mount. cleanup closes what
// mount opened; call it after the server has stopped.
func (c *mountConfig) mount(ctx context.Context, log *zap.Logger, h *handover) (srv *fs.Server, cleanup func(), err error) {
	var closers []func() error // closed in reverse order by closeAll: by the caller, or here on an error
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	defer func() {
		if err != nil {
			closeAll()
		}
	}()
	var mnt, notice string
	if h == nil {
		mnt, notice, err = checkMountpoint(c.mountpoint)
	} else {
		// The mount is live, and waits for this daemon: nothing may touch it before it serves.
		mnt, err = filepath.Abs(c.mountpoint)
	}
	if err != nil {
		return nil, nil, err
	}
	if notice != "" {
		log.Warn(notice)
		c.notices = append(c.notices, notice)
	}
	c.mountpoint = mnt
	src, err := openSource(ctx, c.src, &c.s3, log)
	if err != nil {
		return nil, nil, err
	}
	be := src.be
	closers = append(closers, be.Close)
	if c.verify && !src.x.Checksums() {
		return nil, nil, fmt.Errorf("-o verify=on: %s has no checksums to verify against (it was indexed with --no-checksums); "+
			"mount it without verify=on, or index it again without --no-checksums", src.name)
	}
	storage := map[string]func() any{}
	if src.s3 != nil {
		storage["s3"] = func() any { return src.s3.Stats() }
	}
	kp, reason, err := c.choosePlane(ctx, log, src, mnt, h)
	if err != nil {
		return nil, nil, err
	}
	if kp != nil {
		closers = append(closers, func() error { return os.Remove(kp.ctl) })
		if kp.fill != nil { // closed after the plane's unmount
			closers = append(closers, kp.fill.close)
			storage["kernel_fill"] = func() any { return kp.fill.filler.Stats() }
		}
		closers = append(closers, kp.unmount)
	}
	var dc *diskcache.Cache
	if c.cacheDir != "" && (kp == nil || kp.fill == nil) { // the kernel plane over S3 keeps its own copies there
		if src.s3 == nil {
			return nil, nil, fmt.Errorf("--cache-dir is for shard sets in S3; %s is read directly from local disk", src.name)
		}
		size, err := diskCacheSize(log, c.cacheDir, c.cacheSize, 0)
		if err != nil {
			return nil, nil, err
		}
		opt := diskcache.Options{Dir: c.cacheDir, Size: size, Namespace: src.name,
			StageShards: c.prefetchShards, Logger: log.Named("diskcache")}
		dc, err = diskcache.New(be, opt)
		if err != nil {
			return nil, nil, fmt.Errorf("--cache-dir: %w", err)
		}
		closers[len(closers)-1] = dc.Close // closes the S3 backend too
		be = dc
		storage["disk_cache"] = func() any { return dc.Stats() }
	}
	memCache := c.memCacheFor(log, memlimit.CgroupLimit())
	setMemoryLimit(log, src.indexBytes, memCache)
	po := prefetch.Options{CacheBytes: memCache, Verify: c.verify,
		PageCache:  pageCacheBudget(c.pageCache, log.Named("page_cache")),
		ChunkReads: c.chunkReads && c.cacheDir == "",                               // with a disk cache, push_chunks pushes its chunks
		StagePlans: c.prefetchShards && (dc != nil || kp != nil && kp.fill != nil)} // the disk cache, or the copies, stage what plans name
	if kp != nil && kp.fill != nil && c.prefetchShards {
		be = kp.fill.staging(be, src.x)
	}
	if src.s3 != nil {
		po.ChunkBytes = diskcache.DefaultChunkSize // a GET costs a round trip: as large as the disk cache's chunks
	}
	plane, fuseAt := fs.DataPlane{Plane: dataFUSE, Reason: reason, Mountpoint: mnt}, mnt
	if kp != nil {
		po.WillNeed, po.Drop, po.Misses = kp.plane.WillNeed, kp.plane.Drop, kp.plane.Misses
		po.Quiet, po.StorageReads = kp.plane.Quiet, kp.plane.StorageReads
		plane.Plane, fuseAt = dataKernel, kp.ctl
	}
	log.Info("data plane", zap.String("plane", plane.Plane), zap.String("why", reason))
	if c.data != dataFUSE {
		c.notices = append(c.notices, fmt.Sprintf("data plane: %s (%s)", plane.Plane, reason))
	}
	var restarts uint64
	keeper := 0
	if h != nil {
		restarts = h.restarts
	}
	if os.Getenv(keeperEnv) != "" {
		keeper = os.Getppid()
	}
	f, err := fs.New(ctx, src.x, be, fs.Options{Logger: log.Named("fs"), KernelCache: c.kernelCache, Source: src.name, Mountpoint: mnt,
		Prefetch: po, Storage: storage, NoPlans: c.noPlans, DataPlane: plane, Restarts: restarts, KeeperPID: keeper})
	if err != nil {
		return nil, nil, err
	}
	closers = append(closers, f.Close)
	if kp != nil {
		kp.fs, c.plane = f, kp
	}
	if dc != nil && c.pushOn(log, src.x) {
		dc.OnArrived(f.Arrived) // the disk cache's chunks, as they come from S3, go on into the page cache (push_chunks)
	}
	if c.metricsAddr != "" {
		metrics, err := startMetrics(c.metricsAddr, func(w io.Writer) { f.Stats().WritePrometheus(w) })
		if err != nil {
			return nil, nil, err
		}
		closers = append(closers, metrics.Close) // closed before f: its handlers read f's stats
	}
	mo := fs.MountOptions{AllowOther: c.allowOther, FsName: src.name, DirectMount: os.Geteuid() == 0, Debug: c.debugFUSE,
		Handover: h == nil && os.Getenv(keeperEnv) != ""}
	if h != nil {
		mo.Conn = h.conn
	}
	s, err := fs.Mount(f, fuseAt, mo)
	if err != nil {
		return nil, nil, err
	}
	return s, closeAll, nil
}
