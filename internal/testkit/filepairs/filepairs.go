// Package filepairs counts how the files of one Go package refer to each
// other: every identifier used in a non-test file (a package-level name, a
// field or a method) is resolved with go/types to the file that defines it,
// and two files that each use a name of the other are a two-way pair.
// Issue 48 set the goal (etcdlock: at most 12 pairs); go run
// ./internal/testkit/filepairs ./etcdlock prints them, and etcdlock's
// TestFilePairs holds the count.
package filepairs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
)

// Pair is two files of a package that each use a name the other defines.
type Pair struct {
	A, B string // file names, A < B
	// AtoB and BtoA are the names A uses of B and B uses of A.
	AtoB, BtoA []string
}

// Graph is, for each file of a package, the names it uses of each other
// file.
type Graph map[string]map[string][]string

// Load type-checks the non-test files of the package in dir (a pattern go
// list accepts, such as ./etcdlock) and returns its graph of files.
func Load(pattern string) (Graph, error) {
	out, err := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Dir,GoFiles,Export,DepOnly", pattern).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("go list %s: %v: %s", pattern, err, ee.Stderr)
		}
		return nil, fmt.Errorf("go list %s: %w", pattern, err)
	}
	type listed struct {
		ImportPath, Dir, Export string
		GoFiles                 []string
		DepOnly                 bool
	}
	exports := map[string]string{}
	var target *listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("go list output: %w", err)
		}
		exports[p.ImportPath] = p.Export
		if !p.DepOnly {
			if target != nil {
				return nil, fmt.Errorf("%s names more than one package", pattern)
			}
			target = &p
		}
	}
	if target == nil {
		return nil, fmt.Errorf("%s names no package", pattern)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range target.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(target.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	lookup := func(path string) (io.ReadCloser, error) {
		exp, ok := exports[path]
		if !ok || exp == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(exp)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", lookup)}
	pkg, err := conf.Check(target.ImportPath, fset, files, info)
	if err != nil {
		return nil, fmt.Errorf("type-check %s: %w", target.ImportPath, err)
	}
	g := Graph{}
	seen := map[[3]string]bool{}
	for id, obj := range info.Uses {
		if obj == nil || obj.Pkg() != pkg || !obj.Pos().IsValid() {
			continue
		}
		// Local names (a function's variables and parameters) stay in
		// their file; what counts is what the package declares: its
		// package-level names, and fields and methods.
		if v, ok := obj.(*types.Var); ok && !v.IsField() && obj.Parent() != pkg.Scope() {
			continue
		}
		if _, ok := obj.(*types.Label); ok {
			continue
		}
		if tn, ok := obj.(*types.TypeName); ok && tn.Parent() != pkg.Scope() {
			continue // a type parameter
		}
		from := filepath.Base(fset.Position(id.Pos()).Filename)
		to := filepath.Base(fset.Position(obj.Pos()).Filename)
		if from == to {
			continue
		}
		k := [3]string{from, to, obj.Name()}
		if seen[k] {
			continue
		}
		seen[k] = true
		if g[from] == nil {
			g[from] = map[string][]string{}
		}
		g[from][to] = append(g[from][to], obj.Name())
	}
	for _, m := range g {
		for to := range m {
			sort.Strings(m[to])
		}
	}
	return g, nil
}

// Pairs returns the two-way pairs of g, in order.
func (g Graph) Pairs() []Pair {
	var ps []Pair
	for a, m := range g {
		for b, ab := range m {
			if a >= b {
				continue
			}
			if ba := g[b][a]; len(ba) > 0 {
				ps = append(ps, Pair{A: a, B: b, AtoB: ab, BtoA: ba})
			}
		}
	}
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].A != ps[j].A {
			return ps[i].A < ps[j].A
		}
		return ps[i].B < ps[j].B
	})
	return ps
}

// Arrows is the number of ordered (from, to) file pairs with a use.
func (g Graph) Arrows() int {
	n := 0
	for _, m := range g {
		n += len(m)
	}
	return n
}
