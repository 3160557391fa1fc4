package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/aifs/aifs/internal/human"
	"github.com/aifs/aifs/layout"
	"github.com/aifs/aifs/layout/hfarrow"
	"github.com/aifs/aifs/layout/hfindex"
	"github.com/aifs/aifs/layout/tar"
	"github.com/aifs/aifs/layout/tarindex"
	"github.com/aifs/aifs/layout/tfrecord"
	"github.com/aifs/aifs/layout/tfrecordindex"
	"github.com/aifs/aifs/layout/view"
	"github.com/aifs/aifs/layout/zipindex"
)

func runIndex(ctx context.Context, args []string) int {
	fs := newFlags("index", "[flags] SOURCE... DST", `
Indexes existing tar files (WebDataset shards, or any uncompressed tar), ZIP files, Hugging Face
Arrow/Parquet files or TFRecord files where they lie, writing only DST/index.aifs: a shard set
whose samples are the members' bytes inside them, which mount, ls and verify take like any
other. SOURCE is a file, a directory (every *.tar, *.zip, *.arrow, *.parquet and *.tfrecord(s)
under it, in path order; with --format, that format's), a brace pattern as WebDataset
writes them ('shards/train-{000000..000146}.tar', quoted; also {a,b}), or the same in S3
(s3://BUCKET/KEY, s3://BUCKET/PREFIX/ for every file under it). DST is a directory (created if
missing; it may hold the sources) or s3://BUCKET/PREFIX in the sources' bucket. The index names
each source by its path relative to DST (--absolute: from the root), records its size and mtime
(S3: ETag), and the mount refuses a source changed since, by name. The format is each file's by
its first bytes (ZIP, Parquet or Arrow, TFRecord, else tar), all alike, unless --format says it.

Tar formats: ustar, GNU, PAX and v7, as GNU tar, bsdtar, Python's tarfile and webdataset write
them. Regular files become samples; hard links share their target's bytes; directories are kept
and implied; symlinks, devices, FIFOs and sparse members are skipped with a warning. A member
name with a ".." component fails the index. When several members take one path, the last one
(in tar order, then in SOURCE order) wins, as tar -x leaves it. Compressed tars (.tar.gz,
.tar.zst, ...) cannot be read in place: decompress them, or extract them and use aifs pack.

ZIP (ZIP64 and data descriptors included): members stored without compression (zip -0) become
samples; deflated and encrypted members are refused, counted and named, never served: re-create
the ZIP with zip -0 (or extract it and use aifs pack). Only the central directory and the local
headers are read; each sample's checksum is the central directory's CRC-32. Duplicate names and
".." are handled as for tars (the last in central directory order wins).

Hugging Face (hf): Arrow IPC stream files (load_dataset's cache, save_to_disk), Arrow IPC files,
and Parquet written by datasets >= 4.6; the image column (--image-column, default the first Image
feature) and the label column (--label-column, default the first ClassLabel). Compressed Arrow
bodies and compressed or dictionary-encoded Parquet image pages are refused: index the Arrow
cache of load_dataset instead, or rewrite with datasets >= 4.6. TFRecord: uncompressed files of
tf.train.Example records (ImageNet script keys image/encoded, image/class/label, ..., or TFDS's);
GZIP/ZLIB files are refused. For both, rows (records) with no image, or (imagefolder) no label,
are counted, named in the summary and never served; "tree" shows each file's rows as
FILE/ROW.EXT (EXT from the image's magic: jpg, png, webp, bin), "imagefolder" CLASS/NAME with
CLASS the synset (TFRecord) or the label as stored, zero-padded (ImageNet's 1..1000 give
0001..1000), or --class-names, or for hf --schema-class-names (sanitized: '/' and NUL to '_',
the label as prefix where names repeat); NAME is the image's file name, else FILE-ROW.EXT.

Views (--view): "tree" puts each file's members under a directory named after it (less ".tar"
or ".zip"), or all in one tree with --merge. "imagefolder" makes CLASS/FILE files for
torchvision's ImageFolder. For tars: WebDataset samples (members grouped by key: the directory
part and the base name up to its first dot) become CLASS/KEY.EXT files of their image, the class
from the sample's .cls member, or --label-key's field of its .json member, or --labels. For
ZIPs: image members (--image-ext) whose paths are CLASS/FILE keep them, class named as in the
ZIP; members of a flat ZIP take their class from --labels (by key, as for tars). Numeric labels
(--labels, .cls) name class directories zero-padded so that sorted order is numeric order, or
by --class-names. Samples without an image or a label are counted and reported.

For tars every byte is read once (several tars in parallel) to record each member's CRC32C and
each tar's, unless --no-checksums (headers only; verify=on and aifs verify then refuse the set;
for ZIPs it leaves the CRC-32s out; for hf and TFRecord, the images' CRC32Cs). The index is written last and atomically, and the same
sources and flags always give the same index.`+s3Help)
	formatName := fs.String("format", "", "the sources' format: tar, zip, hf or tfrecord (default: each file's, from its first bytes)")
	viewName := fs.String("view", "tree", "the tree the mount shows: tree or imagefolder")
	merge := fs.Bool("merge", false, "view tree: merge the members of all files into one tree instead of a directory per file")
	noChecksums := fs.Bool("no-checksums", false, "tars: read only the headers: faster, but nothing can verify the samples later; ZIPs: leave out the CRC-32s; hf, tfrecord: compute no CRC32Cs")
	jobs := fs.Int("jobs", 4, "files read in parallel")
	force := fs.Bool("force", false, "replace an index already at DST (never one of a packed shard set)")
	absolute := fs.Bool("absolute", false, "name the files in the index by absolute path (S3: key from the bucket's root) instead of relative to DST")
	quiet := fs.Bool("quiet", false, "print no progress bar and no summary")
	imageExt := fs.String("image-ext", strings.Join(tarindex.DefaultImageExts, ","), "view imagefolder, tars and ZIPs: extensions of a sample's image member, in order of preference")
	labelKey := fs.String("label-key", "", "view imagefolder, tars: take the class from this field of the sample's .json member (default: its .cls member)")
	labels := fs.String("labels", "", "view imagefolder: take the class from this file of lines 'KEY CLASS' (the class is the last field)")
	classNames := fs.String("class-names", "", "view imagefolder: name class directories from this file, line i naming class number i")
	imageColumn := fs.String("image-column", "", "hf: the image column (default: the first Image feature)")
	labelColumn := fs.String("label-column", "", "hf: the label column (default: the first ClassLabel feature)")
	schemaClassNames := fs.Bool("schema-class-names", false, "hf, view imagefolder: name class directories by the schema's class names, sanitized ('/' and NUL to '_', LABEL- prefix where names repeat)")
	var s3c s3Config
	s3c.register(fs)
	pos, code, ok := parseArgs(fs, args, 2, -1)
	if !ok {
		return code
	}
	if *jobs < 1 {
		return usageError(fs, "--jobs must be at least 1")
	}
	if os.Getenv("GOGC") == "" {
		// An index's heap is almost all live (the tree it builds), and each collection marks
		// all of it again: collected at 3 times its live bytes, not 2, it is marked half as
		// often, for 10-15% more RSS (docs/bench/formats-notes.md#the-collector).
		debug.SetGCPercent(200)
	}
	want := format(*formatName)
	switch want {
	case "", formatTar, formatZip, formatHF, formatTFRecord:
	default:
		return usageError(fs, fmt.Sprintf("--format %q: want tar, zip, hf or tfrecord", *formatName))
	}
	var kind view.Kind
	switch {
	case *viewName == "tree" && *merge:
		kind = view.Merge
	case *viewName == "tree":
		kind = view.Tree
	case *viewName == "imagefolder" && !*merge:
		kind = view.ImageFolder
	default:
		return usageError(fs, fmt.Sprintf("--view %q: want tree or imagefolder (--merge only with tree)", *viewName))
	}
	if kind != view.ImageFolder && (*labelKey != "" || *labels != "" || *classNames != "") {
		return usageError(fs, "--label-key, --labels and --class-names are for --view imagefolder")
	}
	if *labelKey != "" && *labels != "" {
		return usageError(fs, "--label-key and --labels are two sources of labels: give one")
	}
	var l labelFlags
	for e := range strings.SplitSeq(*imageExt, ",") {
		if e = strings.ToLower(strings.TrimPrefix(strings.TrimSpace(e), ".")); e != "" {
			l.imageExts = append(l.imageExts, e)
		}
	}
	var err error
	if *labels != "" {
		if l.byKey, err = readLabels(*labels); err != nil {
			return fail("index", err)
		}
	}
	if *classNames != "" {
		if l.classNames, err = readClassNames(*classNames); err != nil {
			return fail("index", err)
		}
	}
	dst := pos[len(pos)-1]
	t, err := newSourceSet(ctx, dst, *absolute, &s3c)
	if err != nil {
		return fail("index", err)
	}
	defer t.close()
	found, err := t.sources(ctx, pos[:len(pos)-1], want, *jobs)
	if err != nil {
		return fail("index", compressedHint(err))
	}
	var bar *progressBar
	if !*quiet && isTerminal(os.Stderr) {
		bar = newProgressBar(os.Stderr)
	}
	warn := func(msg string) { fmt.Fprintf(os.Stderr, "aifs index: warning: %s\n", human.Name(msg)) }
	var index []byte
	var summary func()
	f := found[0].format
	switch {
	case f != formatTar && *labelKey != "":
		return usageError(fs, "--label-key is for tars (a WebDataset sample's .json member)")
	case (f == formatHF || f == formatTFRecord) && *labels != "":
		return usageError(fs, "--labels is for tars and ZIPs: the "+string(f)+" rows carry their labels")
	case f != formatHF && (*imageColumn != "" || *labelColumn != "" || *schemaClassNames):
		return usageError(fs, "--image-column, --label-column and --schema-class-names are for --format hf")
	case *schemaClassNames && *classNames != "":
		return usageError(fs, "--schema-class-names and --class-names are two sources of class names: give one")
	case (f == formatHF || f == formatTFRecord) && kind == view.Merge:
		return usageError(fs, "--merge: "+string(f)+" rows have no names of their own to merge by")
	}
	switch f {
	case formatZip:
		index, summary, err = indexZips(ctx, t, found, zipindex.Options{View: kind, NoChecksums: *noChecksums, Jobs: *jobs,
			ImageExts: l.imageExts, ByKey: l.byKey, ClassNames: l.classNames, Warn: warn}, bar)
	case formatTFRecord:
		index, summary, err = indexTFRecords(ctx, t, found, tfrecordindex.Options{View: kind, NoChecksums: *noChecksums, Jobs: *jobs,
			ClassNames: l.classNames, Warn: warn}, bar)
	case formatHF:
		index, summary, err = indexHF(ctx, t, found, hfindex.Options{View: kind, NoChecksums: *noChecksums, Jobs: *jobs,
			ImageColumn: *imageColumn, LabelColumn: *labelColumn, SchemaClassNames: *schemaClassNames, ClassNames: l.classNames, Warn: warn}, bar)
	default:
		opt := tarindex.Options{View: kind, NoChecksums: *noChecksums, Jobs: *jobs, Warn: warn,
			Labels: tarindex.LabelOptions{ImageExts: l.imageExts, JSONKey: *labelKey, ByKey: l.byKey, ClassNames: l.classNames}}
		index, summary, err = indexTars(ctx, t, found, opt, bar)
	}
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
		summary()
	}
	return exitOK
}

