package composefile_test

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	figuresHeader = "| goal | latest figure | date | command |"
	figuresDate   = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)
	fastTierRow   = regexp.MustCompile(`(?m)^\| fast tier \(` + "`-short`" + `\) ≤ (\d+) s\b`)
)

// TestFiguresTable holds BENCHMARKS.md to opening with one table of
// figures: its first section is that table, every goal's row has a date
// and a command, and the fast tier's budget there is the one .ci/run
// enforces. README.md and CONTRIBUTING.md link to the table, so that they
// need not quote figures of their own.
func TestFiguresTable(t *testing.T) {
	bench := readFile(t, filepath.Join(repoRoot, "BENCHMARKS.md"))
	first := headingRe.FindAllStringSubmatchIndex(bench, 2)
	if len(first) < 2 || bench[first[1][2]:first[1][3]] != "Goals and latest figures" {
		t.Fatalf("BENCHMARKS.md: the first section after the title must be \"## Goals and latest figures\"")
	}
	section := bench[first[1][0]:]
	if next := strings.Index(section[3:], "\n## "); next >= 0 {
		section = section[:next+3]
	}
	_, table, ok := strings.Cut(section, figuresHeader+"\n|---|---|---|---|\n")
	if !ok {
		t.Fatalf("BENCHMARKS.md: the first section has no table headed %q", figuresHeader)
	}
	rows := 0
	for line := range strings.Lines(table) {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := splitRow(line)
		if len(cells) != 4 {
			t.Errorf("BENCHMARKS.md: row %q: got %d cells, want 4", strings.TrimSpace(line), len(cells))
			continue
		}
		if strings.HasPrefix(cells[0], "**") && cells[1] == "" { // a group's heading
			continue
		}
		rows++
		if !figuresDate.MatchString(cells[2]) {
			t.Errorf("BENCHMARKS.md: goal %q: date %q, want YYYY-MM-DD", cells[0], cells[2])
		}
		if cells[1] == "" || !strings.Contains(cells[3], "`") && !strings.HasPrefix(cells[3], "the same") {
			t.Errorf("BENCHMARKS.md: goal %q: want a figure and a command (or \"the same\")", cells[0])
		}
	}
	if rows < 10 {
		t.Fatalf("BENCHMARKS.md: %d goals in the table, want at least 10: is the parser blind?", rows)
	}
	m := fastTierRow.FindStringSubmatch(table)
	budget := fastBudgetRe.FindStringSubmatch(readFile(t, filepath.Join(repoRoot, ".ci", "run")))
	switch {
	case m == nil:
		t.Errorf("BENCHMARKS.md: no row \"| fast tier (`-short`) ≤ N s\" in the table")
	case budget != nil && m[1] != budget[1]:
		t.Errorf("BENCHMARKS.md says the fast tier's budget is %s s; .ci/run enforces %s s", m[1], budget[1])
	}
	for _, path := range []string{"README.md", "CONTRIBUTING.md"} {
		if !strings.Contains(readFile(t, filepath.Join(repoRoot, path)), "(BENCHMARKS.md#goals-and-latest-figures)") {
			t.Errorf("%s: no link to BENCHMARKS.md#goals-and-latest-figures", path)
		}
	}
}

// splitRow returns the trimmed cells of a Markdown table row; a "\|"
// inside a cell does not split it.
func splitRow(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	parts := strings.Split(strings.ReplaceAll(line, `\|`, "\x00"), "|")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(strings.TrimSpace(p), "\x00", `\|`)
	}
	return parts
}
