package tarindex

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/aifs/aifs/layout"
)

// LabelOptions configure the image-folder view of IndexTars (ViewImageFolder), in which each
// WebDataset sample becomes the file CLASS/KEY.EXT of its image, so that torchvision's
// ImageFolder reads the tars as a class tree.
//
// Members are grouped into samples as WebDataset groups them: consecutive members with the same
// key, the key being a member's directory part plus its base name up to the first dot
// ("a/b.c.jpg" is key "a/b", extension "c.jpg"); extensions are compared lowercased; top-level
// members named __*__ are not samples. A key made of a path keeps it: CLASS/a/b.jpg.
type LabelOptions struct {
	// ImageExts are the extensions of a sample's image member in order of preference,
	// lowercase. Default jpg, jpeg, png, webp.
	ImageExts []string
	// JSONKey, if set, takes a sample's class from this field of its .json member (a number or
	// a string) instead of its .cls member. Default: the .cls member's text.
	JSONKey string
	// ByKey, if set, gives each sample's class by its key, instead of its members.
	ByKey map[string]string
	// ClassNames, if set, names the directory of class number i ClassNames[i]; labels must then
	// be numbers below len(ClassNames). Default: the label itself, numbers zero-padded to one
	// width so that sorted order (ImageFolder's class order) is numeric order.
	ClassNames []string
}

// DefaultImageExts are LabelOptions.ImageExts by default.
var DefaultImageExts = []string{"jpg", "jpeg", "png", "webp"}

// isLabel reports whether the member at path p holds a label the options read.
func (o LabelOptions) isLabel(p string) bool {
	if o.ByKey != nil {
		return false
	}
	_, ext, ok := splitKey(p)
	ext = strings.ToLower(ext)
	return ok && (o.JSONKey == "" && ext == "cls" || o.JSONKey != "" && ext == "json")
}

// splitKey splits a member's path into WebDataset's key and extension; ok is false for a base
// name with no dot after its first byte (WebDataset skips those members).
func splitKey(p string) (key, ext string, ok bool) {
	base := p[strings.LastIndexByte(p, '/')+1:]
	i := strings.IndexByte(base, '.')
	if i < 1 {
		return "", "", false
	}
	return p[:len(p)-len(base)+i], base[i+1:], true
}

// sample is one WebDataset sample of the image-folder view that has an image and a label.
type sample struct {
	key, ext string // the image's extension as stored
	image    treeMember
	shard    uint32
	label    string
}

// leftOut warns of the first few samples of one kind left out of the view; the counts are in
// Result.
type leftOut struct {
	what string
	n    *int
	warn func(string)
}

func (l leftOut) add(label, key string) {
	if *l.n++; *l.n <= 5 {
		l.warn(fmt.Sprintf("%s: sample %q has %s; left out of the image-folder view", label, key, l.what))
	}
}

// imageFolder builds ViewImageFolder: it gathers the samples of each scan as it comes, and
// places them once all are known (a numeric class's width depends on them all).
type imageFolder struct {
	ix                      *indexer
	o                       LabelOptions
	samples                 []sample
	noKey, noImage, noLabel leftOut
}

func newImageFolder(ix *indexer, b *treeBuilder) *imageFolder {
	o := ix.opt.Labels
	if len(o.ImageExts) == 0 {
		o.ImageExts = DefaultImageExts
	}
	return &imageFolder{ix: ix, o: o,
		noKey:   leftOut{"a member name without an extension", &b.res.NoKey, ix.opt.Warn},
		noImage: leftOut{"no image (" + strings.Join(o.ImageExts, ", ") + ")", &b.res.NoImage, ix.opt.Warn},
		noLabel: leftOut{"no label", &b.res.NoLabel, ix.opt.Warn}}
}

// add groups the members of tar i into samples and keeps those with an image and a label.
func (v *imageFolder) add(_ *treeBuilder, i int, sc *tarScan) error {
	label := v.ix.srcs[i].Label
	var key string
	var group []treeMember
	flush := func() {
		if group == nil {
			return
		}
		s, ok := v.o.sample(key, group, uint32(i))
		switch {
		case !ok:
			v.noImage.add(label, key)
		case s.label == "":
			v.noLabel.add(label, key)
		default:
			v.samples = append(v.samples, s)
		}
		group = nil
	}
	for _, e := range sc.entries {
		if e.dir || !strings.Contains(e.path, "/") && strings.HasPrefix(e.path, "__") && strings.HasSuffix(e.path, "__") {
			continue
		}
		k, _, ok := splitKey(e.path)
		if !ok {
			v.noKey.add(label, e.path)
			continue
		}
		if k != key {
			flush()
			key = k
		}
		group = append(group, e)
	}
	flush()
	return nil
}

