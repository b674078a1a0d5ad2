package etcdlock

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The prose holds to kindTable as the code does: every list in a comment,
// a help text of the CLI or a page (README, CONTRIBUTING, docs/*.md,
// PROTOCOL.md) that names three kinds or more names every kind (Kinds),
// every list of quoted words that names three of kindTable's names (the
// fencelock.kind attribute's values) names all of them, and every list of
// spans that names two of the kinds' spans names all of
// them, in one list or in several of one comment or paragraph
// (options.go's, doc.go's). A list of two kinds is taken as meant
// (a lock and an election of one name are apart), and so is one whose
// words after the first are capitalized (Go names: Lock, Semaphore,
// Group), or one of partialLists. Each failure names the file, the list
// and the kinds it misses.
func TestProseListsKinds(t *testing.T) {
	texts := proseTexts(t)
	for _, p := range proseProblems(texts, Kinds(), kindNames(), kindSpans()) {
		t.Error(p)
	}
}

// The control: the check finds every list it holds (the same texts,
// against a table with one kind more, fail once per list), and fails on
// a list with one kind removed.
func TestProseListsKindsControl(t *testing.T) {
	texts := proseTexts(t)
	kinds, names, spans := Kinds(), kindNames(), kindSpans()
	var lists int
	for _, tx := range texts {
		lists += len(kindLists(tx.text)) + len(nameLists(tx.text, names)) + min(len(spanLists(tx.text, spans)), 1)
	}
	if lists < 5 { // 8 when it was written
		t.Fatalf("found %d lists of kinds or spans in the prose, want 5 at least: has the scan lost its texts?", lists)
	}
	if got := len(proseProblems(texts, append(kinds, "barrier"), append(names, "barrier"), append(spans, "etcdlock.Await"))); got != lists {
		t.Errorf("with a kind more in the table: got %d problems, want one per list, %d", got, lists)
	}
	full := "WatchStatus follows every " + strings.Join(kinds[:len(kinds)-1], ", ") + " and " + kinds[len(kinds)-1] + " of its scope."
	short := "WatchStatus follows every " + strings.Join(kinds[1:len(kinds)-1], ", ") + " and " + kinds[len(kinds)-1] + " of its scope."
	for _, tt := range []struct {
		name string
		text string
		want int
	}{
		{"every kind", full, 0},
		{"a kind removed", short, 1},
		{"two kinds", "A " + kinds[0] + " and an " + kinds[1] + " of one name are apart.", 0},
		{"every span", "Spans " + strings.Join(spans, ", ") + ".", 0},
		{"a span removed", "Spans " + strings.Join(spans[1:], ", ") + ".", 1},
		{"every name", "fencelock.kind (`" + strings.Join(names, "`, `") + "`)", 0},
		{"a name removed", "fencelock.kind (`" + strings.Join(names[1:], "`, `") + "`)", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := proseProblems([]proseText{{"fixture", tt.text}}, kinds, names, spans); len(got) != tt.want {
				t.Errorf("%q: got %d problems %q, want %d", tt.text, len(got), got, tt.want)
			}
		})
	}
}

// partialLists are the lists that leave kinds out on purpose, by their
// text, with why.
var partialLists = map[string]string{
	"a group, a semaphore, or a lock": "docs/groups.md: the ways to share work among workers; an election is none",
}

// proseText is one piece of prose: a comment, a help text, a page's
// paragraph, with its whitespace collapsed.
type proseText struct {
	where string // file, and line for Go
	text  string
}

// kindSpans is the spans of kindTable's rows, each once, in order.
func kindSpans() []string {
	var spans []string
	for _, row := range kindTable {
		for _, s := range []string{row.waitSpan, row.trySpan, row.releaseSpan} {
			if !slices.Contains(spans, s) {
				spans = append(spans, s)
			}
		}
	}
	return spans
}

var (
	// kindItemRe is an item of a list of kinds: "locks", "a semaphore's
	// permit", "read/write locks", "an election (its leader)", a quoted
	// "group" or `group`.
	kindItemRe = `(?:(?:an?|the|each|every|its|one)\s+)?["\x60]?(?:read/write\s+)?(\w+?)(?:s|'s(?:\s+\w+)?)?\b["\x60]?(?:\s+\([^)]*\))?`
	listSepRe  = `(?:\s*,\s*(?:(?:and|or)\s+)?|\s+(?:and|or)\s+)`
	kindListRe = regexp.MustCompile(`(?i)\b` + kindItemRe + `(?:` + listSepRe + kindItemRe + `)+`)
	kindWordRe = regexp.MustCompile(`(?i)\b(\w+?)(?:s|'s)?\b`)
	spanListRe = regexp.MustCompile(`\betcdlock\.[A-Z]\w*(?:\s*\([^)]*\))?(?:` + listSepRe + `(?:etcdlock\.)?[A-Z]\w*(?:\s*\([^)]*\))?)+`)
	spanWordRe = regexp.MustCompile(`(?:etcdlock\.)?([A-Z]\w*)`)
	// nameListRe is a list of quoted words: of kindTable's names, the
	// values of the fencelock.kind attribute ("lock", "read", or a group's
	// "member").
	nameItemRe = "(?:[\\w']+\\s+){0,2}[\"\x60](\\w+)[\"\x60]"
	nameListRe = regexp.MustCompile(nameItemRe + `(?:` + listSepRe + nameItemRe + `)+`)
	nameWordRe = regexp.MustCompile(nameItemRe)
)

// kindNames is kindTable's names, in order.
func kindNames() []string {
	var names []string
	for _, row := range kindTable {
		names = append(names, row.name)
	}
	return names
}

