package composefile_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// goFlags are the go command's own flags the pages use.
var goFlags = []string{"run", "count", "race", "short", "tags", "v", "bench", "benchmem", "timeout", "cpu", "fuzz", "fuzztime"}

// TestPageCommands checks the commands on README.md and the docs/ pages,
// in code blocks and inline code, against the repository: the packages of
// go run, go test, go install and go doc exist (relative to go -C's
// directory, for the examples' module); each alternative of a go
// test -run pattern matches a test, example, benchmark or fuzz function of
// those packages; every flag given to a command of cmd/ (fencelock as
// installed, by path, or go run ./cmd/NAME) is one it defines, and so is every
// inline --flag (fencelock's); a go test flag that is not the go command's
// is defined by the packages' tests. An inline -flag (of fencecheck, or of
// a package's tests) must be defined by some command or test.
func TestPageCommands(t *testing.T) {
	code, n := repoCode(t), 0
	for _, p := range pages(t) {
		lines := slices.Concat(codeLines(p.text, true), spans(p.text))
		for _, line := range lines {
			for cmd := range strings.SplitSeq(line, "&&") {
				if checkCommand(t, p.path, strings.Fields(cmd)) {
					n++
				}
			}
			switch first := strings.Fields(line + " x")[0]; {
			case strings.HasPrefix(first, "--"):
				checkFlags(t, p.path, "cmd/fencelock", []string{first}, false)
			case strings.HasPrefix(first, "-") && len(first) > 1:
				name, _, _ := strings.Cut(first[1:], "=")
				if !slices.Contains(goFlags, name) && !strings.Contains(code, `"`+name+`"`) {
					t.Errorf("%s: flag %s: no command or test of the repository defines it", p.path, first)
				}
			}
		}
	}
	if n < 10 {
		t.Errorf("got %d commands checked on the pages, want at least 10: is the parser blind?", n)
	}
}

// checkCommand checks one command, and reports whether it was one it knows.
func checkCommand(t *testing.T, where string, args []string) bool {
	t.Helper()
	if len(args) > 0 && path.Base(strings.Trim(args[0], `"'`)) == "fencelock" { // or "$TOOLS/fencelock"
		checkFlags(t, where, "cmd/fencelock", args[1:], false)
		return true
	}
	if len(args) < 3 || args[0] != "go" {
		return false
	}
	dir := "" // of go -C dir: the examples' module
	if args[1] == "-C" && len(args) >= 4 {
		dir, args = args[2], append([]string{"go"}, args[3:]...)
	}
	var pkgs []string
	for _, a := range args[2:] {
		if strings.HasPrefix(a, "./") || strings.HasPrefix(a, "github.com/fencelock/fencelock/") {
			a = strings.TrimPrefix(strings.TrimPrefix(a, "github.com/fencelock/fencelock"), "/")
			a, _, _ = strings.Cut(a, "@")
			pkgs = append(pkgs, path.Join(dir, strings.TrimPrefix(a, "./")))
		}
	}
	for _, dir := range pkgs {
		if fi, err := os.Stat(filepath.Join(repoRoot, pkgDir(dir))); err != nil || !fi.IsDir() {
			t.Errorf("%s: %s: no package directory %s", where, strings.Join(args, " "), dir)
		}
	}
	switch args[1] {
	case "run":
		if len(pkgs) == 1 && strings.HasPrefix(pkgs[0], "cmd/") {
			i := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, "./cmd/") })
			checkFlags(t, where, pkgDir(pkgs[0]), args[i+1:], false)
		}
	case "test":
		checkTestCommand(t, where, args, pkgs)
	case "install", "build", "doc", "get":
	default:
		return false
	}
	return true
}

// checkFlags checks that each flag in args, up to a "--" or the first
// argument that is not a flag's, is defined in dir's Go files (of its
// tests, if tests): a string literal with its name.
func checkFlags(t *testing.T, where, dir string, args []string, tests bool) {
	t.Helper()
	src := dirSource(t, dir, tests)
	for _, a := range args {
		if a == "--" {
			return
		}
		name, ok := strings.CutPrefix(a, "-")
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(strings.TrimPrefix(name, "-"), "=")
		if !strings.Contains(src, `"`+name+`"`) {
			t.Errorf("%s: flag %s: %s defines no flag %q", where, a, dir, name)
		}
	}
}

// checkTestCommand checks a go test command's -run pattern and its flags
// that are not the go command's.
func checkTestCommand(t *testing.T, where string, args, pkgs []string) {
	t.Helper()
	for i, a := range args {
		name, ok := strings.CutPrefix(a, "-")
		if !ok {
			continue
		}
		if name == "run" && i+1 < len(args) {
			checkRunPattern(t, where, strings.Trim(args[i+1], `'"`), pkgs)
		}
		if !slices.Contains(goFlags, strings.SplitN(name, "=", 2)[0]) {
			checkTestFlag(t, where, a, pkgs)
		}
	}
}

// checkTestFlag checks that a test flag is defined by the tests of one of
// pkgs.
func checkTestFlag(t *testing.T, where, flag string, pkgs []string) {
	t.Helper()
	name, _, _ := strings.Cut(strings.TrimLeft(flag, "-"), "=")
	for _, dir := range pkgs {
		if strings.Contains(dirSource(t, pkgDir(dir), true), `"`+name+`"`) {
			return
		}
	}
	t.Errorf("%s: flag %s: no test of %v defines it", where, flag, pkgs)
}

// pkgDir returns the directory of a package pattern: dir, or dir/...
func pkgDir(pattern string) string {
	if pattern == "..." {
		return "."
	}
	return strings.TrimSuffix(pattern, "/...")
}

// checkRunPattern checks that each alternative of pattern's top level
// matches a test function of one of pkgs.
func checkRunPattern(t *testing.T, where, pattern string, pkgs []string) {
	t.Helper()
	var names []string
	for _, dir := range pkgs {
		names = append(names, testFuncs(t, dir)...)
	}
	top, _, _ := strings.Cut(pattern, "/")
	for alt := range strings.SplitSeq(top, "|") {
		re, err := regexp.Compile(alt)
		if err != nil {
			t.Errorf("%s: -run %s: %v", where, pattern, err)
			continue
		}
		if !slices.ContainsFunc(names, re.MatchString) {
			t.Errorf("%s: -run %s: %q matches no test, example, benchmark or fuzz function of %v", where, pattern, alt, pkgs)
		}
	}
}

var testFuncRe = regexp.MustCompile(`^(Test|Example|Benchmark|Fuzz)`)

// testFuncs returns the names of the top-level test functions of the
// package matched by pattern (dir, or dir/... for dir and those below it).
func testFuncs(t *testing.T, pattern string) []string {
	t.Helper()
	root := filepath.Join(repoRoot, pkgDir(pattern))
	var names []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && path != root && !strings.HasSuffix(pattern, "..."):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, "_test.go"):
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && testFuncRe.MatchString(fd.Name.Name) {
				names = append(names, fd.Name.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// dirSource returns the text of the Go files in dir: its test files if
// tests, otherwise the others.
func dirSource(t *testing.T, dir string, tests bool) string {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(repoRoot, dir, "*.go"))
	var b strings.Builder
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") == tests {
			b.WriteString(readFile(t, p))
		}
	}
	return b.String()
}
