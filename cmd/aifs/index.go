package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/aifs/aifs/backend/s3"
	"github.com/aifs/aifs/internal/human"
	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/layout/pack"
	"github.com/aifs/aifs/layout/tar"
	"github.com/aifs/aifs/layout/tarindex"
	"github.com/aifs/aifs/layout/view"
)

func runIndex(ctx context.Context, args []string) int {
	fs := newFlags("index", "[flags] SOURCE... DST", `
Indexes existing tar files (WebDataset shards, or any uncompressed tar) where they lie, writing
only DST/index.aifs: a shard set whose samples are the members' bytes inside the tars, which
mount, ls and verify take like any other. SOURCE is a tar file, a directory (every *.tar under
it, in path order), a brace pattern as WebDataset writes them ('shards/train-{000000..000146}.tar',
quoted; also {a,b}), or the same in S3 (s3://BUCKET/KEY, s3://BUCKET/PREFIX/ for every *.tar
under it). DST is a directory (created if missing; it may hold the tars) or s3://BUCKET/PREFIX
in the tars' bucket. The index names each tar by its path relative to DST (--absolute: from the
root), records its size and mtime (S3: ETag), and the mount refuses a tar changed since, by name.

Tar formats: ustar, GNU, PAX and v7, as GNU tar, bsdtar, Python's tarfile and webdataset write
them. Regular files become samples; hard links share their target's bytes; directories are kept
and implied; symlinks, devices, FIFOs and sparse members are skipped with a warning. A member
name with a ".." component fails the index. When several members take one path, the last one
(in tar order, then in SOURCE order) wins, as tar -x leaves it. Compressed tars (.tar.gz,
.tar.zst, ...) cannot be read in place: decompress them, or extract them and use aifs pack.

Views (--view): "tree" puts each tar's members under a directory named after the tar (less
".tar"), or all in one tree with --merge. "imagefolder" turns WebDataset samples (members
grouped by key: the directory part and the base name up to its first dot) into CLASS/KEY.EXT
files of their image, so torchvision's ImageFolder trains from the tars; the class comes from
the sample's .cls member, or --label-key's field of its .json member, or --labels; class
directories are named by --class-names, else by the label (numbers zero-padded so that sorted
order is numeric order). Samples without an image or a label are counted and reported.

Every byte is read once (several tars in parallel) to record each member's CRC32C and each
tar's, unless --no-checksums (headers only; verify=on and aifs verify then refuse the set).
The index is written last and atomically, and the same tars and flags always give the same
index.`+s3Help)
	viewName := fs.String("view", "tree", "the tree the mount shows: tree or imagefolder")
	merge := fs.Bool("merge", false, "view tree: merge the members of all tars into one tree instead of a directory per tar")
	noChecksums := fs.Bool("no-checksums", false, "read only the tars' headers: faster, but nothing can verify the samples later")
	jobs := fs.Int("jobs", 4, "tars read in parallel")
	force := fs.Bool("force", false, "replace an index already at DST (never one of a packed shard set)")
	absolute := fs.Bool("absolute", false, "name the tars in the index by absolute path (S3: key from the bucket's root) instead of relative to DST")
	quiet := fs.Bool("quiet", false, "print no progress bar and no summary")
	imageExt := fs.String("image-ext", strings.Join(tarindex.DefaultImageExts, ","), "view imagefolder: extensions of a sample's image member, in order of preference")
	labelKey := fs.String("label-key", "", "view imagefolder: take the class from this field of the sample's .json member (default: its .cls member)")
	labels := fs.String("labels", "", "view imagefolder: take the class from this file of lines 'KEY CLASS' (the class is the last field)")
	classNames := fs.String("class-names", "", "view imagefolder: name class directories from this file, line i naming class number i")
	var s3c s3Config
	s3c.register(fs)
	pos, code, ok := parseArgs(fs, args, 2, -1)
	if !ok {
		return code
	}
	if *jobs < 1 {
		return usageError(fs, "--jobs must be at least 1")
	}
	opt := tarindex.Options{NoChecksums: *noChecksums, Jobs: *jobs,
		Warn: func(msg string) { fmt.Fprintf(os.Stderr, "aifs index: warning: %s\n", human.Name(msg)) }}
	switch {
	case *viewName == "tree" && *merge:
		opt.View = view.Merge
	case *viewName == "tree":
		opt.View = view.Tree
	case *viewName == "imagefolder" && !*merge:
		opt.View = view.ImageFolder
	default:
		return usageError(fs, fmt.Sprintf("--view %q: want tree or imagefolder (--merge only with tree)", *viewName))
	}
	if opt.View != view.ImageFolder && (*labelKey != "" || *labels != "" || *classNames != "") {
		return usageError(fs, "--label-key, --labels and --class-names are for --view imagefolder")
	}
	if *labelKey != "" && *labels != "" {
		return usageError(fs, "--label-key and --labels are two sources of labels: give one")
	}
	opt.Labels.JSONKey = *labelKey
	for e := range strings.SplitSeq(*imageExt, ",") {
		if e = strings.ToLower(strings.TrimPrefix(strings.TrimSpace(e), ".")); e != "" {
			opt.Labels.ImageExts = append(opt.Labels.ImageExts, e)
		}
	}
	var err error
	if *labels != "" {
		if opt.Labels.ByKey, err = readLabels(*labels); err != nil {
			return fail("index", err)
		}
	}
	if *classNames != "" {
		if opt.Labels.ClassNames, err = readClassNames(*classNames); err != nil {
			return fail("index", err)
		}
	}
	dst := pos[len(pos)-1]
	t, err := newTarSet(ctx, dst, *absolute, &s3c)
	if err != nil {
		return fail("index", err)
	}
	defer t.close()
	srcs, err := t.sources(ctx, pos[:len(pos)-1])
	if err != nil {
		return fail("index", compressedHint(err))
	}
	var bar *progressBar
	if !*quiet && isTerminal(os.Stderr) {
		bar = newProgressBar(os.Stderr)
		opt.Progress = func(p tarindex.Progress) {
			bar.update(p.Bytes, p.TotalBytes, fmt.Sprintf("%d/%d tars", p.Tars, p.TotalTars))
		}
	}
	index, res, err := tarindex.IndexTars(ctx, srcs, opt)
	if err == nil {
		err = t.write(ctx, index, *force)
	}
	if bar != nil {
		bar.clear()
	}
	if err != nil {
		return fail("index", compressedHint(err))
	}
	if !*quiet {
		printIndexSummary(res, len(index), opt)
	}
	return exitOK
}

