package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/aifs/aifs/backend/diskcache"
	"github.com/aifs/aifs/fs"
	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/prefetch"
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
  kernel_cache=on|off       on (default): sample pages stay in the kernel page cache, so warm
                            epochs are served by the kernel, at 2 FUSE requests per sample;
                            off: every read reaches aifs and nothing is cached in the kernel,
                            at 5 requests per sample (on was faster in every case measured,
                            even with a memory limit of 1/8 of the dataset: docs/bench)
  mem_cache=SIZE            memory for samples read ahead and, with kernel_cache=off, a stable
                            subset of the samples read (K, M, G, T suffixes; default 1G)
  verify=on|off             on: check each sample's CRC32C (from the index) when it is read;
                            a corrupt sample gets EIO and is logged once with its path and
                            shard offset (default off: 'aifs verify' finds corruption)
  push_chunks=auto|on|off   with cache_dir and kernel_cache=on: when the disk cache fetches a
                            chunk from S3, the other samples in it go into the kernel's page
                            cache, so the epoch reads them with no request; auto (default): on
                            when the shard set is at most half the memory available at mount
  cache_dir=DIR, cache_size=SIZE, prefetch_shards=on|off, s3_endpoint=URL, s3_region=R,
  s3_addressing=A, s3_timeout=D, s3_retries=N   the same as the flags below
  plans=on|off              on (default): take plans sent to MOUNTPOINT/.aifs/plan; off:
                            refuse them (EPERM), read ahead only from the reads seen
  allow_other               let all users read the mount (non-root mounters need
                            user_allow_other in /etc/fuse.conf)
  log_level=L, log_file=F, metrics_addr=A   the same as the flags below
  Generic options (ro, rw, defaults, nofail, _netdev, noatime, x-..., ...) are accepted and
  ignored: the kernel mount is always read-only, so no open for writing, writable shared
  mapping or truncate succeeds, for any user, root included (EROFS).

The statistics of a live mount are in MOUNTPOINT/.aifs/stats (JSON; the directory is never
listed) and 'aifs stats MOUNTPOINT' prints them. MOUNTPOINT/.aifs/plan takes the coming order
of samples by ioctl (python/aifs_plan.py sends it from any torch Sampler, 'aifs plan' from a
file; docs/prefetch.md).

