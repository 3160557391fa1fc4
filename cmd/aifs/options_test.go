package main

import (
	"errors"
	"flag"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aifs/aifs/fs"
)

// TestParseMount runs aifs mount's command lines through parseMount: each row is the arguments
// after SRC MOUNTPOINT and either the changes it makes to the defaults or a piece of the error.
// To cover a new option, add a row.
func TestParseMount(t *testing.T) {
	defaults := mountConfig{src: "SRC", mountpoint: "MNT", kernelCache: fs.CacheOn, pushChunks: "auto", chunkReads: true,
		cacheSize: defaultDiskCache, logLevel: "info", data: dataFUSE, restart: true,
		s3: s3Config{addressing: "auto", timeout: 30 * time.Second, retries: 5}}
	for _, tc := range []struct {
		args string               // after "SRC MNT", split at spaces
		want func(c *mountConfig) // the changes to defaults; nil: none
		err  string               // a piece of the error; "" for none
	}{
		{args: ""},
		{args: "-o defaults,nofail,_netdev,noatime,x-systemd.automount,rw,nosuid,nodev,fsname=x"},
		{args: "-o ,,"}, // empty options are mount(8)'s, and mean nothing
		{args: "-o kernel_cache=off", want: func(c *mountConfig) { c.kernelCache = fs.CacheOff }},
		{args: "-o kernel_cache=on", want: nil},
		{args: "-o kernel_cache=maybe", err: `invalid kernel_cache="maybe"`},
		{args: "-o kernel_cache", err: `unknown mount option "kernel_cache"`},
		{args: "-o allow_other", want: func(c *mountConfig) { c.allowOther = true }},
		{args: "-o allow_other=1", err: "unknown mount option"},
		{args: "-o ro", want: nil}, // the kernel mount is always read-only
		{args: "-o ro,rw", want: nil},
		{args: "-o remount,rw", err: "cannot be remounted"},
		{args: "-o plans=off", want: func(c *mountConfig) { c.noPlans = true }},
		{args: "-o plans=off,plans=on", want: nil},
		{args: "-o restart=off", want: func(c *mountConfig) { c.restart = false }},
		{args: "-o plans=no", err: `unknown mount option "plans=no"`},
		{args: "-o mem_cache=512M", want: func(c *mountConfig) { c.memCache = 512 << 20 }},
		{args: "-o mem_cache=2GiB", want: func(c *mountConfig) { c.memCache = 2 << 30 }},
		{args: "-o mem_cache=lots", err: `invalid mem_cache="lots"`},
		{args: "-o mem_cache=0", err: "invalid mem_cache"},
		{args: "-o page_cache=300M", want: func(c *mountConfig) { c.pageCache = 300 << 20 }},
		{args: "-o page_cache=300M,page_cache=auto", want: func(c *mountConfig) { c.pageCache = 0 }},
		{args: "-o page_cache=0", err: "invalid page_cache"},
		{args: "-o page_cache=half", err: `invalid page_cache="half"`},
		{args: "-o chunk_reads=off", want: func(c *mountConfig) { c.chunkReads = false }},
		{args: "-o chunk_reads=maybe", err: `unknown mount option "chunk_reads=maybe"`},
		{args: "-o verify=on", want: func(c *mountConfig) { c.verify = true }},
		{args: "-o data=kernel", want: func(c *mountConfig) { c.data = dataKernel }},
		{args: "-o data=auto,data=fuse", want: nil},
		{args: "-o data=auto", want: func(c *mountConfig) { c.data = dataAuto }},
		{args: "-o data=ext4", err: `invalid data="ext4" (want fuse, kernel or auto)`},
		{args: "-o verify=yes", err: `unknown mount option "verify=yes"`},
		{args: "-o cache_dir=/c", want: func(c *mountConfig) { c.cacheDir = "/c" }},
		{args: "-o cache_dir=/c,cache_size=1G", want: func(c *mountConfig) { c.cacheDir, c.cacheSize, c.cacheSizeSet = "/c", 1<<30, true }},
		{args: "--cache-dir /c --cache-size 2G", want: func(c *mountConfig) { c.cacheDir, c.cacheSize, c.cacheSizeSet = "/c", 2<<30, true }},
		{args: "-o cache_size=1G", err: "needs cache_dir"},
		{args: "--cache-size 1G", err: "needs cache_dir"},
		{args: "-o cache_dir=/c,cache_size=-1", err: "invalid cache_size"},
		{args: "-o cache_dir=/c,prefetch_shards=on", want: func(c *mountConfig) { c.cacheDir, c.prefetchShards = "/c", true }},
		{args: "-o prefetch_shards=maybe", err: "unknown mount option"},
		{args: "-o cache_dir=/c,push_chunks=on", want: func(c *mountConfig) { c.cacheDir, c.pushChunks = "/c", "on" }},
		{args: "-o push_chunks=off", want: func(c *mountConfig) { c.pushChunks = "off" }},
		{args: "-o push_chunks=on", err: "needs cache_dir"},
		{args: "-o cache_dir=/c,push_chunks=on,kernel_cache=off", err: "kernel_cache=on"},
		{args: "-o log_level=debug,log_file=/l,metrics_addr=9400", want: func(c *mountConfig) { c.logLevel, c.logFile, c.metricsAddr = "debug", "/l", "9400" }},
		{args: "--log-level warn --log-file /l --metrics-addr :9400 --debug-fuse -f", want: func(c *mountConfig) {
			c.logLevel, c.logFile, c.metricsAddr, c.debugFUSE, c.foreground = "warn", "/l", ":9400", true, true
		}},
		{args: "-o log_level=loud", err: `invalid --log-level "loud"`},
		{args: "--log-level loud", err: `invalid --log-level "loud"`},
		{args: "-o s3_endpoint=http://h:1,s3_region=r,s3_addressing=path,s3_timeout=5s,s3_retries=0", want: func(c *mountConfig) {
			c.s3 = s3Config{endpoint: "http://h:1", region: "r", addressing: "path", timeout: 5 * time.Second, retries: 0}
		}},
		{args: "-o s3_timeout=soon", err: `invalid s3_timeout="soon"`},
		{args: "-o s3_retries=-1", err: `invalid s3_retries="-1"`},
		{args: "-o frobnicate", err: `unknown mount option "frobnicate"`},
		{args: "-o kernel_cache=off,frobnicate=1", err: `unknown mount option "frobnicate=1"`},
		{args: "--frobnicate", err: "flag provided but not defined"},
		{args: "extra", err: "wrong number of arguments"},
	} {
		c, flags, err := parseMount(append([]string{"SRC", "MNT"}, strings.Fields(tc.args)...))
		if flags == nil {
			t.Fatalf("%q: no flag set", tc.args)
		}
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want one containing %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		want := defaults
		if tc.want != nil {
			tc.want(&want)
		}
		if !reflect.DeepEqual(c, want) {
			t.Errorf("%q:\n got %+v\nwant %+v", tc.args, c, want)
		}
	}
}