// compressedHint adds what to do to an error about a compressed tar, found by its name (sources)
// or by its bytes (IndexTars).
func compressedHint(err error) error {
	if errors.Is(err, tar.ErrCompressed) {
		return fmt.Errorf("%w; aifs reads uncompressed tars in place: decompress it (the index then names the .tar), or extract it and use aifs pack", err)
	}
	return err
}

func printIndexSummary(res tarindex.Result, indexBytes int, opt tarindex.Options) {
	secs := res.Duration.Seconds()
	sums := "with checksums"
	if opt.NoChecksums {
		sums = "headers only, no checksums"
	}
	fmt.Printf("indexed %d tars (%s, %d members) in %.2f s (%s/s, %s): %d files (%d hard links), %d directories, %s; index %s\n",
		res.Tars, human.Bytes(res.TarBytes), res.Members, secs, human.Bytes(int64(float64(res.TarBytes)/max(secs, 1e-9))), sums,
		res.Files, res.Links, res.Dirs, human.Bytes(res.Bytes), human.Bytes(int64(indexBytes)))
	if opt.View == view.ImageFolder {
		fmt.Printf("image-folder view: %d samples in %d classes\n", res.Samples, res.Classes)
	}
	for _, c := range []struct {
		n    int
		what string
	}{
		{res.Skipped, "members skipped (symlinks, devices, FIFOs, sparse files, dangling hard links; named above)"},
		{res.Replaced, "files replaced by a later member of the same path (the last one wins)"},
		{res.NoImage, "samples left out: no image member (" + strings.Join(opt.Labels.ImageExts, ", ") + ")"},
		{res.NoLabel, "samples left out: no usable label"},
		{res.NoKey, "members left out: no extension, so no WebDataset key"},
	} {
		if c.n > 0 {
			fmt.Printf("  %d %s\n", c.n, c.what)
		}
	}
}