// nameLists returns the lists of quoted words in text that name three of
// names or more, each as the names it has.
func nameLists(text string, names []string) [][]string {
	var lists [][]string
	for _, m := range nameListRe.FindAllString(text, -1) {
		var named []string
		for _, w := range nameWordRe.FindAllStringSubmatch(m, -1) {
			if slices.Contains(names, w[1]) && !slices.Contains(named, w[1]) {
				named = append(named, w[1])
			}
		}
		if len(named) >= 3 {
			lists = append(lists, named)
		}
	}
	return lists
}

// kindLists returns the lists of text that name three kinds or more
// (Kinds' words, by their singular), each as the set of kinds it names.
func kindLists(text string) [][]string {
	var lists [][]string
	for _, m := range kindListRe.FindAllString(text, -1) {
		var named []string
		goNames := false
		for _, w := range kindWordRe.FindAllStringSubmatch(m, -1) {
			k := strings.ToLower(w[1])
			if !slices.Contains(Kinds(), k) {
				continue
			}
			goNames = goNames || len(named) > 0 && w[1][0] != k[0]
			if !slices.Contains(named, k) {
				named = append(named, k)
			}
		}
		if _, ok := partialLists[m]; !ok && !goNames && !ofNames(m) && len(named) >= 3 {
			lists = append(lists, named)
		}
	}
	return lists
}

// ofNames reports whether list quotes a name of kindTable that is no key
// space's ("read", "member"): it is a list of names, which nameLists
// checks.
func ofNames(list string) bool {
	for _, w := range nameWordRe.FindAllStringSubmatch(list, -1) {
		if slices.Contains(kindNames(), w[1]) && !slices.Contains(Kinds(), w[1]) {
			return true
		}
	}
	return false
}

// spanLists returns the lists of span names in text ("etcdlock.Lock,
// TryLock and etcdlock.Unlock") that name two of spans or more.
func spanLists(text string, spans []string) [][]string {
	var lists [][]string
	for _, m := range spanListRe.FindAllString(text, -1) {
		var named []string
		for _, w := range spanWordRe.FindAllStringSubmatch(m, -1) {
			if s := "etcdlock." + w[1]; slices.Contains(spans, s) && !slices.Contains(named, s) {
				named = append(named, s)
			}
		}
		if len(named) >= 2 {
			lists = append(lists, named)
		}
	}
	return lists
}

// proseProblems checks texts' lists against kinds, kindTable's names and
// spans.
func proseProblems(texts []proseText, kinds, names, spans []string) []string {
	var problems []string
	for _, tx := range texts {
		for _, named := range nameLists(tx.text, names) {
			if missing := without(names, named); len(missing) > 0 {
				problems = append(problems, tx.where+": a list of kind names names "+strings.Join(named, ", ")+", not "+strings.Join(missing, ", "))
			}
		}
		for _, named := range kindLists(tx.text) {
			if missing := without(kinds, named); len(missing) > 0 {
				problems = append(problems, tx.where+": a list names "+strings.Join(named, ", ")+", not "+strings.Join(missing, ", "))
			}
		}
		var named []string
		for _, list := range spanLists(tx.text, spans) {
			named = append(named, list...)
		}
		if missing := without(spans, named); len(named) > 0 && len(missing) > 0 {
			problems = append(problems, tx.where+": its lists of spans name "+strings.Join(named, ", ")+", not "+strings.Join(missing, ", "))
		}
	}
	return problems
}

// without is all without those in named.
func without(all, named []string) []string {
	return slices.DeleteFunc(slices.Clone(all), func(s string) bool { return slices.Contains(named, s) })
}

// proseTexts returns the prose the lists are in: the comments of the
// Go files of etcdlock, etcdlocktest and the CLI, the CLI's strings (its
// help), and the paragraphs of the pages.
func proseTexts(t *testing.T) []proseText {
	t.Helper()
	var texts []proseText
	for _, dir := range []string{".", "etcdlocktest", "../cmd/fencelock"} {
		texts = append(texts, goProse(t, dir, dir == "../cmd/fencelock")...)
	}
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range append(pages, "../README.md", "../CONTRIBUTING.md", "PROTOCOL.md") {
		texts = append(texts, pageProse(t, p)...)
	}
	return texts
}

// goProse returns the comments of the Go files in dir, but its tests',
// and with strings, its string literals.
func goProse(t *testing.T, dir string, strs bool) []proseText {
	t.Helper()
	fset := token.NewFileSet()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var texts []proseText
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, cg := range f.Comments {
			texts = append(texts, proseText{fset.Position(cg.Pos()).String(), collapse(cg.Text())})
		}
		if !strs {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					texts = append(texts, proseText{fset.Position(lit.Pos()).String(), collapse(s)})
				}
			}
			return true
		})
	}
	return texts
}

// pageProse returns the paragraphs of the Markdown page at path, without
// its code blocks.
func pageProse(t *testing.T, path string) []proseText {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var texts []proseText
	var para strings.Builder
	inCode, line, start := false, 0, 1
	flush := func() {
		if s := collapse(para.String()); s != "" {
			texts = append(texts, proseText{path + ":" + strconv.Itoa(start), s})
		}
		para.Reset()
	}
	for l := range strings.Lines(string(b)) {
		line++
		switch {
		case strings.HasPrefix(l, "```"):
			inCode = !inCode
			flush()
		case inCode:
		case strings.TrimSpace(l) == "":
			flush()
		default:
			if para.Len() == 0 {
				start = line
			}
			para.WriteString(l)
		}
	}
	flush()
	return texts
}

// collapse is s with each run of white space one space.
func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }
