package composefile_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// goDecl returns the source of the top-level declaration name in the Go
// file path (whose text is src), without its doc comment: a function, or a
// var, const or type declaration of that one name.
func goDecl(t *testing.T, path, src, name string) string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, 0)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, d := range f.Decls {
		if declares(d, name) {
			return src[fset.Position(d.Pos()).Offset:fset.Position(d.End()).Offset] + "\n"
		}
	}
	t.Fatalf("%s: no function, or declaration of that name alone, %s", path, name)
	return ""
}

// declares reports whether d is the function name, or a var, const or type
// declaration of name alone.
func declares(d ast.Decl, name string) bool {
	switch d := d.(type) {
	case *ast.FuncDecl:
		return d.Recv == nil && d.Name.Name == name
	case *ast.GenDecl:
		if len(d.Specs) != 1 {
			return false
		}
		switch s := d.Specs[0].(type) {
		case *ast.ValueSpec:
			return len(s.Names) == 1 && s.Names[0].Name == name
		case *ast.TypeSpec:
			return s.Name.Name == name
		}
	}
	return false
}

// goPackages maps the names the pages use for the module's packages to
// their directories.
var goPackages = map[string]string{
	"etcdlock":     "etcdlock",
	"etcdlocktest": "etcdlock/etcdlocktest",
	"fence":        "fence",
	"fencetest":    "fence/fencetest",
	"gormfence":    "fence/gorm",
	"postgres":     "fence/postgres",
	"s3fence":      "fence/s3",
	"propagate":    "fence/propagate",
	"fencegrpc":    "fence/propagate/fencegrpc",
	"sqlfence":     "fence/sql",
	"redisfence":   "fence/redis",
	"dynamofence":  "fence/dynamodb",
	"gcsfence":     "fence/gcs",
	"jsfence":      "fence/jetstream",
	"azblobfence":  "fence/azblob",
	"outbox":       "fence/outbox",
	"redisholder":  "fence/redisholder",
	"pgadvisory":   "fence/pgadvisory",
	"sqlcbank":     "docs/sqlc",
}

// api is what a package declares: its exported top-level names, and the
// methods and fields of each of its types.
type api struct {
	names   map[string]bool
	members map[string]map[string]bool // type: its methods and fields
}

// loadAPI parses the non-test files of the package in dir.
func loadAPI(t *testing.T, dir string) api {
	t.Helper()
	a := api{names: map[string]bool{}, members: map[string]map[string]bool{}}
	member := func(typ, name string) {
		if a.members[typ] == nil {
			a.members[typ] = map[string]bool{}
		}
		a.members[typ][name] = true
	}
	paths, _ := filepath.Glob(filepath.Join(repoRoot, dir, "*.go"))
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					a.names[d.Name.Name] = true
				} else {
					member(recvType(d.Recv.List[0].Type), d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						a.names[s.Name.Name] = true
						for _, m := range typeMembers(s.Type) {
							member(s.Name.Name, m)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							a.names[n.Name] = true
						}
					}
				}
			}
		}
	}
	if len(a.names) == 0 {
		t.Fatalf("%s: no Go declarations", dir)
	}
	return a
}

func recvType(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return recvType(e.X)
	case *ast.IndexExpr:
		return recvType(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// typeMembers returns the fields of a struct type, or the methods of an
// interface type.
func typeMembers(e ast.Expr) []string {
	var fields *ast.FieldList
	switch e := e.(type) {
	case *ast.StructType:
		fields = e.Fields
	case *ast.InterfaceType:
		fields = e.Methods
	default:
		return nil
	}
	var names []string
	for _, f := range fields.List {
		for _, n := range f.Names {
			names = append(names, n.Name)
		}
		if len(f.Names) == 0 { // embedded: its name is a member too
			names = append(names, recvType(f.Type))
		}
	}
	return names
}

var (
	// qualifiedRe matches pkg.Name and pkg.Type.Member for every package
	// of goPackages, so that a package added there is checked here too.
	qualifiedRe = regexp.MustCompile(`\b(` + strings.Join(slices.Sorted(maps.Keys(goPackages)), "|") + `)\.([A-Z]\w*)(?:\.([A-Z]\w*))?`)
	memberRe    = regexp.MustCompile(`^\*?([A-Z]\w*)\.([A-Z]\w*)(?:\(|$)`)
)

// TestPageIdentifiers checks the Go names on README.md and the docs/ pages
// against the packages' declarations: pkg.Name and pkg.Type.Member in
// inline code and Go blocks, and Type.Member in inline code, where Type is
// a type of one of the module's packages.
func TestPageIdentifiers(t *testing.T) {
	apis := map[string]api{}
	types := map[string][]api{} // type name: the packages declaring it
	for name, dir := range goPackages {
		apis[name] = loadAPI(t, dir)
		for typ := range apis[name].members {
			types[typ] = append(types[typ], apis[name])
		}
	}
	for _, p := range pages(t) {
		code := strings.Join(append(spans(p.text), blocks(p.text, "go")...), "\n")
		for _, m := range qualifiedRe.FindAllStringSubmatch(code, -1) {
			a := apis[m[1]]
			switch {
			case !a.names[m[2]]:
				t.Errorf("%s: %s: package %s (%s) declares no %s", p.path, m[0], m[1], goPackages[m[1]], m[2])
			case m[3] != "" && a.members[m[2]] != nil && !a.members[m[2]][m[3]]:
				t.Errorf("%s: %s: %s.%s has no method or field %s", p.path, m[0], m[1], m[2], m[3])
			}
		}
		for _, s := range spans(p.text) {
			m := memberRe.FindStringSubmatch(s)
			if m == nil || types[m[1]] == nil {
				continue
			}
			found := false
			for _, a := range types[m[1]] {
				found = found || a.members[m[1]][m[2]]
			}
			if !found {
				t.Errorf("%s: `%s`: no type %s of the module's packages has a method or field %s", p.path, s, m[1], m[2])
			}
		}
	}
}

var (
	envRe  = regexp.MustCompile(`\b((?:FENCELOCK|ETCDCTL)_[A-Z0-9_]*[A-Z0-9])\b`)
	pathRe = regexp.MustCompile(`^\.?[A-Za-z0-9_][\w.-]*(/[\w.-]+)*/?$`)
)

// TestPageEnvAndPaths checks the environment variables and file paths the
// pages name: every FENCELOCK_ or ETCDCTL_ variable is read somewhere in
// the repository's Go or shell code, and every inline path whose first
// element is in the repository's root exists.
func TestPageEnvAndPaths(t *testing.T) {
	code := repoCode(t)
	for _, p := range pages(t) {
		for _, m := range envRe.FindAllStringSubmatch(p.text, -1) {
			if !strings.Contains(code, m[1]) {
				t.Errorf("%s: %s: no Go or shell file of the repository names it", p.path, m[1])
			}
		}
		for _, s := range spans(p.text) {
			first, _, nested := strings.Cut(s, "/")
			if !pathRe.MatchString(s) || !nested && filepath.Ext(s) == "" {
				continue
			}
			if _, err := os.Stat(filepath.Join(repoRoot, first)); err != nil {
				continue // not a path in this repository
			}
			if _, err := os.Stat(filepath.Join(repoRoot, s)); err != nil {
				t.Errorf("%s: path `%s`: %v", p.path, s, err)
			}
		}
	}
}

// repoCode returns the text of the repository's Go and shell files, except
// this package's.
func repoCode(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(repoRoot, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "composefile" || d.Name() == ".git") {
			return filepath.SkipDir
		}
		if ext := filepath.Ext(path); !d.IsDir() && (ext == ".go" || ext == ".sh" || filepath.Base(path) == "run") {
			b.WriteString(readFile(t, path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