// readLabels reads a --labels file: lines "KEY CLASS", the class being the last field; blank
// lines and lines starting with # are ignored.
func readLabels(path string) (map[string]string, error) {
	m := map[string]string{}
	err := eachLine(path, func(n int, line string) error {
		i := strings.LastIndexAny(line, " \t")
		if i < 0 {
			return fmt.Errorf("%s:%d: want 'KEY CLASS', got %q", path, n, line)
		}
		key, class := strings.TrimSpace(line[:i]), line[i+1:]
		if _, dup := m[key]; dup {
			return fmt.Errorf("%s:%d: key %q is given twice", path, n, key)
		}
		m[key] = class
		return nil
	})
	return m, err
}

// readClassNames reads a --class-names file: line i (from 0) names class i.
func readClassNames(path string) ([]string, error) {
	var names []string
	err := eachLine(path, func(n int, line string) error {
		if len(names) != n-1 {
			return fmt.Errorf("%s:%d: a blank line before it would leave class %d without a name", path, n, len(names))
		}
		if !layout.ValidName([]byte(line)) {
			return fmt.Errorf("%s:%d: %q cannot name a directory", path, n, line)
		}
		names = append(names, line)
		return nil
	})
	return names, err
}

// eachLine calls f with each trimmed line of path that is not blank or a # comment, and its
// line number from 1.
func eachLine(path string, f func(n int, line string) error) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			if err := f(n, line); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}

// compressedSuffixes are the names of compressed tars, which cannot be indexed in place.
var compressedSuffixes = []string{".tar.gz", ".tgz", ".tar.zst", ".tzst", ".tar.bz2", ".tbz2", ".tbz", ".tar.xz", ".txz",
	".tar.lz4", ".tar.lz", ".tar.lzma", ".tar.Z"}

func compressedName(name string) bool {
	for _, s := range compressedSuffixes {
		if strings.HasSuffix(strings.ToLower(name), strings.ToLower(s)) {
			return true
		}
	}
	return false
}

// tarSet is the destination of aifs index and where its tars are found: local files, or
// objects of the destination's bucket.
type tarSet struct {
	dst      string      // the absolute directory, or the s3:// URL
	absolute bool        // --absolute
	s3       *s3.Backend // the destination's bucket, for a destination in S3
	loc      s3.Location
	s3c      *s3Config
}

func newTarSet(ctx context.Context, dst string, absolute bool, s3c *s3Config) (*tarSet, error) {
	t := &tarSet{absolute: absolute, s3c: s3c}
	if !s3.IsURL(dst) {
		abs, err := filepath.Abs(dst)
		t.dst = abs
		return t, err
	}
	loc, err := s3.ParseURL(dst)
	if err != nil {
		return nil, err
	}
	if t.s3, err = openS3(ctx, loc.String(), s3c, zap.NewNop()); err != nil {
		return nil, err
	}
	t.dst, t.loc = loc.String(), loc
	return t, nil
}

func (t *tarSet) close() {
	if t.s3 != nil {
		t.s3.Close()
	}
}

