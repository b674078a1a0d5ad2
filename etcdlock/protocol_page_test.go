package etcdlock_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// PROTOCOL.md is held true by this test: every claim of its sections of
// claims names a test that holds it, every test, file and function it names
// exists, and its list of the tests that spell the layout is the list of
// test files that do.

// protocolClaims are the sections of PROTOCOL.md whose every numbered
// step, bullet and table row is a claim, and must name a test.
var protocolClaims = []string{"Keys", "Groups", "Lanes and their markers", "The life of a ticket", "Late, twice, lost: each request"}

var (
	backticked = regexp.MustCompile("`([^`]+)`")
	testName   = regexp.MustCompile(`^(Test|Fuzz|Example|Benchmark)[A-Za-z0-9_]*$`)
	fileName   = regexp.MustCompile(`^[a-z0-9_]+\.go$`)
	// A code name the page cites: Type.member, or a lower camelCase name
	// (escapeName, releaseNoSpace); plain words (need, permits) are not
	// checked.
	memberName = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)$`)
	camelName  = regexp.MustCompile(`^[a-z]+[A-Z][A-Za-z0-9]*$`)
	// A string literal that spells a key of the layout: one of its
	// segments at the start of the string or after a slash.
	layoutLiteral = regexp.MustCompile(`(^|/)(lock|elect|sem|slot|group)/`)
)

// pageDecls is what the page may name: etcdlock's files (with its
// internal packages'), its tests, and its declarations (functions,
// types, methods and fields as Type.name).
type pageDecls struct {
	files, tests, names map[string]bool
	spellers            []string // test files that spell the layout
}

func loadPageDecls(t *testing.T, dir string) pageDecls {
	t.Helper()
	d := pageDecls{files: map[string]bool{}, tests: map[string]bool{}, names: map[string]bool{}}
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if path != dir && (e.Name() == "testdata" || e.Name() == "etcdlocktest") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		d.files[e.Name()] = true
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		isTest := strings.HasSuffix(path, "_test.go")
		spells := false
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				name := decl.Name.Name
				if isTest && testName.MatchString(name) && decl.Recv == nil {
					d.tests[name] = true
				}
				if decl.Recv != nil && len(decl.Recv.List) == 1 {
					name = recvName(decl.Recv.List[0].Type) + "." + name
				}
				d.names[name] = true
				d.names[decl.Name.Name] = true
				if isTest && f.Name.Name == "etcdlock" && decl.Recv == nil {
					d.names["etcdlock."+decl.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					switch spec := spec.(type) {
					case *ast.TypeSpec:
						d.names[spec.Name.Name] = true
						addMembers(d.names, spec.Name.Name, spec.Type)
					case *ast.ValueSpec:
						for _, n := range spec.Names {
							d.names[n.Name] = true
						}
					}
				}
			}
		}
		if isTest {
			ast.Inspect(f, func(n ast.Node) bool {
				if bl, ok := n.(*ast.BasicLit); ok && bl.Kind == token.STRING {
					if s, err := strconv.Unquote(bl.Value); err == nil && layoutLiteral.MatchString(s) {
						spells = true
					}
				}
				return !spells
			})
			if spells && filepath.Dir(path) == dir {
				d.spellers = append(d.spellers, e.Name())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// KeysUnder and the like are exported to the tests as etcdlock.Name.
	for n := range d.names {
		if !strings.Contains(n, ".") {
			d.names["etcdlock."+n] = true
		}
	}
	slices.Sort(d.spellers)
	return d
}

func recvName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

func addMembers(names map[string]bool, typ string, e ast.Expr) {
	switch x := e.(type) {
	case *ast.StructType:
		for _, f := range x.Fields.List {
			for _, n := range f.Names {
				names[typ+"."+n.Name] = true
			}
		}
	case *ast.InterfaceType:
		for _, m := range x.Methods.List {
			for _, n := range m.Names {
				names[typ+"."+n.Name] = true
			}
		}
	}
}

// pageProblems returns what is false or unheld in page, a PROTOCOL.md.
func pageProblems(page string, d pageDecls) []string {
	var problems []string
	claims := map[string]bool{}
	for _, s := range protocolClaims {
		claims[s] = true
	}
	section, inFence, inClaim := "", false, false
	var claim strings.Builder
	claimLine := 0
	endClaim := func() {
		if inClaim && !namesTest(claim.String()) {
			problems = append(problems, "line "+strconv.Itoa(claimLine)+" ("+section+"): a claim that names no test: "+firstLine(claim.String()))
		}
		inClaim = false
		claim.Reset()
	}
	numbered := regexp.MustCompile(`^\d+\. `)
	for i, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		if h, ok := strings.CutPrefix(line, "## "); ok {
			endClaim()
			section = h
			continue
		}
		for _, m := range backticked.FindAllStringSubmatch(line, -1) {
			problems = append(problems, checkName(m[1], d, i+1)...)
		}
		if !claims[section] {
			continue
		}
		trimmed := strings.TrimSpace(line)
		switch {
		case numbered.MatchString(trimmed) || strings.HasPrefix(trimmed, "- "):
			endClaim()
			inClaim, claimLine = true, i+1
			claim.WriteString(trimmed)
		case strings.HasPrefix(trimmed, "|"):
			endClaim()
			if strings.HasPrefix(trimmed, "|---") || strings.HasPrefix(trimmed, "| key |") || strings.HasPrefix(trimmed, "| request |") {
				continue
			}
			inClaim, claimLine = true, i+1
			claim.WriteString(trimmed)
			endClaim()
		case trimmed == "":
			endClaim()
		default:
			if inClaim && strings.HasPrefix(line, "  ") {
				claim.WriteString(" " + trimmed)
			} else {
				endClaim()
			}
		}
	}
	endClaim()
	// The list of tests that spell the layout.
	_, rest, ok := strings.Cut(strings.Join(strings.Fields(page), " "), "the tests that spell it")
	if !ok {
		return append(problems, `no list of "the tests that spell it"`)
	}
	list, _, _ := strings.Cut(rest, ")")
	var listed []string
	for _, m := range backticked.FindAllStringSubmatch(list, -1) {
		listed = append(listed, m[1])
	}
	slices.Sort(listed)
	if !slices.Equal(listed, d.spellers) {
		problems = append(problems, "the tests that spell the layout are "+strings.Join(d.spellers, ", ")+"; the page lists "+strings.Join(listed, ", "))
	}
	return problems
}

func namesTest(s string) bool {
	for _, m := range backticked.FindAllStringSubmatch(s, -1) {
		if testName.MatchString(m[1]) {
			return true
		}
	}
	return false
}

func firstLine(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// checkName returns a problem when name, cited on line, looks like a
// test, a file or a declaration of etcdlock's and is none.
func checkName(name string, d pageDecls, line int) []string {
	at := "line " + strconv.Itoa(line) + ": "
	switch {
	case testName.MatchString(name):
		if !d.tests[name] {
			return []string{at + "no test " + name}
		}
	case fileName.MatchString(name):
		if !d.files[name] {
			return []string{at + "no file " + name}
		}
	case memberName.MatchString(name):
		if !d.names[name] {
			return []string{at + "no declaration " + name}
		}
	case camelName.MatchString(name):
		if !d.names[name] {
			return []string{at + "no declaration " + name}
		}
	}
	return nil
}

// TestProtocolPage holds PROTOCOL.md to the code and its tests.
func TestProtocolPage(t *testing.T) {
	page, err := os.ReadFile("PROTOCOL.md")
	if err != nil {
		t.Fatal(err)
	}
	d := loadPageDecls(t, ".")
	for _, p := range pageProblems(string(page), d) {
		t.Error("PROTOCOL.md: " + p)
	}
}

// TestProtocolPageControl is TestProtocolPage's control: a claim without
// its test, a test, a file or a function that does not exist, and a list
// of the tests that spell the layout missing one, are each found.
func TestProtocolPageControl(t *testing.T) {
	page, err := os.ReadFile("PROTOCOL.md")
	if err != nil {
		t.Fatal(err)
	}
	d := loadPageDecls(t, ".")
	for _, c := range []struct{ what, old, new string }{
		{"a claim without a test", " (`TestFailedTryLockLeavesNothing`)", ""},
		{"no such test", "`TestLateCleanupSparesNewerAcquisition`", "`TestLateCleanupSparesNewerAcquisitionGone`"},
		{"no such file", "`lanes.go`", "`lane.go`"},
		{"no such function", "`escapeName`", "`escapeNames`"},
		{"a speller missing", "`" + d.spellers[0] + "`", "`x`"},
	} {
		if !strings.Contains(string(page), c.old) {
			t.Fatalf("%s: the page has no %s to change", c.what, c.old)
		}
		changed := strings.ReplaceAll(string(page), c.old, c.new)
		if len(pageProblems(changed, d)) == 0 {
			t.Errorf("%s (%s → %s): no problem found", c.what, c.old, c.new)
		}
	}
}
