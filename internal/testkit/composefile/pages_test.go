package composefile_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// page is one Markdown page of the documentation: README.md or a page
// under docs/.
type page struct {
	path string // relative to the repository's root
	text string
}

// pages returns README.md and every docs/*.md.
func pages(t *testing.T) []page {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	ps := []page{{path: "README.md", text: readFile(t, readmePath)}}
	for _, p := range paths {
		rel, _ := filepath.Rel(repoRoot, p)
		ps = append(ps, page{path: filepath.ToSlash(rel), text: readFile(t, p)})
	}
	if len(ps) < 2 {
		t.Fatalf("no pages under docs/")
	}
	return ps
}

var (
	linkRe    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRe = regexp.MustCompile(`(?m)^#+ (.+)$`)
	spanRe    = regexp.MustCompile("`([^`\n]+)`")
	markerRe  = regexp.MustCompile(`(?m)^<!-- (file|go): (\S+)(?: (\S+))? -->\n` + "```" + `\w*\n((?s:.*?))` + "```" + `\n`)
)

// prose returns text without its fenced code blocks.
func prose(text string) string {
	var b strings.Builder
	in := false
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, "```") {
			in = !in
			continue
		}
		if !in {
			b.WriteString(line)
		}
	}
	return b.String()
}

// spans returns the inline code spans of text's prose.
func spans(text string) []string {
	var s []string
	for _, m := range spanRe.FindAllStringSubmatch(prose(text), -1) {
		s = append(s, m[1])
	}
	return s
}

// blocks returns the fenced code blocks of text whose info string is one
// of langs ("" for a block with none), each as one string.
func blocks(text string, langs ...string) []string {
	var out []string
	var b strings.Builder
	in, keep := false, false
	for line := range strings.Lines(text) {
		if info, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "```"); ok {
			if in && keep {
				out = append(out, b.String())
			}
			if !in {
				keep = slices.Contains(langs, info)
				b.Reset()
			}
			in = !in
			continue
		}
		if in && keep {
			b.WriteString(line)
		}
	}
	return out
}

// slug returns GitHub's anchor for a heading.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestPageLinks checks every relative link on README.md and the docs/
// pages: its file exists and its #anchor names a heading there. Every page
// under docs/ must be linked from README.md.
func TestPageLinks(t *testing.T) {
	linked := map[string]bool{}
	for _, p := range pages(t) {
		for _, m := range linkRe.FindAllStringSubmatch(prose(p.text), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			resolved := p.path
			if file != "" {
				resolved = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(p.path), file)))
			}
			text, err := os.ReadFile(filepath.Join(repoRoot, resolved))
			if err != nil {
				t.Errorf("%s: link %s: got %v, want an existing file", p.path, target, err)
				continue
			}
			if p.path == "README.md" {
				linked[resolved] = true
			}
			if anchor != "" && !slices.ContainsFunc(headingRe.FindAllStringSubmatch(string(text), -1), func(h []string) bool {
				return slug(strings.TrimSpace(h[1])) == anchor
			}) {
				t.Errorf("%s: link %s: %s has no heading with anchor #%s", p.path, target, resolved, anchor)
			}
		}
	}
	for _, p := range pages(t)[1:] {
		if !linked[p.path] {
			t.Errorf("%s: not linked from README.md", p.path)
		}
	}
}

// TestPageCode checks the code blocks that a page says are taken from the
// repository, with a comment line before the block: "<!-- file: PATH -->"
// (the block is that whole file) or "<!-- go: PATH NAME -->" (the block is
// the declaration of NAME in the Go file PATH, without its doc comment).
// The Quickstart must be such blocks: its program and its SQL.
func TestPageCode(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range pages(t) {
		for _, m := range markerRe.FindAllStringSubmatch(p.text, -1) {
			kind, path, name, block := m[1], m[2], m[3], m[4]
			seen[p.path+" "+path+" "+name] = true
			src := readFile(t, filepath.Join(repoRoot, path))
			want := src
			if kind == "go" {
				want = goDecl(t, path, src, name)
			}
			if block != want {
				t.Errorf("%s: the block marked %s %s %s differs from the repository's:\n--- page\n%s--- %s\n%s", p.path, kind, path, name, block, path, want)
			}
		}
	}
	for _, want := range []string{
		"README.md docs/quickstart/main.go ",
		"README.md docs/quickstart/schema.sql ",
		"docs/s3.md fence/s3/example_test.go newS3Client",
		"docs/s3.md fence/s3/example_test.go createBucket",
		"docs/propagation.md fence/propagate/main_test.go newLedger",
		"docs/propagation.md fence/propagate/main_test.go setBalance",
		"docs/groups.md etcdlock/example_group_test.go consume",
		"docs/redis.md fence/redis/example_test.go withdraw",
		"docs/dynamodb.md fence/dynamodb/example_test.go transfer",
		"docs/gcs.md fence/gcs/example_test.go advanceCheckpoint",
		"docs/jetstream.md fence/jetstream/example_test.go newBucket",
		"docs/gorm.md fence/gorm/example_test.go withdraw",
		"docs/sqlc.md docs/sqlc/query.sql ",
		"docs/sqlc.md docs/sqlc/bank.go Fenced",
		"docs/sqlc.md docs/sqlc/withdraw.go Withdraw",
		"docs/azblob.md fence/azblob/example_test.go newAzuriteClient",
		"docs/azblob.md fence/azblob/example_test.go advanceWatermark",
		"docs/reading.md docs/reading/schema.sql ",
		"docs/effects.md docs/effects/main.go payOrder",
		"docs/effects.md docs/effects/main.go dispatch",
		"docs/effects.md docs/effects/main.go startMailService",
		"docs/reading.md docs/reading/kv.go countInvoice",
		"docs/reading.md docs/reading/transfer.go transfer",
		"docs/reading.md docs/reading/main.go unlock",
		"docs/reading.md docs/reading/main.go errInsufficientFunds",
		"docs/reading.md docs/reading/transfer.go transferClaimed",
		"docs/reading.md docs/reading/kv.go transferKV",
	} {
		if !seen[want] {
			t.Errorf("no marked block %q: the page's code is then checked by nothing", want)
		}
	}
}