// sources lists the tars that args name, in order, each once.
func (t *tarSet) sources(ctx context.Context, args []string) ([]tarindex.Source, error) {
	var srcs []tarindex.Source
	seen := map[string]bool{}
	for _, arg := range args {
		paths, err := expandBraces(arg)
		if err != nil {
			return nil, err
		}
		for _, p := range paths {
			var found []tarindex.Source
			if s3.IsURL(p) != (t.s3 != nil) {
				return nil, fmt.Errorf("%s and the destination %s: tars in S3 take an index in S3 (in their bucket), local tars a local index", p, t.dst)
			}
			if t.s3 != nil {
				found, err = t.objects(ctx, p)
			} else {
				found, err = t.files(p)
			}
			if err != nil {
				return nil, err
			}
			for _, s := range found {
				if seen[s.Label] {
					return nil, fmt.Errorf("%s is given twice", s.Label)
				}
				seen[s.Label] = true
				srcs = append(srcs, s)
			}
		}
	}
	return srcs, nil
}

// files lists the local tar p, or every *.tar under directory p in path order.
func (t *tarSet) files(p string) ([]tarindex.Source, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		if compressedName(p) {
			return nil, fmt.Errorf("%s: %w", p, tar.ErrCompressed)
		}
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("%s is not a regular file", p)
		}
		s, err := t.file(p, fi)
		return []tarindex.Source{s}, err
	}
	var srcs []tarindex.Source
	err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir():
			return nil
		case compressedName(path):
			return fmt.Errorf("%s: %w", path, tar.ErrCompressed)
		case !strings.HasSuffix(path, ".tar") || !d.Type().IsRegular():
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		s, err := t.file(path, fi)
		srcs = append(srcs, s)
		return err
	})
	if err == nil && len(srcs) == 0 {
		err = fmt.Errorf("%s holds no .tar files", p)
	}
	return srcs, err
}

// file describes the local tar at path.
func (t *tarSet) file(path string, fi os.FileInfo) (tarindex.Source, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return tarindex.Source{}, err
	}
	name := abs
	if !t.absolute {
		if name, err = filepath.Rel(t.dst, abs); err != nil {
			return tarindex.Source{}, err
		}
	}
	return tarindex.Source{Name: name, Label: abs, Size: fi.Size(), MTime: fi.ModTime().UnixNano(),
		Version: strconv.FormatInt(fi.ModTime().UnixNano(), 10),
		Open:    func(context.Context) (io.ReadCloser, error) { return os.Open(abs) }}, nil
}

// objects lists the tar object p, or every *.tar under p when it ends in "/" or names no
// object.
func (t *tarSet) objects(ctx context.Context, p string) ([]tarindex.Source, error) {
	loc, err := s3.ParseURL(p)
	if err != nil {
		return nil, err
	}
	if loc.Bucket != t.loc.Bucket {
		return nil, fmt.Errorf("%s is in bucket %s, the index in %s: an index names tars in its own bucket", p, loc.Bucket, t.loc.Bucket)
	}
	if compressedName(loc.Prefix) {
		return nil, fmt.Errorf("%s: %w", p, tar.ErrCompressed)
	}
	if !strings.HasSuffix(p, "/") && loc.Prefix != "" {
		obj, err := t.s3.Stat(ctx, loc.Prefix)
		if err == nil {
			return []tarindex.Source{t.object(obj)}, nil
		}
	}
	be, err := openS3(ctx, loc.String(), t.s3c, zap.NewNop())
	if err != nil {
		return nil, err
	}
	defer be.Close()
	objs, err := be.List(ctx)
	if err != nil {
		return nil, err
	}
	var srcs []tarindex.Source
	for _, o := range objs {
		switch {
		case compressedName(o.Key):
			return nil, fmt.Errorf("s3://%s/%s: %w", loc.Bucket, o.Key, tar.ErrCompressed)
		case strings.HasSuffix(o.Key, ".tar"):
			srcs = append(srcs, t.object(o))
		}
	}
	if len(srcs) == 0 {
		return nil, fmt.Errorf("%s names no object and holds no .tar objects", p)
	}
	return srcs, nil
}

