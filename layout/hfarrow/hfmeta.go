package hfarrow

import (
	"encoding/json"
	"fmt"
	"slices"
)

// hfKey is the schema metadata key under which `datasets` stores its features.
const hfKey = "huggingface"

// hfFeature is one feature of the "huggingface" metadata, as far as it is read.
type hfFeature struct {
	Type  string   `json:"_type"`
	Names []string `json:"names"`
}

// chooseColumns sets s.schema's image and label columns and class names from the top-level
// column names, in schema order, and the "huggingface" metadata (hf; "" if absent).
func (s *Scanner) chooseColumns(cols []string, hf string) error {
	var meta struct {
		Info struct {
			Features map[string]json.RawMessage `json:"features"`
		} `json:"info"`
	}
	features := map[string]hfFeature{}
	if hf != "" {
		if err := json.Unmarshal([]byte(hf), &meta); err != nil {
			return s.errorf("the %q schema metadata is not the JSON datasets writes: %w", hfKey, err)
		}
		for name, raw := range meta.Info.Features {
			var f hfFeature
			if json.Unmarshal(raw, &f) == nil { // a nested feature (a list, a dict) is not one read
				features[name] = f
			}
		}
	}
	pick := func(given, kind, flag string) (string, error) {
		if given != "" {
			if !slices.Contains(cols, given) {
				return "", s.errorf("no column %q (%s): its columns are %q", given, flag, cols)
			}
			return given, nil
		}
		for _, c := range cols {
			if features[c].Type == kind {
				return c, nil
			}
		}
		return "", nil
	}
	img, err := pick(s.opt.ImageColumn, "Image", "ImageColumn")
	if err != nil {
		return err
	}
	if img == "" {
		return s.errorf("no column is an Image feature in the %q schema metadata (%s); name the image column (ImageColumn) among %q", hfKey,
			map[bool]string{true: "present", false: "absent"}[hf != ""], cols)
	}
	label, err := pick(s.opt.LabelColumn, "ClassLabel", "LabelColumn")
	if err != nil {
		return err
	}
	if label == img {
		return s.errorf("column %q cannot be both the image and the label", img)
	}
	s.schema.ImageColumn, s.schema.LabelColumn = img, label
	if f := features[label]; label != "" && f.Type == "ClassLabel" {
		s.schema.ClassNames = f.Names
	}
	return nil
}

// columnError is the error for a chosen column whose type is not what datasets writes.
func (s *Scanner) columnError(col, want, got string) error {
	return fmt.Errorf("hfarrow: %s: column %q is %s, not %s", s.name, col, got, want)
}