// labelFlags are the flags of --view imagefolder that every format takes.
type labelFlags struct {
	imageExts  []string
	byKey      map[string]string
	classNames []string
}

// sources returns the inputs of the files found, each opened by open.
func sources[F io.Closer](found []listed, open func(listed) func(context.Context) (F, error)) []view.Input[F] {
	srcs := make([]view.Input[F], len(found))
	for i, s := range found {
		srcs[i] = view.Input[F]{Name: s.name, Label: s.label, Size: s.size, MTime: s.mtime, Version: s.version, Open: open(s)}
	}
	return srcs
}

// barProgress returns the progress function that draws bar, counting files as unit ("tars",
// "ZIPs"), or nil with no bar.
func barProgress(bar *progressBar, unit string) func(view.Progress) {
	if bar == nil {
		return nil
	}
	return func(p view.Progress) {
		bar.update(p.Bytes, p.TotalBytes, fmt.Sprintf("%d/%d %s", p.Files, p.TotalFiles, unit))
	}
}

// indexTars indexes the tars found, and returns the index and a function printing its summary.
func indexTars(ctx context.Context, t *sourceSet, found []listed, opt tarindex.Options, bar *progressBar) ([]byte, func(), error) {
	opt.Progress = barProgress(bar, "tars")
	index, res, err := tarindex.IndexTars(ctx, sources(found, t.openStream), opt)
	return index, func() { printIndexSummary(res, len(index), opt) }, err
}

