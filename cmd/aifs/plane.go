package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"go.uber.org/zap"

	"github.com/aifs/aifs/fs"
	"github.com/aifs/aifs/internal/memlimit"
	"github.com/aifs/aifs/kernel"
	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/layout/erofsmeta"
)

// The data planes of -o data (docs/kernel.md).
const (
	dataFUSE   = "fuse"   // aifs's FUSE server answers every request
	dataKernel = "kernel" // the kernel's EROFS serves the files; a FUSE mount beside it serves the control files
	dataAuto   = "auto"   // kernel where it can be, FUSE otherwise
)

// kernelRefusal returns why the set src cannot be served by the kernel plane with c's options
// in this process, or "" if it can as far as can be told before mounting. x's every index block
// is read and checked here (erofsmeta.Check): the image is written only from a checked index.
func (c *mountConfig) kernelRefusal(src *source) string {
	if src.s3 != nil {
		if why := c.fillRefusal(src); why != "" {
			return why
		}
	}
	switch {
	case c.verify:
		return "verify=on checks every sample as the daemon reads it, and on the kernel plane the daemon reads none"
	case c.kernelCache == fs.CacheOff:
		return "kernel_cache=off keeps samples out of the page cache, where the kernel plane serves them from"
	}
	if err := kernel.Available(); err != nil {
		return err.Error()
	}
	if _, err := erofsmeta.Check(src.x); err != nil {
		return err.Error()
	}
	return ""
}

// buildRoom is the most memory that building a kernel plane's image may take: half of what is
// available to this process (MemAvailable, or its memory cgroup's limit where lower), or 0 (no
// bound) where neither can be read.
func buildRoom() int64 {
	avail, _ := memlimit.MemInfo()
	if l := memlimit.CgroupLimit(); l > 0 && (avail == 0 || l < avail) {
		avail = l
	}
	return avail / 2
}

// kernelPlane is a live kernel plane: the EROFS mount at mnt (device dev) and the control
// mount's directory.
type kernelPlane struct {
	mnt, dev, ctl string
	plane         *kernel.Plane
	watcher       *kernel.Watcher // nil where reads are not observed (watchReads)
	reason        string
	fs            *fs.FS           // the control mount's, which takes the plane's observations
	fill          *s3Fill          // the copies' Filler, where the set is in S3; else nil
	end           *kernel.EndWatch // with fill: the plane's superblock's end, after which fill may close
}

// mountKernel builds (or finds) the EROFS image of src and mounts it at mnt: over its shard
// files, or for a set in S3 over their copies in the cache directory, filled on the reads'
// pre-content events (openFill). It returns an error wrapping kernel.ErrUnsupported where the
// kernel refused the mount for want of a feature.
func (c *mountConfig) mountKernel(ctx context.Context, log *zap.Logger, src *source, mnt string) (kp *kernelPlane, err error) {
	devices, imageDir := shardPaths(src), src.name
	var fill *s3Fill
	if src.s3 != nil {
		if fill, err = c.openFill(ctx, log, src, nil); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				fill.close()
			}
		}()
		devices, imageDir = fill.paths, fill.dir
	}
	image, bs, err := erofsmeta.Cached(src.x, imageDir, buildRoom())
	if err != nil {
		return nil, fmt.Errorf("kernel plane: %w", err)
	}
	if err := kernel.Mount(image, devices, mnt, true); err != nil { // after the Filler's marks: EROFS opens the copies now
		return nil, fmt.Errorf("kernel plane: %w", err)
	}
	if err := kernel.SetReadAhead(mnt, kernel.ReadAhead); err != nil {
		log.Warn("kernel plane: its read-ahead window stays the kernel's (samples over 128 KiB take more than one read)", zap.Error(err))
	}
	kp = &kernelPlane{mnt: mnt, fill: fill}
	if kp.dev, err = kernel.Dev(mnt); err == nil && fill != nil {
		kp.end, err = kernel.WatchEnd(mnt)
	}
	if err == nil {
		if kp.ctl, err = kernel.MakeControlDir(kp.dev); err == nil {
			log.Debug("kernel plane mounted", zap.String("image", image), zap.Int("block_size", bs), zap.String("control", kp.ctl))
			kp.plane = kernel.NewPlane(mnt, src.x, devices)
			return kp, nil
		}
	}
	if kp.end != nil {
		kp.end.Close()
	}
	kernel.Unmount(mnt)
	return nil, fmt.Errorf("kernel plane: %w", err)
}

