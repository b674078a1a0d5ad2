package etcdlock_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
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
	var parsed []*ast.File
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, f)
	}
	if len(parsed) < 50 {
		t.Fatalf("read %d test files, want the package's (100 or so)", len(parsed))
	}
	for _, fn := range compactingParallel(parsed) {
		t.Errorf("%s: %s calls t.Parallel and compacts (itself or through a helper), with no server of its own (embedetcd.NewServer): it ends the watches of the tests beside it", fset.Position(fn.Pos()), fn.Name.Name)
	}
}

// The control: the check finds the test as it was when a parallel
// compaction of the shared member broke TestObserveEveryTermInOrder, and
// one that compacts through a helper, and leaves them alone once they
// have a server of their own (directly or through a helper), or run alone.
func TestParallelTestsCompactNoSharedMemberControl(t *testing.T) {
	const helpers = `
func compactIt(t *testing.T) { etcdClient(t).Compact(t.Context(), 5) }
func compactItToo(t *testing.T) { compactIt(t) }
func ownServer(t *testing.T) string { return embedetcd.NewServer(t).Endpoints()[0] }
`
	for _, tt := range []struct {
		name, src string
		want      int
	}{
		{"shared member", `func TestX(t *testing.T) { t.Parallel(); cli := etcdClient(t); cli.Compact(t.Context(), 5) }`, 1},
		{"in a parallel subtest", `func TestX(t *testing.T) { t.Run("a", func(t *testing.T) { t.Parallel(); etcdClient(t).Compact(ctx, 5) }) }`, 1},
		{"through helpers", `func TestX(t *testing.T) { t.Parallel(); compactItToo(t) }`, 1},
		{"an op sent by Do", `func TestX(t *testing.T) { t.Parallel(); etcdClient(t).Do(ctx, clientv3.OpCompact(5)) }`, 1},
		{"a server of its own", `func TestX(t *testing.T) { t.Parallel(); ep := embedetcd.NewServer(t).Endpoints()[0]; etcdClient(t, ep).Compact(ctx, 5) }`, 0},
		{"a server of its own, through a helper", `func TestX(t *testing.T) { t.Parallel(); etcdClient(t, ownServer(t)).Compact(ctx, 5) }`, 0},
		{"alone", `func TestX(t *testing.T) { etcdClient(t).Compact(t.Context(), 5) }`, 0},
		{"parallel, no compaction", `func TestX(t *testing.T) { t.Parallel(); etcdClient(t).Get(ctx, "k"); slices.Compact(s) }`, 0},
	} {
		f, err := parser.ParseFile(token.NewFileSet(), "x_test.go", "package x\n"+helpers+tt.src, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(compactingParallel([]*ast.File{f})); got != tt.want {
			t.Errorf("%s: found %d, want %d", tt.name, got, tt.want)
		}
	}
}

// compactingParallel returns the tests of a package's files that call
// t.Parallel (themselves or in a subtest) and compact, and start no etcd
// server of their own; a call of one of the files' functions counts as
// what that function does, and what it calls.
func compactingParallel(files []*ast.File) []*ast.FuncDecl {
	type facts struct{ parallel, compacts, own bool }
	funcs := map[string]*ast.FuncDecl{}
	for _, f := range files {
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Body != nil && fn.Recv == nil {
				funcs[fn.Name.Name] = fn
			}
		}
	}
	direct := map[string]facts{}
	calls := map[string][]string{}
	for name, fn := range funcs {
		var fs facts
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			switch fun := call.Fun.(type) {
			case *ast.Ident:
				if _, ok := funcs[fun.Name]; ok {
					calls[name] = append(calls[name], fun.Name)
				}
			case *ast.SelectorExpr:
				x, _ := fun.X.(*ast.Ident)
				switch sel := fun.Sel.Name; {
				case x != nil && x.Name == "otheretcd":
					fs.own = true
				case x != nil && x.Name == "embedetcd":
					fs.own = fs.own || sel == "NewServer" || sel == "StartServer" || sel == "New" || sel == "Start"
				case sel == "Parallel":
					fs.parallel = true
				case sel == "Compact" && (x == nil || x.Name != "slices"), sel == "OpCompact":
					fs.compacts = true
				}
			}
			return true
		})
		direct[name] = fs
	}
	// What a function does through the functions it calls, to a fixpoint.
	all := direct
	for changed := true; changed; {
		changed = false
		for name, callees := range calls {
			fs := all[name]
			for _, c := range callees {
				fs.compacts = fs.compacts || all[c].compacts
				fs.own = fs.own || all[c].own
			}
			if fs != all[name] {
				all[name], changed = fs, true
			}
		}
	}
	var found []*ast.FuncDecl
	for name, fn := range funcs {
		if fs := all[name]; strings.HasPrefix(name, "Test") && fs.parallel && fs.compacts && !fs.own {
			found = append(found, fn)
		}
	}
	slices.SortFunc(found, func(a, b *ast.FuncDecl) int { return int(a.Pos() - b.Pos()) })
	return found
}
