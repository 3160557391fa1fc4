// Package docs holds the project's design pages; its test keeps docs/design.md true to the code.
package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// notGo are names design.md quotes that are not Go: Python's, the kernel's, the shell's.
var notGo = map[string]bool{
	"PIL.Image.open": true, "ImageFolder": true, "DistributedSampler": true,
	"readResult.Slices": true, "readResult.Done": true, // go-fuse's fuse.ReadResult, which fs implements
	"prefetch.shed": true, // a key of the stats file
}

// goNames are the names every Go file of the module declares: packages, types, functions,
// constants, variables, and the fields and methods of each type (members, by type name).
type goNames struct {
	packages map[string]bool
	decls    map[string]bool
	members  map[string]map[string]bool // type name → its fields and methods, of any package
	anyField map[string]bool            // every field and method name
	// fieldType: type name → field name → the field's type name, to follow x.field.Method
	fieldType map[string]map[string]string
	files     map[string]bool // base names of the repository's files
}

func (g *goNames) member(typ, name string) {
	if g.members[typ] == nil {
		g.members[typ] = map[string]bool{}
	}
	g.members[typ][name] = true
	g.anyField[name] = true
}

func readGoNames(t *testing.T, root string) *goNames {
	g := &goNames{packages: map[string]bool{}, decls: map[string]bool{}, members: map[string]map[string]bool{},
		anyField: map[string]bool{}, fieldType: map[string]map[string]string{}, files: map[string]bool{}}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			g.files[d.Name()] = true
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		g.packages[f.Name.Name] = true
		g.packages[filepath.Base(filepath.Dir(path))] = true
		for _, decl := range f.Decls {
			g.addDecl(decl)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func (g *goNames) addDecl(decl ast.Decl) {
	switch d := decl.(type) {
	case *ast.FuncDecl:
		g.decls[d.Name.Name] = true
		if d.Recv != nil && len(d.Recv.List) == 1 {
			g.member(receiverType(d.Recv.List[0].Type), d.Name.Name)
		}
	case *ast.GenDecl:
		for _, spec := range d.Specs {
			switch s := spec.(type) {
			case *ast.TypeSpec:
				g.decls[s.Name.Name] = true
				g.addMembers(s.Name.Name, s.Type)
			case *ast.ValueSpec:
				for _, n := range s.Names {
					g.decls[n.Name] = true
				}
			}
		}
	}
}

// addMembers records the fields of a struct type and the methods of an interface type.
func (g *goNames) addMembers(typ string, e ast.Expr) {
	var fields *ast.FieldList
	switch t := e.(type) {
	case *ast.StructType:
		fields = t.Fields
	case *ast.InterfaceType:
		fields = t.Methods
	default:
		return
	}
	for _, f := range fields.List {
		for _, n := range f.Names {
			g.member(typ, n.Name)
			if ft := receiverType(f.Type); ft != "" {
				if g.fieldType[typ] == nil {
					g.fieldType[typ] = map[string]string{}
				}
				g.fieldType[typ][n.Name] = ft
			}
		}
		if len(f.Names) == 0 { // embedded: its name is a member too
			g.member(typ, receiverType(f.Type))
		}
	}
}

// receiverType names the type of a receiver or an embedded field: T, *T, T[K], pkg.T.
func receiverType(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return receiverType(t.X)
	case *ast.IndexExpr:
		return receiverType(t.X)
	case *ast.IndexListExpr:
		return receiverType(t.X)
	case *ast.SelectorExpr:
		return t.Sel.Name
	case *ast.Ident:
		return t.Name
	}
	return ""
}

var (
	codeSpan = regexp.MustCompile("`([^`]+)`")
	// a Go reference: pkg.Type.Method(args), Type.Field, funcName(args), camelCase
	goRef    = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)(?:\(.*\))?$`)
	mixed    = regexp.MustCompile(`[a-z][A-Z]|^[A-Z][a-z]`)
	repoRel  = regexp.MustCompile(`^[a-z][a-z0-9_/.-]*(\.go|\.py|\.sh|\.md|/)$`)
	fileName = regexp.MustCompile(`^[A-Za-z0-9_-]+\.(go|py|sh|md)$`)
)

// check returns why ref, a name quoted in design.md, names nothing in the code ("" if it does,
// or if ref is not a Go name).
func (g *goNames) check(ref string) string {
	if fileName.MatchString(ref) {
		if !g.files[ref] {
			return "no file " + ref
		}
		return ""
	}
	m := goRef.FindStringSubmatch(ref)
	if m == nil || notGo[m[1]] {
		return ""
	}
	parts := strings.Split(m[1], ".")
	if len(parts) == 1 {
		// a single word is taken for Go only if it is written like Go: camelCase or Exported.
		if !mixed.MatchString(parts[0]) || g.decls[parts[0]] || g.anyField[parts[0]] || g.packages[parts[0]] {
			return ""
		}
		return "no Go declaration " + parts[0]
	}
	if g.packages[parts[0]] && (g.decls[parts[1]] || !g.decls[parts[0]]) {
		parts = parts[1:] // pkg.Name
	} else if !mixed.MatchString(parts[0]) && !g.decls[parts[0]] {
		return "" // not written like Go (a Python module, a command)
	}
	if !g.decls[parts[0]] {
		return "no Go declaration " + parts[0]
	}
	typ := parts[0] // the type whose member parts[i] must be, "" once unknown
	for _, p := range parts[1:] {
		if typ == "" {
			if !g.anyField[p] {
				return "no field or method " + p
			}
			continue
		}
		if !g.members[typ][p] {
			return "no field or method " + p + " of " + typ
		}
		typ = g.fieldType[typ][p]
	}
	return ""
}

// TestDesignNamesExist fails when docs/design.md names a Go identifier, or a file or folder of
// the repository, that no longer exists: the page must follow the code.
func TestDesignNamesExist(t *testing.T) {
	text, err := os.ReadFile("design.md")
	if err != nil {
		t.Fatal(err)
	}
	g := readGoNames(t, "..")
	checked := 0
	for _, m := range codeSpan.FindAllStringSubmatch(string(text), -1) {
		ref := strings.TrimSpace(m[1])
		if repoRel.MatchString(ref) && strings.Contains(ref, "/") {
			checked++
			if _, err := os.Stat(filepath.Join("..", ref)); err != nil {
				t.Errorf("design.md names %s, which is not in the repository", ref)
			}
			continue
		}
		if goRef.MatchString(ref) {
			checked++
		}
		if why := g.check(ref); why != "" {
			t.Errorf("design.md names `%s`: %s", ref, why)
		}
	}
	if checked < 50 { // the page names well over a hundred; fewer means the parsing broke
		t.Fatalf("only %d names checked in design.md", checked)
	}
}

// TestCheckFindsStaleNames: the checker itself tells a stale name from a live one.
func TestCheckFindsStaleNames(t *testing.T) {
	g := readGoNames(t, "..")
	for ref, stale := range map[string]bool{
		"goNames.member": false, "docs.goNames": false, "receiverType(e)": false,
		"goNames.nosuch": true, "noSuchThing": true, "docs.NoSuchType.x": true,
		"goNames.fieldType.noSuchField": true, "design_test.go": false, "nosuch_test.go": true,
		"O_DIRECT": false, "writev": false, "PIL.Image.open": false,
	} {
		if got := g.check(ref) != ""; got != stale {
			t.Errorf("check(%q) stale = %v, want %v", ref, got, stale)
		}
	}
}
