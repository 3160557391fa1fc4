// Command aifs packs datasets into shard sets and serves them as read-only file trees.
//
// Each subcommand lives in its own file (pack.go, verify.go, ls.go) with its flags and help text;
// this file holds the dispatch and the small helpers they share. aifs mount is split by concern:
// mount.go (the command and its help), options.go (flags and -o options to a mountConfig),
// daemon.go (detaching and reporting readiness), serve.go (wiring the shard set, FS and server,
// and serving until unmounted), mountinfo.go (mountpoint checks, stale mounts, unmounting),
// logging.go, limits.go (memory and disk budgets from the machine) and metrics.go (--metrics-addr).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// command is one subcommand: its name, a one-line summary, and a function that runs it with the
// arguments after the name. run returns the process exit status.
type command struct {
	name, summary string
	run           func(ctx context.Context, args []string) int
}

func commands() []command {
	return []command{
		{"pack", "pack a directory tree into a shard set", runPack},
		{"index", "index tar files (WebDataset shards) in place as a shard set", runIndex},
		{"verify", "check every sample of a shard set against its checksum", runVerify},
		{"ls", "list a directory of a shard set without mounting it", runLs},
		{"locate", "print where each file's bytes lie: shard, offset, length, CRC32C", runLocate},
		{"mount", "mount a shard set read-only as a file tree", runMount},
		{"stats", "print the statistics of a live mount", runStats},
		{"upgrade", "replace the daemon of a live mount with the binary on disk, with no remount", runUpgrade},
		{"top", "show a live mount's rates and data stall, refreshing like top", runTop},
		{"plan", "send the order of the coming epoch to a live mount", runPlan},
		{"bench", "read directory trees in shuffled epochs like DataLoader workers and report throughput", runBench},
	}
}

const (
	exitOK        = 0
	exitFailure   = 1
	exitUsage     = 2
	exitInterrupt = 130
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if filepath.Base(os.Args[0]) == mountHelperName {
		os.Exit(runMountHelper(ctx, os.Args[1:]))
	}
	os.Exit(run(ctx, os.Args[1:]))
}

// mountHelperName is the name under which mount(8) runs aifs for "mount -t fuse.aifs"
// (scripts/install.sh links it to the binary).
const mountHelperName = "mount.fuse.aifs"

func run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		usage(os.Stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(os.Stdout)
		return exitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:])
		}
	}
	// "aifs SRC MOUNTPOINT -o opts" is how mount.fuse3 runs a FUSE file system of type
	// fuse.aifs (mount -t fuse.aifs, /etc/fstab).
	if fi, err := os.Stat(args[0]); err == nil && fi.IsDir() && len(args) >= 2 {
		return runMountHelper(ctx, args)
	}
	fmt.Fprintf(os.Stderr, "aifs: unknown command %q\n\n", args[0])
	usage(os.Stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "aifs packs training datasets into shard sets and serves them as read-only file trees.\n\n")
	fmt.Fprintf(w, "Usage: aifs COMMAND [flags] ARGS...\n\nCommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun 'aifs COMMAND --help' for a command's flags and their defaults.\n")
}

// newFlags returns a flag set for a subcommand whose --help prints synopsis, description and
// every flag with its default.
func newFlags(name, synopsis, description string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: aifs %s %s\n\n%s\n", name, synopsis, strings.TrimSpace(description))
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprintf(w, "\nFlags:\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseArgs parses flags that may appear before, between or after the positional arguments and
// checks the positional count. It returns the positionals, or an exit status to return at once
// (exitOK after --help, which it prints; exitUsage after a usage error, which it prints).
func parseArgs(fs *flag.FlagSet, args []string, minPos, maxPos int) ([]string, int, bool) {
	pos, err := splitArgs(fs, args, minPos, maxPos)
	if err != nil {
		return nil, argsError(fs, err), false
	}
	return pos, 0, true
}

// argsError prints what a parse error calls for and returns the exit status: after
// flag.ErrHelp the usage on stdout and exitOK, otherwise the error and the usage on stderr and
// exitUsage.
func argsError(fs *flag.FlagSet, err error) int {
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(os.Stdout)
		fs.Usage()
		return exitOK
	}
	return usageError(fs, err.Error())
}

// splitArgs is parseArgs without the printing: it parses the flags in args, wherever they are,
// into fs and returns the positional arguments (all of those after "--"). Errors: flag.ErrHelp
// for -h or --help, the flag package's for a bad flag, and one for a count outside
// [minPos, maxPos] (maxPos < 0: no upper bound).
func splitArgs(fs *flag.FlagSet, args []string, minPos, maxPos int) ([]string, error) {
	var pos []string
	fs.SetOutput(io.Discard) // the flag package would print usage itself; the caller chooses where
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		if args[0] == "--" {
			pos = append(pos, args[1:]...)
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if len(pos) < minPos || maxPos >= 0 && len(pos) > maxPos {
		return nil, errors.New("wrong number of arguments")
	}
	return pos, nil
}

// usageError prints msg and the command's usage to stderr and returns exitUsage.
func usageError(fs *flag.FlagSet, msg string) int {
	fmt.Fprintf(os.Stderr, "aifs %s: %s\n", fs.Name(), msg)
	fs.SetOutput(os.Stderr)
	fs.Usage()
	return exitUsage
}

// fail prints a one-line error for command name and returns the matching exit status.
func fail(name string, err error) int {
	if errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "aifs %s: interrupted\n", name)
		return exitInterrupt
	}
	fmt.Fprintf(os.Stderr, "aifs %s: %v\n", name, err)
	return exitFailure
}

// sizeFlag is a byte count written as 1048576, 512K, 64MiB, 1G, 1GiB (powers of 1024).
type sizeFlag int64

func (s *sizeFlag) String() string { return formatSize(int64(*s)) }

func (s *sizeFlag) Set(v string) error {
	n, err := parseSize(v)
	if err != nil {
		return err
	}
	*s = sizeFlag(n)
	return nil
}

func parseSize(v string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1}}
	num, mult := strings.TrimSpace(v), int64(1)
	for _, u := range units {
		if strings.HasSuffix(strings.ToUpper(num), strings.ToUpper(u.suffix)) {
			num, mult = strings.TrimSpace(num[:len(num)-len(u.suffix)]), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("invalid size %q (want a positive number with an optional K, M, G or T suffix)", v)
	}
	return n * mult, nil
}

func formatSize(n int64) string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.mult && n%u.mult == 0 {
			return fmt.Sprintf("%d%s", n/u.mult, u.suffix)
		}
	}
	return strconv.FormatInt(n, 10)
}

// isTerminal reports whether f is a character device such as a terminal.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