// object describes the tar object o of the destination's bucket.
func (t *tarSet) object(o s3.Object) tarindex.Source {
	name := "/" + o.Key
	if !t.absolute {
		name, _ = filepath.Rel("/"+t.loc.Prefix, name) // both absolute: no error
	}
	return tarindex.Source{Name: name, Label: "s3://" + t.loc.Bucket + "/" + o.Key, Size: o.Size, MTime: o.MTime.UnixNano(),
		Version: o.ETag,
		Open:    func(ctx context.Context) (io.ReadCloser, error) { return t.s3.OpenObject(ctx, o.Key, o.ETag) }}
}

// write stores the index at the destination, atomically: a previous index stays valid until
// the new one replaces it.
func (t *tarSet) write(ctx context.Context, index []byte, force bool) error {
	if t.s3 != nil {
		return t.s3.PutIndex(ctx, index, force)
	}
	if err := os.MkdirAll(t.dst, 0o755); err != nil {
		return fmt.Errorf("create destination: %w", err)
	}
	// Checked by name, not by loading the old index (73 MB for 1.28 M members: a tenth of an
	// index run).
	_, err := os.Stat(filepath.Join(t.dst, layout.IndexName))
	switch {
	case err == nil && !force:
		return fmt.Errorf("%s already holds a shard set; use --force to replace its index", t.dst)
	case err == nil:
		if _, err := os.Stat(filepath.Join(t.dst, layout.ShardName(0))); err == nil {
			return fmt.Errorf("%s holds a packed shard set; write the index somewhere else", t.dst)
		}
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	return pack.WriteIndexFile(t.dst, index)
}

// expandBraces expands the brace patterns of s as a shell does and WebDataset writes them:
// {000000..000146} (numbers, zero-padded to the width of the first when it has a leading 0 or
// both have one width) and {a,b,c}; several groups multiply, and a group may hold groups.
func expandBraces(s string) ([]string, error) {
	open := strings.IndexByte(s, '{')
	if open < 0 {
		if strings.IndexByte(s, '}') >= 0 {
			return nil, fmt.Errorf("%q: a '}' without its '{'", s)
		}
		return []string{s}, nil
	}
	depth, end := 0, -1
	for i := open; i < len(s) && end < 0; i++ {
		switch s[i] {
		case '{':
			depth++
		case '}':
			if depth--; depth == 0 {
				end = i
			}
		}
	}
	if end < 0 {
		return nil, fmt.Errorf("%q: a '{' without its '}'", s)
	}
	items, err := braceItems(s[open+1 : end])
	if err != nil {
		return nil, fmt.Errorf("%q: %w", s, err)
	}
	var out []string
	for _, item := range items {
		more, err := expandBraces(s[:open] + item + s[end+1:])
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	return out, nil
}

// braceItems returns the alternatives of one brace group's body: a numeric range or a list
// split at its top-level commas.
func braceItems(body string) ([]string, error) {
	if lo, hi, ok := strings.Cut(body, ".."); ok {
		a, errA := strconv.ParseUint(lo, 10, 63)
		b, errB := strconv.ParseUint(hi, 10, 63)
		if errA == nil && errB == nil {
			if b < a || b-a >= 10_000_000 {
				return nil, fmt.Errorf("the range {%s} is empty or too long", body)
			}
			width := 0
			if len(lo) > 1 && lo[0] == '0' || len(lo) == len(hi) {
				width = len(lo)
			}
			items := make([]string, 0, b-a+1)
			for n := a; n <= b; n++ {
				items = append(items, fmt.Sprintf("%0*d", width, n))
			}
			return items, nil
		}
	}
	var items []string
	depth, start := 0, 0
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '{':
			depth++
		case '}':
			depth--
		case ',':
			if depth == 0 {
				items = append(items, body[start:i])
				start = i + 1
			}
		}
	}
	items = append(items, body[start:])
	if len(items) < 2 {
		return nil, fmt.Errorf("{%s} is neither a range {A..B} nor a list {a,b}", body)
	}
	return items, nil
}
