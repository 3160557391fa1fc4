package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/aifs/aifs/fs"
	"go.uber.org/zap/zapcore"
)

// mountConfig is everything a mount needs, from flags and -o options.
type mountConfig struct {
	src, mountpoint string
	foreground      bool
	kernelCache     fs.CacheMode
	memCache        int64 // bytes; 0: prefetch's default
	pageCache       int64 // -o page_cache bytes; 0: auto
	chunkReads      bool  // -o chunk_reads=on
	cacheDir        string
	cacheSize       int64 // bytes of the disk cache
	cacheSizeSet    bool  // cache_size or --cache-size given
	prefetchShards  bool
	pushChunks      string       // -o push_chunks: "auto" (default), "on" or "off"
	verify          bool         // -o verify=on
	data            string       // -o data: dataFUSE (default), dataKernel or dataAuto
	plane           *kernelPlane // the kernel plane, once mounted; nil: the FUSE plane
	s3              s3Config
	noPlans         bool // -o plans=off
	restart         bool // -o restart=on: a keeper restarts the daemon (keeper.go)
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

// mountSynopsis is the usage line of aifs mount, after "aifs mount".
const mountSynopsis = "[flags] SRC MOUNTPOINT [-o opt,opt=value...]"

// mountFlags returns the flag set of aifs mount. Parsing it writes the flags into c, which
// starts with every default, and the -o values into opts.
func mountFlags(c *mountConfig, opts *optList) *flag.FlagSet {
	flags := newFlags("mount", mountSynopsis, mountHelp)
	*c = mountConfig{kernelCache: fs.CacheOn, pushChunks: "auto", chunkReads: true, data: dataFUSE, restart: true}
	flags.BoolVar(&c.foreground, "f", false, "stay in the foreground (logs go to stderr unless --log-file)")
	flags.Var(opts, "o", "mount options, comma-separated (see above); repeatable")
	flags.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	flags.StringVar(&c.logFile, "log-file", "", "append logs to this file (default: stderr with -f, none for a daemon)")
	flags.StringVar(&c.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics and Go profiles at http://ADDR/debug/pprof/; ADDR is HOST:PORT, or PORT (or :PORT) for 127.0.0.1:PORT (default: off)")
	flags.BoolVar(&c.debugFUSE, "debug-fuse", false, "log every FUSE request and reply (very verbose)")
	flags.StringVar(&c.cacheDir, "cache-dir", "", "S3 sets: keep fetched shard ranges in this local directory, across mounts (default: off)")
	c.cacheSize = defaultDiskCache
	flags.Var((*sizeFlag)(&c.cacheSize), "cache-size", "bytes of --cache-dir to use (K, M, G, T suffixes); at most 9/10 of the room there (free space plus the cache's own files)")
	c.s3.register(flags)
	return flags
}

// parseMount turns the arguments of aifs mount (flags, SRC, MOUNTPOINT and -o options, in any
// order) into a checked mountConfig. It is pure: it reads no file and no environment variable,
// so any command line can be tested without a mount. Errors are usage errors, printed with the
// usage of the flag set returned (never nil): flag.ErrHelp for -h or --help, a bad flag, a
// wrong number of arguments, an unknown or malformed -o option, or options that need others.
func parseMount(args []string) (mountConfig, *flag.FlagSet, error) {
	var c mountConfig
	var opts optList
	flags := mountFlags(&c, &opts)
	pos, err := splitArgs(flags, args, 2, 2)
	if err != nil {
		return mountConfig{}, flags, err
	}
	c.src, c.mountpoint = pos[0], pos[1]
	flags.Visit(func(f *flag.Flag) { c.cacheSizeSet = c.cacheSizeSet || f.Name == "cache-size" })
	if err := c.applyOptions(opts); err != nil {
		return mountConfig{}, flags, optionError{err}
	}
	if err := c.check(); err != nil {
		return mountConfig{}, flags, err
	}
	return c, flags, nil
}

// check refuses settings that do not go together, after flags and -o options are applied.
func (c *mountConfig) check() error {
	if c.cacheSizeSet && c.cacheDir == "" {
		return errors.New("cache_size (--cache-size) is the size of the local disk cache and needs cache_dir (--cache-dir); aifs's memory for samples is -o mem_cache=SIZE")
	}
	if c.pushChunks == "on" && (c.cacheDir == "" || c.kernelCache != fs.CacheOn) {
		return errors.New("push_chunks=on puts the samples of the chunks that the disk cache fetches into the kernel's page cache: it needs cache_dir (--cache-dir) and kernel_cache=on")
	}
	if _, err := zapcore.ParseLevel(c.logLevel); err != nil {
		return fmt.Errorf("invalid --log-level %q", c.logLevel)
	}
	return nil
}

// optionError is an unknown or malformed -o option: runMount reports it in one line, without
// the usage (which lists the options), as mount(8) users expect.
type optionError struct{ err error }

func (e optionError) Error() string { return e.err.Error() }
func (e optionError) Unwrap() error { return e.err }

// errRemount answers -o remount (mount -o remount,... MOUNTPOINT, through mount(8)).
var errRemount = errors.New("aifs mounts are always read-only and cannot be remounted (-o remount): unmount and mount again to change options")

// applyOptions interprets -o options, in order (a later one overrides an earlier one). It
// fails on the first unknown or malformed option.
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
			case key == "restart" && (val == "on" || val == "off"):
				c.restart = val == "on"
			case key == "mem_cache" && hasVal:
				n, err := parseSize(val)
				if err != nil || n < 0 {
					return fmt.Errorf("invalid mem_cache=%q (want bytes with an optional K, M, G or T suffix)", val)
				}
				c.memCache = n
			case key == "page_cache" && hasVal:
				if val == "auto" {
					c.pageCache = 0
					continue
				}
				n, err := parseSize(val)
				if err != nil || n <= 0 {
					return fmt.Errorf("invalid page_cache=%q (want auto, or bytes with an optional K, M, G or T suffix)", val)
				}
				c.pageCache = n
			case key == "chunk_reads" && (val == "on" || val == "off"):
				c.chunkReads = val == "on"
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
			case key == "data" && hasVal:
				if val != dataFUSE && val != dataKernel && val != dataAuto {
					return fmt.Errorf("invalid data=%q (want fuse, kernel or auto)", val)
				}
				c.data = val
			case key == "verify" && (val == "on" || val == "off"):
				c.verify = val == "on"
			case key == "log_level" && hasVal:
				c.logLevel = val
			case key == "log_file" && hasVal:
				c.logFile = val
			case key == "metrics_addr" && hasVal:
				c.metricsAddr = val
			case key == "remount":
				return errRemount
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