For a shard set in S3, --cache-dir keeps the shard ranges fetched on local disk (O_DIRECT) and
serves them from there afterwards, across unmounts and restarts; entries are keyed by each
shard's size, checksum and ETag, so a re-uploaded shard is never served from a stale cache.
The cache keeps a stable subset of the data when it cannot hold all of it (not LRU: the next
shuffled epoch then hits in proportion to its size), and two mounts may share one directory.
docs/s3.md has the details.` + s3Help

// mountConfig is everything a mount needs, from flags and -o options.
type mountConfig struct {
	src, mountpoint string
	foreground      bool
	kernelCache     fs.CacheMode
	memCache        int64 // bytes; 0: prefetch's default
	cacheDir        string
	cacheSize       int64 // bytes of the disk cache
	cacheSizeSet    bool  // cache_size or --cache-size given
	prefetchShards  bool
	pushChunks      string // -o push_chunks: "auto" (default), "on" or "off"
	verify          bool   // -o verify=on
	s3              s3Config
	noPlans         bool // -o plans=off
	allowOther      bool
	logLevel        string
	logFile         string
	metricsAddr     string
	debugFUSE       bool
	notices         []string // for the user, besides the log: the daemon sends them to `aifs mount`
}

// optList collects repeated -o values.
type optList []string

func (o *optList) String() string     { return strings.Join(*o, ",") }
func (o *optList) Set(v string) error { *o = append(*o, v); return nil }

func runMount(ctx context.Context, args []string) int {
	flags := newFlags("mount", "[flags] SRC MOUNTPOINT [-o opt,opt=value...]", mountHelp)
	c := mountConfig{kernelCache: fs.CacheOn, pushChunks: "auto"}
	var opts optList
	flags.BoolVar(&c.foreground, "f", false, "stay in the foreground (logs go to stderr unless --log-file)")
	flags.Var(&opts, "o", "mount options, comma-separated (see above); repeatable")
	flags.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	flags.StringVar(&c.logFile, "log-file", "", "append logs to this file (default: stderr with -f, none for a daemon)")
	flags.StringVar(&c.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics and Go profiles at http://ADDR/debug/pprof/; ADDR is HOST:PORT, or PORT (or :PORT) for 127.0.0.1:PORT (default: off)")
	flags.BoolVar(&c.debugFUSE, "debug-fuse", false, "log every FUSE request and reply (very verbose)")
	flags.StringVar(&c.cacheDir, "cache-dir", "", "S3 sets: keep fetched shard ranges in this local directory, across mounts (default: off)")
	c.cacheSize = defaultDiskCache
	flags.Var((*sizeFlag)(&c.cacheSize), "cache-size", "bytes of --cache-dir to use (K, M, G, T suffixes); at most 9/10 of the room there (free space plus the cache's own files)")
	c.s3.register(flags)
	pos, code, ok := parseArgs(flags, args, 2, 2)
	if !ok {
		return code
	}
	c.src, c.mountpoint = pos[0], pos[1]
	if err := c.applyOptions(opts); err != nil {
		return usageError(flags, err.Error())
	}
	flags.Visit(func(f *flag.Flag) { c.cacheSizeSet = c.cacheSizeSet || f.Name == "cache-size" })
	if c.cacheSizeSet && c.cacheDir == "" {
		return usageError(flags, "cache_size (--cache-size) is the size of the local disk cache and needs cache_dir (--cache-dir); aifs's memory for samples is -o mem_cache=SIZE")
	}
	if c.pushChunks == "on" && (c.cacheDir == "" || c.kernelCache != fs.CacheOn) {
		return usageError(flags, "push_chunks=on puts the samples of the chunks that the disk cache fetches into the kernel's page cache: it needs cache_dir (--cache-dir) and kernel_cache=on")
	}
	if _, err := zapcore.ParseLevel(c.logLevel); err != nil {
		return usageError(flags, fmt.Sprintf("invalid --log-level %q", c.logLevel))
	}
	if c.foreground {
		return c.serve(ctx, nil)
	}
	if fd := os.Getenv(daemonEnv); fd != "" {
		n, _ := strconv.Atoi(fd)
		return c.serve(ctx, os.NewFile(uintptr(n), "ready"))
	}
	return startDaemon(args)
}

// runMountHelper runs aifs as mount(8) runs /sbin/mount.fuse.aifs: SRC MOUNTPOINT [-sfnv]
// [-o options]. There -f means "fake" (do nothing) and the others are ignored.
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
	return runMount(ctx, rest)
}

// applyOptions interprets -o options.
func (c *mountConfig) applyOptions(opts []string) error {
	for _, list := range opts {
		for _, o := range strings.Split(list, ",") {
			key, val, hasVal := strings.Cut(o, "=")
			switch {
			case key == "kernel_cache" && hasVal:
				switch val {
				case "on":
					c.kernelCache = fs.CacheOn
				case "off":
					c.kernelCache = fs.CacheOff
				default:
					return fmt.Errorf("invalid kernel_cache=%q (want on or off)", val)
				}
			case key == "allow_other" && !hasVal:
				c.allowOther = true
			case key == "plans" && (val == "on" || val == "off"):
				c.noPlans = val == "off"
			case key == "mem_cache" && hasVal:
				n, err := parseSize(val)
				if err != nil || n < 0 {
					return fmt.Errorf("invalid mem_cache=%q (want bytes with an optional K, M, G or T suffix)", val)
				}
				c.memCache = n
			case key == "cache_size" && hasVal:
				n, err := parseSize(val)
				if err != nil || n <= 0 {
					return fmt.Errorf("invalid cache_size=%q (want bytes with an optional K, M, G or T suffix)", val)
				}
				c.cacheSize, c.cacheSizeSet = n, true
			case key == "cache_dir" && hasVal:
				c.cacheDir = val
			case key == "prefetch_shards" && (val == "on" || val == "off"):
				c.prefetchShards = val == "on"
			case key == "push_chunks" && (val == "auto" || val == "on" || val == "off"):
				c.pushChunks = val
			case key == "verify" && (val == "on" || val == "off"):
				c.verify = val == "on"
			case key == "log_level" && hasVal:
				c.logLevel = val
			case key == "log_file" && hasVal:
				c.logFile = val
			case key == "metrics_addr" && hasVal:
				c.metricsAddr = val
			case genericMountOption(key):
			default:
				if known, err := c.s3.set(key, val); known {
					if err != nil {
						return err
					}
					continue
				}
				return fmt.Errorf("unknown mount option %q", o)
			}
		}
	}
	return nil
}

// genericMountOption reports whether key is an option of mount(8) or fstab that means nothing
// to aifs.
func genericMountOption(key string) bool {
	switch key {
	case "", "ro", "rw", "defaults", "auto", "noauto", "user", "nouser", "users", "owner", "group",
		"nofail", "_netdev", "dev", "nodev", "suid", "nosuid", "exec", "noexec", "atime", "noatime",
		"relatime", "norelatime", "strictatime", "nodiratime", "diratime", "async", "sync",
		"default_permissions", "subtype", "fsname", "comment":
		return true
	}
	return strings.HasPrefix(key, "x-")
}

// daemonEnv names the environment variable that tells a re-executed aifs it is the daemon, and
// which file descriptor reports readiness to the parent.
const daemonEnv = "AIFS_DAEMON_READY_FD"

// startDaemon runs this binary again, detached, with the same arguments, and waits until it
// reports on a pipe that the mount is live ("ok") or why it failed, its last line; the lines
// before it are notices for the user, printed on stderr.
func startDaemon(args []string) int {
	self, err := os.Executable()
	if err != nil {
		return fail("mount", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fail("mount", err)
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return fail("mount", err)
	}
	cmd := exec.Command(self, append([]string{"mount"}, args...)...)
	cmd.Env = append(os.Environ(), daemonEnv+"=3")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, null, null
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fail("mount", fmt.Errorf("start daemon: %w", err))
	}
	w.Close()
	null.Close()
	msg, _ := io.ReadAll(r) // until the daemon reports and closes its end, or dies
	r.Close()
	lines := strings.Split(strings.TrimSpace(string(msg)), "\n")
	for _, notice := range lines[:len(lines)-1] {
		fmt.Fprintf(os.Stderr, "aifs mount: %s\n", notice)
	}
	switch s := lines[len(lines)-1]; {
	case s == "ok":
		cmd.Process.Release()
		return exitOK
	case s != "":
		cmd.Wait()
		fmt.Fprintf(os.Stderr, "aifs mount: %s\n", s)
		return exitFailure
	default:
		err := cmd.Wait()
		return fail("mount", fmt.Errorf("the daemon exited before the mount was live (%v)", err))
	}
}

// serve mounts and serves until the file system is unmounted or ctx is cancelled (SIGINT,
// SIGTERM). If ready is not nil, serve reports on it "ok" once the mount is live or the error
// that prevented it, then closes it.
func (c *mountConfig) serve(ctx context.Context, ready *os.File) int {
	report := func(err error) {
		if ready != nil {
			for _, notice := range c.notices {
				fmt.Fprintln(ready, notice)
			}
			if err == nil {
				fmt.Fprintln(ready, "ok")
			} else {
				fmt.Fprintln(ready, err)
			}
			ready.Close()
			ready = nil
		}
	}
	log, closeLog, err := c.logger()
	if err != nil {
		report(err)
		return fail("mount", err)
	}
	defer closeLog()
	srv, cleanup, err := c.mount(ctx, log)
	if err != nil {
		log.Error("mount failed", zap.Error(err))
		report(err)
		return fail("mount", err)
	}
	defer cleanup()
	log.Info("mounted", zap.String("source", c.src), zap.String("mountpoint", c.mountpoint))
	if ready != nil {
		os.Chdir("/") // a daemon must not keep a file system busy through its working directory
	}
	report(nil)

	done := make(chan struct{})
	go func() { srv.Wait(); close(done) }()
	select {
	case <-done:
		log.Info("unmounted", zap.String("mountpoint", c.mountpoint))
		return exitOK
	case <-ctx.Done():
	}
	log.Info("signal: unmounting", zap.String("mountpoint", c.mountpoint))
	if err := srv.Unmount(); err != nil {
		// Busy: detach now and serve the files still open until they are closed.
		log.Warn("mountpoint busy; detaching it, the daemon ends when the last open file is closed", zap.Error(err))
		if err := lazyUnmount(c.mountpoint); err != nil {
			log.Error("lazy unmount failed", zap.Error(err))
			return exitFailure
		}
		<-done
	}
	log.Info("unmounted", zap.String("mountpoint", c.mountpoint))
	return exitOK
}

// lazyUnmount detaches mountpoint from the tree (MNT_DETACH) as root, through fusermount3 -z
// otherwise.
func lazyUnmount(mountpoint string) error {
	if os.Geteuid() == 0 {
		return syscall.Unmount(mountpoint, syscall.MNT_DETACH)
	}
	out, err := exec.Command("fusermount3", "-u", "-z", mountpoint).CombinedOutput()
	if err != nil {
		return fmt.Errorf("fusermount3 -u -z: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// mount checks the mountpoint, loads and checks the shard set, opens its shards and mounts it.
// Everything that can fail is checked before the kernel sees the mount. cleanup closes what
// mount opened; call it after the server has stopped.
func (c *mountConfig) mount(ctx context.Context, log *zap.Logger) (srv *fs.Server, cleanup func(), err error) {
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
	mnt, notice, err := checkMountpoint(c.mountpoint)
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
	storage := map[string]func() any{}
	if src.s3 != nil {
		storage["s3"] = func() any { return src.s3.Stats() }
	}
	var arrived atomic.Pointer[fs.FS] // the FS, once made: the disk cache's fetches come before
	if c.cacheDir != "" {
		if src.s3 == nil {
			return nil, nil, fmt.Errorf("--cache-dir is for shard sets in S3; %s is read directly from local disk", src.name)
		}
		size, err := diskCacheSize(log, c.cacheDir, c.cacheSize)
		if err != nil {
			return nil, nil, err
		}
		opt := diskcache.Options{Dir: c.cacheDir, Size: size, Namespace: src.name,
			StageShards: c.prefetchShards, Logger: log.Named("diskcache")}
		if c.pushOn(log, src.x) {
			opt.Arrived = func(shard string, off int64, data []byte) {
				if f := arrived.Load(); f != nil {
					f.Arrived(shard, off, data)
				}
			}
		}
		dc, err := diskcache.New(be, opt)
		if err != nil {
			return nil, nil, fmt.Errorf("--cache-dir: %w", err)
		}
		closers[len(closers)-1] = dc.Close // closes the S3 backend too
		be = dc
		storage["disk_cache"] = func() any { return dc.Stats() }
	}
	setMemoryLimit(log, src.indexBytes, c.memCache)
	f, err := fs.New(ctx, src.x, be, fs.Options{Logger: log.Named("fs"), KernelCache: c.kernelCache, Source: src.name, Mountpoint: mnt,
		Prefetch: prefetch.Options{CacheBytes: c.memCache, Verify: c.verify}, Storage: storage, NoPlans: c.noPlans})
	if err != nil {
		return nil, nil, err
	}
	closers = append(closers, f.Close)
	arrived.Store(f)
	if c.metricsAddr != "" {
		metrics, err := net.Listen("tcp", listenAddr(c.metricsAddr))
		if err != nil {
			return nil, nil, fmt.Errorf("--metrics-addr: %w", err)
		}
		closers = append(closers, metrics.Close)
		mux := http.NewServeMux()
		mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			f.Stats().WritePrometheus(w)
		})
		// Profiles of the live daemon (go tool pprof http://ADDR/debug/pprof/profile).
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		go http.Serve(metrics, mux)
	}
	s, err := fs.Mount(f, mnt, fs.MountOptions{AllowOther: c.allowOther, FsName: src.name, DirectMount: os.Geteuid() == 0, Debug: c.debugFUSE})
	if err != nil {
		return nil, nil, err
	}
	return s, closeAll, nil
}

// listenAddr returns addr with 127.0.0.1 as its host if it names none ("9400" or ":9400"): the
// metrics endpoint (with Go's profiles) is reachable from other hosts only when asked for by
// name ("0.0.0.0:9400").
func listenAddr(addr string) string {
	if !strings.Contains(addr, ":") {
		addr = ":" + addr
	}
	if host, port, err := net.SplitHostPort(addr); err == nil && host == "" {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}

// checkMountpoint returns the absolute, symlink-free path of mountpoint after checking that it
// is an empty directory and not already a mount point. A mount left by an aifs daemon that died
// (kill -9, OOM) is unmounted first (see recoverStale); notice says so, "" otherwise.
func checkMountpoint(mountpoint string) (abs, notice string, err error) {
	abs, err = filepath.Abs(mountpoint)
	if err == nil {
		notice, err = recoverStale(abs)
	}
	if err != nil {
		return "", "", err
	}
	abs, err = checkDir(abs, mountpoint)
	return abs, notice, err
}

// checkDir is checkMountpoint after recoverStale.
func checkDir(abs, mountpoint string) (string, error) {
	abs, err := filepath.EvalSymlinks(abs)
	if errors.Is(err, iofs.ErrNotExist) {
		return "", fmt.Errorf("mountpoint %s does not exist", mountpoint)
	}
	if err != nil {
		return "", fmt.Errorf("mountpoint: %w", err)
	}
	if fstype, source, ok := mountAt(abs); ok {
		return "", fmt.Errorf("%s is already a mount point (%s from %s)", abs, fstype, source)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("mountpoint: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("mountpoint %s is not a directory", abs)
	}
	d, err := os.Open(abs)
	if err != nil {
		return "", fmt.Errorf("mountpoint: %w", err)
	}
	names, err := d.Readdirnames(1)
	d.Close()
	if len(names) > 0 {
		return "", fmt.Errorf("mountpoint %s is not empty", abs)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("mountpoint: %w", err)
	}
	return abs, nil
}

// recoverStale looks at path before it is checked: a FUSE mount there whose daemon is gone
// answers with ENOTCONN (STATFS always reaches the daemon; a stat may be answered from the
// kernel's cache). If it is an aifs mount (fuse.aifs) it is unmounted lazily (nothing can be
// read from it any more, and nothing can be lost: it is read-only) and the notice says so;
// another file system's is refused with the command that clears it.
func recoverStale(path string) (notice string, err error) {
	fstype, source, ok := mountAt(path)
	if !ok || fstype != "fuse" && !strings.HasPrefix(fstype, "fuse.") {
		return "", nil
	}
	var st syscall.Statfs_t
	// ECONNABORTED: a request in flight when the daemon died.
	if err := syscall.Statfs(path, &st); err != syscall.ENOTCONN && err != syscall.ECONNABORTED {
		return "", nil
	}
	if fstype != "fuse.aifs" {
		return "", fmt.Errorf("%s is a %s mount of %s whose daemon is gone (transport endpoint is not connected); "+
			"unmount it with: fusermount3 -u -z %s", path, fstype, source, path)
	}
	if err := lazyUnmount(path); err != nil {
		return "", fmt.Errorf("%s was left mounted by an aifs daemon that died; unmounting it: %w", path, err)
	}
	return fmt.Sprintf("%s was left mounted (%s) by an aifs daemon that died; unmounted it", path, source), nil
}

// mountAt looks path up in /proc/self/mountinfo and returns the type and source of the mount
// there (the last one, if mounts are stacked), if any.
func mountAt(path string) (fstype, source string, ok bool) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", "", false
	}
	for _, line := range strings.Split(string(b), "\n") {
		// id parent major:minor root MOUNTPOINT options ... - FSTYPE SOURCE superoptions
		f := strings.Fields(line)
		if len(f) < 5 || unescapeMountinfo(f[4]) != path {
			continue
		}
		fstype, source, ok = "unknown", "unknown", true
		for i, v := range f {
			if v == "-" && i+2 < len(f) {
				fstype, source = f[i+1], unescapeMountinfo(f[i+2])
				break
			}
		}
	}
	return fstype, source, ok
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) of /proc/self/mountinfo.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// logger builds the daemon's zap logger: console lines at --log-level, to --log-file if set,
// else to stderr. closeLog flushes it.
func (c *mountConfig) logger() (*zap.Logger, func(), error) {
	level, err := zapcore.ParseLevel(c.logLevel)
	if err != nil {
		return nil, nil, fmt.Errorf("invalid log level %q", c.logLevel)
	}
	out := zapcore.Lock(os.Stderr)
	closeFile := func() {}
	if c.logFile != "" {
		f, err := os.OpenFile(c.logFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return nil, nil, fmt.Errorf("--log-file: %w", err)
		}
		out, closeFile = zapcore.Lock(f), func() { f.Close() }
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	log := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(enc), out, level)).Named("aifs")
	return log, func() { log.Sync(); closeFile() }, nil
}

// setMemoryLimit gives the Go runtime a soft memory limit: the index, the sample cache and
// 256 MiB for everything else (buffers, requests), or 9/10 of this process's memory cgroup
// limit if that is lower. Without one the heap may grow to twice the live cache before a
// collection, and a daemon in a memory cgroup is killed (it was, in a cgroup of half a 1.1 GB
// dataset with cache_size at 3/4 of the limit).
func setMemoryLimit(log *zap.Logger, indexBytes int64, cacheSize int64) {
	if cacheSize <= 0 {
		cacheSize = prefetch.DefaultCacheBytes
	}
	limit := cacheSize + indexBytes + 256<<20
	if cg := cgroupMemoryLimit(); cg > 0 && cg/10*9 < limit {
		limit = cg / 10 * 9
		if cacheSize > limit/2 {
			log.Warn("mem_cache is more than half of this memory cgroup's limit; the daemon may run out of memory",
				zap.Int64("mem_cache", cacheSize), zap.Int64("cgroup_limit", cg))
		}
	}
	debug.SetMemoryLimit(limit)
}

// pushOn decides -o push_chunks for a mount with a disk cache: on, off, or with auto, on when
// kernel_cache=on and the shard set takes at most half the memory available now (MemAvailable,
// and the memory cgroup's limit): every sample pushed stays in the page cache until it is
// read, and a set that does not fit would push out samples before their reads came.
func (c *mountConfig) pushOn(log *zap.Logger, x *layout.Index) bool {
	if c.pushChunks != "auto" || c.kernelCache != fs.CacheOn {
		return c.pushChunks == "on"
	}
	var set int64
	for _, s := range x.Shards() {
		set += int64(s.Size)
	}
	avail := memAvailable()
	if cg := cgroupMemoryLimit(); cg > 0 && (avail == 0 || cg < avail) {
		avail = cg
	}
	on := avail > 0 && set <= avail/2
	log.Info("push_chunks=auto: the samples of each chunk fetched go into the page cache when the shard set is at most half the memory available",
		zap.Bool("on", on), zap.Int64("shard_set_bytes", set), zap.Int64("memory_available", avail))
	return on
}

// memAvailable returns MemAvailable of /proc/meminfo in bytes, or 0 if it cannot be read.
func memAvailable() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// defaultDiskCache is --cache-size when not given; diskCacheSize caps it to the free space.
const defaultDiskCache = 100 << 30

// diskCacheSize creates dir if needed and returns the disk cache budget: want, at most 9/10 of
// the room in dir's file system, counting the chunks the cache already holds as room (a reused
// cache keeps them; a budget below them would delete them).
func diskCacheSize(log *zap.Logger, dir string, want int64) (int64, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, fmt.Errorf("--cache-dir: %w", err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("--cache-dir: %w", err)
	}
	held, err := diskcache.DirBytes(dir)
	if err != nil {
		return 0, fmt.Errorf("--cache-dir: %w", err)
	}
	free := (int64(st.Bavail)*st.Bsize + held) / 10 * 9
	if want > free {
		log.Warn("--cache-size is more than 9/10 of the room in --cache-dir (free space and the cache's own files); using that",
			zap.Int64("cache_size", want), zap.Int64("using", free))
		want = free
	}
	if want < 64<<20 {
		return 0, fmt.Errorf("--cache-dir %s has room for %s of cache; it needs at least 64 MiB", dir, humanBytes(want))
	}
	return want, nil
}

// cgroupMemoryLimit returns the memory limit of this process's cgroup (v2 memory.max or v1
// memory.limit_in_bytes), or 0 if there is none or it cannot be read.
func cgroupMemoryLimit() int64 {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var file string
		switch {
		case parts[0] == "0" && parts[1] == "": // v2
			file = filepath.Join("/sys/fs/cgroup", parts[2], "memory.max")
		case strings.Contains(","+parts[1]+",", ",memory,"): // v1
			file = filepath.Join("/sys/fs/cgroup/memory", parts[2], "memory.limit_in_bytes")
		default:
			continue
		}
		v, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		// "max" (v2) or a huge number (v1) mean no limit
		if n, err := strconv.ParseInt(strings.TrimSpace(string(v)), 10, 64); err == nil && n > 0 && n < 1<<50 {
			return n
		}
	}
	return 0
}
