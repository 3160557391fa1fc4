package main

import (
	"fmt"
	"strings"

	"github.com/aifs/aifs/fs"
)

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
	readOnly        bool // kernel mount MS_RDONLY (no plan file writes)
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
			case key == "ro" && !hasVal:
				c.readOnly = true
			case key == "rw" && !hasVal:
				c.readOnly = false
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
	case "", "defaults", "auto", "noauto", "user", "nouser", "users", "owner", "group",
		"nofail", "_netdev", "dev", "nodev", "suid", "nosuid", "exec", "noexec", "atime", "noatime",
		"relatime", "norelatime", "strictatime", "nodiratime", "diratime", "async", "sync",
		"default_permissions", "subtype", "fsname", "comment":
		return true
	}
	return strings.HasPrefix(key, "x-")
}