// indexZips indexes the ZIPs found, and returns the index and a function printing its summary.
func indexZips(ctx context.Context, t *sourceSet, found []listed, opt zipindex.Options, bar *progressBar) ([]byte, func(), error) {
	opt.Progress = barProgress(bar, "ZIPs")
	index, res, err := zipindex.IndexZips(ctx, sources(found, t.openFile), opt)
	return index, func() { printZipSummary(res, len(index), opt) }, err
}

// indexTFRecords indexes the TFRecord files found, and returns the index and a function printing
// its summary.
func indexTFRecords(ctx context.Context, t *sourceSet, found []listed, opt tfrecordindex.Options, bar *progressBar) ([]byte, func(), error) {
	opt.Progress = barProgress(bar, "TFRecord files")
	index, res, err := tfrecordindex.IndexTFRecords(ctx, sources(found, t.openStream), opt)
	return index, func() {
		printRowsSummary(res.RowResult, rowsHead{res.Files, res.FileBytes, "TFRecord files", res.Records, "records", res.Duration.Seconds()},
			len(index), opt.View, opt.NoChecksums)
	}, err
}

// indexHF indexes the Hugging Face files found, and returns the index and a function printing
// its summary.
func indexHF(ctx context.Context, t *sourceSet, found []listed, opt hfindex.Options, bar *progressBar) ([]byte, func(), error) {
	opt.Progress = barProgress(bar, "files")
	index, res, err := hfindex.IndexHF(ctx, sources(found, t.openFile), opt)
	return index, func() {
		what := fmt.Sprintf("%s files, image column %q, label column %q", res.Format, res.ImageColumn, res.LabelColumn)
		printRowsSummary(res.RowResult, rowsHead{res.Files, res.FileBytes, what, res.Rows, "rows", res.Duration.Seconds()},
			len(index), opt.View, opt.NoChecksums)
	}, err
}