// TestParseMountOrder: flags, SRC and MOUNTPOINT may come in any order, as mount(8) and fstab
// put -o after the positionals, and --help is flag.ErrHelp.
func TestParseMountOrder(t *testing.T) {
	for _, args := range [][]string{
		{"-o", "verify=on", "SRC", "MNT"},
		{"SRC", "-o", "verify=on", "MNT"},
		{"SRC", "MNT", "-o", "verify=on"},
	} {
		c, _, err := parseMount(args)
		if err != nil || c.src != "SRC" || c.mountpoint != "MNT" || !c.verify {
			t.Errorf("%q: src %q, mountpoint %q, verify %v, error %v", args, c.src, c.mountpoint, c.verify, err)
		}
	}
	if _, _, err := parseMount([]string{"--help"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("--help: %v, want flag.ErrHelp", err)
	}
}

// TestMountOptionError: an unknown or malformed -o option, and -o remount (mount -o remount
// through mount(8)), are one line on stderr naming the option, not the usage, with status 2
// from aifs mount and 1 (an incorrect invocation) from the mount(8) helper.
func TestMountOptionError(t *testing.T) {
	for _, tc := range []struct {
		helper bool
		args   []string
		code   int
		want   string
	}{
		{false, []string{"SRC", "MNT", "-o", "frobnicate"}, exitUsage, `unknown mount option "frobnicate"`},
		{false, []string{"SRC", "MNT", "-o", "mem_cache=lots"}, exitUsage, `invalid mem_cache="lots"`},
		{true, []string{"SRC", "MNT", "-o", "remount,rw"}, exitFailure, "cannot be remounted"},
		{true, []string{"SRC", "MNT", "-o", "frobnicate"}, exitFailure, `unknown mount option "frobnicate"`},
	} {
		var code int
		out := captureStderr(t, func() {
			if tc.helper {
				code = runMountHelper(t.Context(), tc.args)
			} else {
				code = runMount(t.Context(), tc.args)
			}
		})
		if code != tc.code || strings.Count(out, "\n") != 1 || !strings.Contains(out, tc.want) {
			t.Errorf("%v (helper %v): status %d, stderr %q; want %d and one line with %q", tc.args, tc.helper, code, out, tc.code, tc.want)
		}
	}
}

// captureStderr returns what fn writes to os.Stderr.
func captureStderr(t *testing.T, fn func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = w
	done := make(chan []byte)
	go func() { b, _ := io.ReadAll(r); done <- b }()
	fn()
	os.Stderr = saved
	w.Close()
	return string(<-done)
}
