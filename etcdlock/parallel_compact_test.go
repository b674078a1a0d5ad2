package etcdlock_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"
)

// A parallel test that compacts etcd's history does so on a server of its
// own, never on the member the package shares: a compaction ends every
// watch still behind it (one a loaded server has not caught up yet), and
// the tests beside it that count on an unbroken watch (Observe's every
// term, TestObserveEveryTermInOrder) would see a gap the library rightly
// reads afresh across. A test that does not call t.Parallel runs alone
// (see TestMain), and may compact the shared member.
func TestParallelTestsCompactNoSharedMember(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var tests int
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range compactingParallel(f) {
			t.Errorf("%s: %s calls t.Parallel and compacts, with no server of its own (embedetcd.NewServer): it ends the watches of the tests beside it", fset.Position(p.Pos()), p.Name.Name)
		}
		tests++
	}
	if tests < 50 {
		t.Fatalf("read %d test files, want the package's (100 or so)", tests)
	}
}

// The control: the check finds the test as it was when a parallel
// compaction of the shared member broke TestObserveEveryTermInOrder, and
// leaves it alone once it has a server of its own, or runs alone.
func TestParallelTestsCompactNoSharedMemberControl(t *testing.T) {
	for _, tt := range []struct {
		name, src string
		want      int
	}{
		{"shared member", `func TestX(t *testing.T) { t.Parallel(); cli := etcdClient(t); cli.Compact(t.Context(), 5) }`, 1},
		{"in a parallel subtest", `func TestX(t *testing.T) { t.Run("a", func(t *testing.T) { t.Parallel(); etcdClient(t).Compact(ctx, 5) }) }`, 1},
		{"a server of its own", `func TestX(t *testing.T) { t.Parallel(); ep := embedetcd.NewServer(t).Endpoints()[0]; etcdClient(t, ep).Compact(ctx, 5) }`, 0},
		{"alone", `func TestX(t *testing.T) { etcdClient(t).Compact(t.Context(), 5) }`, 0},
		{"parallel, no compaction", `func TestX(t *testing.T) { t.Parallel(); etcdClient(t).Get(ctx, "k") }`, 0},
	} {
		f, err := parser.ParseFile(token.NewFileSet(), "x_test.go", "package x\n"+tt.src, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(compactingParallel(f)); got != tt.want {
			t.Errorf("%s: found %d, want %d", tt.name, got, tt.want)
		}
	}
}

// compactingParallel returns f's tests that call t.Parallel (themselves or
// in a subtest) and Compact, and start no etcd server of their own.
func compactingParallel(f *ast.File) []*ast.FuncDecl {
	var found []*ast.FuncDecl
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Body == nil || fn.Recv != nil || len(fn.Name.Name) < 4 || fn.Name.Name[:4] != "Test" {
			continue
		}
		var parallel, compacts, own bool
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			switch sel.Sel.Name {
			case "Parallel":
				parallel = true
			case "Compact":
				compacts = true
			case "NewServer", "StartServer":
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "embedetcd" {
					own = true
				}
			}
			return true
		})
		if parallel && compacts && !own {
			found = append(found, fn)
		}
	}
	return found
}
