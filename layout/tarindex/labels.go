package tarindex

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/aifs/aifs/layout/view"
)

// LabelOptions configure the image-folder view of IndexTars (view.ImageFolder), in which each
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
	// be numbers below len(ClassNames) (view.Options.ClassNames). Default: the label itself,
	// numbers zero-padded to one width so that sorted order (ImageFolder's class order) is
	// numeric order.
	ClassNames []string
}

// DefaultImageExts are LabelOptions.ImageExts by default.
var DefaultImageExts = []string{"jpg", "jpeg", "png", "webp"}

// isLabel reports whether the member at path p holds a label the options read.
func (o LabelOptions) isLabel(p string) bool {
	if o.ByKey != nil {
		return false
	}
	_, ext, ok := view.SplitKey(p)
	ext = strings.ToLower(ext)
	return ok && (o.JSONKey == "" && ext == "cls" || o.JSONKey != "" && ext == "json")
}

// sample is one WebDataset sample of the image-folder view that has an image and a label.
type sample struct {
	key, ext string // the image's extension as stored
	image    treeMember
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

// samples groups the members of each tar into WebDataset samples for view.ImageFolder, which
// names the classes and places them.
type samples struct {
	ix                      *indexer
	o                       LabelOptions
	noKey, noImage, noLabel leftOut
}

func newSamples(ix *indexer, res *Result) *samples {
	o := ix.opt.Labels
	if len(o.ImageExts) == 0 {
		o.ImageExts = DefaultImageExts
	}
	return &samples{ix: ix, o: o,
		noKey:   leftOut{"a member name without an extension", &res.NoKey, ix.opt.Warn},
		noImage: leftOut{"no image (" + strings.Join(o.ImageExts, ", ") + ")", &res.NoImage, ix.opt.Warn},
		noLabel: leftOut{"no label", &res.NoLabel, ix.opt.Warn}}
}

// add groups the members of tar i into samples and appends to recs the image of each that has
// an image and a label, as KEY.EXT labelled.
func (v *samples) add(recs []view.Record, i int, sc *tarScan) []view.Record {
	label := v.ix.srcs[i].Label
	var key string
	var group []treeMember
	flush := func() {
		if group == nil {
			return
		}
		s, ok := v.o.sample(key, group)
		switch {
		case !ok:
			v.noImage.add(label, key)
		case s.label == "":
			v.noLabel.add(label, key)
		default:
			r := s.image.Record
			r.Path, r.Label = s.key+"."+s.ext, s.label
			recs = append(recs, r)
		}
		group = nil
	}
	for _, e := range sc.entries {
		if e.Dir || !strings.Contains(e.Path, "/") && strings.HasPrefix(e.Path, "__") && strings.HasSuffix(e.Path, "__") {
			continue
		}
		k, _, ok := view.SplitKey(e.Path)
		if !ok {
			v.noKey.add(label, e.Path)
			continue
		}
		if k != key {
			flush()
			key = k
		}
		group = append(group, e)
	}
	flush()
	return recs
}

// sample picks the image and label of the members of one sample; ok is false without an
// image. The label is "" when the sample has none.
func (o LabelOptions) sample(key string, group []treeMember) (sample, bool) {
	s := sample{key: key}
	found := false
	for _, want := range o.ImageExts {
		for _, e := range group {
			if _, ext, _ := view.SplitKey(e.Path); strings.ToLower(ext) == want {
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