// rowsHead is the first line of the summary of a format of rows (TFRecord, Hugging Face).
type rowsHead struct {
	files     int
	fileBytes int64
	what      string // the files
	rows      int64
	unit      string // what a row is called: records, rows
	secs      float64
}

func printRowsSummary(r view.RowResult, h rowsHead, indexBytes int, kind view.Kind, noChecksums bool) {
	sums := "with checksums"
	if noChecksums {
		sums = "no checksums"
	}
	fmt.Printf("indexed %d %s (%s, %d %s) in %.2f s (%s/s, %s): %d files, %d directories, %s; index %s\n",
		h.files, h.what, human.Bytes(h.fileBytes), h.rows, h.unit, h.secs, human.Bytes(int64(float64(h.fileBytes)/max(h.secs, 1e-9))), sums,
		r.Samples, r.Dirs, human.Bytes(r.Bytes), human.Bytes(int64(indexBytes)))
	if kind == view.ImageFolder {
		fmt.Printf("image-folder view: %d samples in %d classes\n", r.Samples, r.Classes)
	}
	if left := r.NoImage + r.NoLabel; left > 0 {
		fmt.Printf("  %d %s left out, never served: %d with no image, %d with no usable label:\n", left, h.unit, r.NoImage, r.NoLabel)
		for _, n := range r.FirstMissing {
			fmt.Printf("    %s\n", human.Name(n))
		}
		if more := left - int64(len(r.FirstMissing)); more > 0 {
			fmt.Printf("    and %d more\n", more)
		}
	}
	if r.Replaced > 0 {
		fmt.Printf("  %d files replaced by a later one of the same path (the last one wins)\n", r.Replaced)
	}
}

// compressedHint adds what to do to an error about a compressed tar, found by its name (sources)
// or by its bytes (IndexTars).
func compressedHint(err error) error {
	if errors.Is(err, tfrecord.ErrCompressed) {
		return fmt.Errorf("%w; aifs reads uncompressed TFRecord files in place: rewrite it uncompressed (tf.io.TFRecordWriter with no compression), or extract its images and use aifs pack", err)
	}
	if errors.Is(err, hfarrow.ErrRefused) {
		return fmt.Errorf("%w (for a Hub dataset: index the Arrow files that load_dataset leaves in its cache, or rewrite the Parquet with datasets >= 4.6)", err)
	}
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

func printZipSummary(res zipindex.Result, indexBytes int, opt zipindex.Options) {
	secs := res.Duration.Seconds()
	sums := "CRC-32s of the central directories"
	if opt.NoChecksums {
		sums = "no checksums"
	}
	fmt.Printf("indexed %d ZIPs (%s, %d members) in %.2f s (%s/s, %s): %d files, %d directories, %s; index %s\n",
		res.Zips, human.Bytes(res.ZipBytes), res.Members, secs, human.Bytes(int64(float64(res.ZipBytes)/max(secs, 1e-9))), sums,
		res.Files, res.Dirs, human.Bytes(res.Bytes), human.Bytes(int64(indexBytes)))
	if opt.View == view.ImageFolder {
		fmt.Printf("image-folder view: %d samples in %d classes\n", res.Samples, res.Classes)
	}
	if res.Refused > 0 {
		fmt.Printf("  %d members refused, never served: compressed or encrypted (re-create the ZIP with zip -0, or extract it and use aifs pack):\n", res.Refused)
		for _, n := range res.FirstRefused {
			fmt.Printf("    %s\n", human.Name(n))
		}
		if more := res.Refused - len(res.FirstRefused); more > 0 {
			fmt.Printf("    and %d more\n", more)
		}
	}
	for _, c := range []struct {
		n    int
		what string
	}{
		{res.Skipped, "members skipped (symlinks, devices, FIFOs; the first named above)"},
		{res.Replaced, "files replaced by a later member of the same path (the last one wins)"},
		{res.NoImage, "members left out: not an image (" + strings.Join(opt.ImageExts, ", ") + ")"},
		{res.NoLabel, "members left out: no class (a member at the top of the ZIP, no usable label in --labels)"},
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