// finish names the classes and places every sample kept.
func (v *imageFolder) finish(b *treeBuilder) error {
	o, ix, samples, noLabel := v.o, v.ix, v.samples, v.noLabel
	names, err := o.classNames(samples)
	if err != nil {
		return err
	}
	classes := map[string]bool{}
	for _, s := range samples {
		class, ok := names[s.label]
		if !ok {
			noClass := noLabel
			noClass.what = fmt.Sprintf("the label %q, which names no class", s.label)
			if o.ClassNames != nil {
				noClass.what += fmt.Sprintf(" (want a number below %d)", len(o.ClassNames))
			}
			noClass.add(ix.srcs[s.shard].Label, s.key)
			continue
		}
		e := s.image
		e.path = class + "/" + s.key + "." + s.ext
		b.put(b.root, e, s.shard)
		classes[class] = true
		b.res.Samples++
	}
	b.res.Classes = len(classes)
	return nil
}

// sample picks the image and label of the members of one sample; ok is false without an
// image. The label is "" when the sample has none.
func (o LabelOptions) sample(key string, group []treeMember, shard uint32) (sample, bool) {
	s := sample{key: key, shard: shard}
	found := false
	for _, want := range o.ImageExts {
		for _, e := range group {
			if _, ext, _ := splitKey(e.path); strings.ToLower(ext) == want {
				s.image, s.ext, found = e, ext, true // the last of an extension wins
			}
		}
		if found {
			break
		}
	}
	switch {
	case o.ByKey != nil:
		s.label = o.ByKey[key]
	default:
		for _, e := range group {
			if e.data != nil {
				s.label = o.parseLabel(e.data)
			}
		}
	}
	return s, found
}

// parseLabel returns the label a .cls or .json member holds, or "".
func (o LabelOptions) parseLabel(data []byte) string {
	if o.JSONKey == "" {
		return strings.TrimSpace(string(data))
	}
	var m map[string]any
	if json.Unmarshal(data, &m) != nil {
		return ""
	}
	switch v := m[o.JSONKey].(type) {
	case float64:
		if v == float64(int64(v)) {
			return strconv.FormatInt(int64(v), 10)
		}
	case string:
		return strings.TrimSpace(v)
	}
	return ""
}

// classNames maps each sample's label to its class directory's name. Labels that cannot name
// one (a number outside ClassNames, a name that cannot be a directory) are left out.
func (o LabelOptions) classNames(samples []sample) (map[string]string, error) {
	names := map[string]string{}
	numeric, widest := true, 0
	for _, s := range samples {
		if _, err := strconv.ParseUint(s.label, 10, 31); err != nil {
			numeric = false
		}
		widest = max(widest, len(strings.TrimLeft(s.label, "0")))
	}
	for _, s := range samples {
		if _, ok := names[s.label]; ok {
			continue
		}
		n, err := strconv.ParseUint(s.label, 10, 31)
		switch {
		case o.ClassNames != nil && (err != nil || n >= uint64(len(o.ClassNames))):
			continue
		case o.ClassNames != nil:
			if !layout.ValidName([]byte(o.ClassNames[n])) {
				return nil, fmt.Errorf("class name %q (class %d) cannot name a directory", o.ClassNames[n], n)
			}
			names[s.label] = o.ClassNames[n]
		case numeric:
			names[s.label] = fmt.Sprintf("%0*d", max(widest, 1), n)
		case layout.ValidName([]byte(s.label)):
			names[s.label] = s.label
		}
	}
	return names, nil
}

// viewBuilder builds a view's tree from the tars' scans, given in the order of srcs.
type viewBuilder interface {
	add(b *treeBuilder, i int, sc *tarScan) error
	finish(b *treeBuilder) error
}

// treeView builds ViewTree and ViewMerge: each scan's members placed as they come.
type treeView struct {
	ix   *indexer
	tops map[string]int // ViewTree: the tar that has each top directory
}

func (v *treeView) add(b *treeBuilder, i int, sc *tarScan) error {
	top, src := b.root, v.ix.srcs[i]
	b.mtime = src.MTime
	if v.ix.opt.View == ViewTree {
		name := tarDirName(src.Name)
		if j, ok := v.tops[name]; ok {
			return fmt.Errorf("%s and %s would both be the directory %q; rename one, or use --merge", v.ix.srcs[j].Label, src.Label, name)
		}
		v.tops[name] = i
		top = b.dir(b.root, name)
	}
	for _, e := range sc.entries {
		b.put(top, e, uint32(i))
	}
	return nil
}

func (v *treeView) finish(*treeBuilder) error { return nil }

// tarDirName is the directory a tar's members go under in ViewTree: its base name less ".tar".
func tarDirName(name string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	if n := strings.TrimSuffix(name, ".tar"); n != "" {
		return n
	}
	return name
}