// shardPaths returns the paths of src's shard files, in the index's order: the kernel plane's
// devices.
func shardPaths(src *source) []string {
	paths := make([]string, len(src.x.Shards()))
	for i, s := range src.x.Shards() {
		paths[i] = layout.ShardPath(src.name, s)
	}
	return paths
}

// choosePlane mounts the kernel plane at mnt when -o data asks for it and it can be, and
// returns it (nil: the FUSE plane) and the reason for the choice, for the mount's first line and
// the stats. data=kernel fails where the kernel plane cannot be; auto falls back to FUSE.
func (c *mountConfig) choosePlane(ctx context.Context, log *zap.Logger, src *source, mnt string, h *handover) (*kernelPlane, string, error) {
	if h != nil {
		return c.adoptKernel(ctx, log, src, mnt, h)
	}
	if c.data == dataFUSE {
		return nil, "data=fuse", nil
	}
	why := c.kernelRefusal(src)
	var kp *kernelPlane
	if why == "" {
		var err error
		kp, err = c.mountKernel(ctx, log, src, mnt)
		switch {
		case err == nil && kp.fill != nil:
			kp.reason = "data=" + c.data + ": EROFS over local copies of the shards in S3, filled on first read (fanotify pre-content events, Linux 6.14+; root, aligned samples, a keeper)"
			return kp, kp.reason, nil
		case err == nil:
			kp.reason = "data=" + c.data + ": EROFS over the local shards, mounted from files (root, aligned samples)"
			return kp, kp.reason, nil
		case c.data == dataKernel || !errors.Is(err, kernel.ErrUnsupported) && !errors.As(err, new(*erofsmeta.NotServable)) && !errors.Is(err, errCopiesInUse):
			return nil, "", err
		}
		why = err.Error()
	}
	if c.data == dataKernel {
		return nil, "", fmt.Errorf("-o data=kernel: %s", why)
	}
	return nil, "data=auto: FUSE, since " + why, nil
}

// adoptKernel takes over the planes of a live mount from a daemon that served it before (a
// keeper's restart or upgrade): with plane dataKernel, the EROFS mount at mnt and its control
// directory, and for a set in S3 the Filler of its copies, whose group and descriptors the keeper
// held (h.fill); with dataFUSE, nothing (nil).
func (c *mountConfig) adoptKernel(ctx context.Context, log *zap.Logger, src *source, mnt string, h *handover) (*kernelPlane, string, error) {
	const why = "taken over from an earlier daemon, with no remount"
	if h.plane != dataKernel {
		return nil, "data=fuse: " + why, nil
	}
	dev, err := kernel.Dev(mnt)
	if err != nil {
		return nil, "", fmt.Errorf("kernel plane: taking over %s: %w", mnt, err)
	}
	kp := &kernelPlane{mnt: mnt, dev: dev, ctl: kernel.ControlDir(dev), reason: "kernel: " + why}
	devices := shardPaths(src)
	if src.s3 != nil {
		if h.fill == nil {
			return nil, "", fmt.Errorf("kernel plane: taking over %s: the keeper holds no Filler of its copies", mnt)
		}
		if kp.fill, err = c.openFill(ctx, log, src, h); err != nil {
			return nil, "", err
		}
		if kp.end, err = kernel.WatchEnd(mnt); err != nil {
			kp.fill.close()
			return nil, "", fmt.Errorf("kernel plane: taking over %s: %w", mnt, err)
		}
		devices = kp.fill.paths
	}
	kp.plane = kernel.NewPlane(mnt, src.x, devices)
	log.Debug("kernel plane taken over", zap.String("control", kp.ctl))
	return kp, kp.reason, nil
}

// unmount ends the kernel plane: the EROFS mount (detached if files are open in it: their
// readers go on reading, the kernel serves them) and then the control mount's directory.
func (kp *kernelPlane) unmount() error {
	err := kernel.Unmount(kp.mnt)
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	return err
}

// watchReads sets up the watch of the plane's reads (kernel.Plane.Watch), before the mount is
// reported live, so that no read after that goes untold. Where it fails, reads are not observed
// (no read-ahead by plan, no drops), with a warning.
func (kp *kernelPlane) watchReads(log *zap.Logger) {
	w, err := kp.plane.Watch()
	if err != nil {
		log.Warn("kernel plane: reads are not observed (no read-ahead by plan, no drops)", zap.Error(err))
		return
	}
	kp.watcher = w
}

// serve runs the kernel plane until ctx ends (SIGINT, SIGTERM: the plane is unmounted, or
// detached if files are open in it, and then the control mount) or a user unmounts the plane
// (the control mount then ends) or the control mount (srv ends: done closes; the plane is then
// unmounted by the cleanup). Meanwhile fanotify's reads are told to the control mount's Loader
// (kernel.Watcher.Run).
func (kp *kernelPlane) serve(ctx context.Context, log *zap.Logger, srv *fs.Server, done <-chan struct{}) int {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if kp.fill != nil {
		fillCtx, stopFill := context.WithCancel(context.Background()) // not ctx: it outlives a signal (endFill)
		defer kp.endFill(log, stopFill)
		go kp.fill.persist(fillCtx, log)
		go func() {
			if err := kp.fill.filler.Run(fillCtx); err != nil {
				log.Error("kernel plane: the filler stopped; reads of what is not filled yet wait for a new daemon", zap.Error(err))
			}
		}()
	}
	if kp.watcher != nil {
		go func() {
			if err := kp.watcher.Run(ctx, kp.fs.Seen); err != nil {
				log.Warn("kernel plane: reads are no longer observed (no read-ahead by plan, no drops)", zap.Error(err))
			}
		}()
	}
	gone := make(chan struct{})
	go func() {
		if err := kernel.WaitGone(ctx.Done(), kp.mnt, kp.dev); err != nil {
			log.Warn("kernel plane: cannot watch for its umount, which will not end the daemon", zap.Error(err))
			return
		}
		close(gone)
	}()
	select {
	case <-done:
		log.Info("control mount unmounted; unmounting the kernel plane", zap.String("control", kp.ctl))
		return exitOK
	case <-gone:
		log.Info("kernel plane unmounted", zap.String("mountpoint", kp.mnt))
	case <-ctx.Done():
		log.Info("signal: unmounting the kernel plane", zap.String("mountpoint", kp.mnt))
		if err := kp.unmount(); err != nil {
			log.Error("unmount failed", zap.Error(err))
		}
	}
	if err := srv.Unmount(); err != nil {
		log.Warn("control mount busy; detaching it", zap.Error(err))
		if err := lazyUnmount(kp.ctl); err != nil && !errors.Is(err, errNotMounted) {
			log.Error("unmount of the control mount failed", zap.Error(err))
			return exitFailure
		}
	}
	<-done
	log.Info("unmounted", zap.String("mountpoint", kp.mnt))
	return exitOK
}

// endFill waits, where the plane's files are still open (a detached plane), until its
// superblock has ended before it stops the Filler: reads of holes after that would get zeros.
func (kp *kernelPlane) endFill(log *zap.Logger, stop context.CancelFunc) {
	defer stop()
	if kp.end == nil {
		return
	}
	if !kp.end.Ended() {
		log.Info("kernel plane: files are open in the detached plane; filling their reads until they are closed")
		kp.end.Wait()
	}
	kp.end.Close()
}
