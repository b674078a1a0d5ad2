package composefile_test

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	fastBudgetRe = regexp.MustCompile(`(?m)^fast_budget=(\d+)\b`)
	budgetProse  = regexp.MustCompile(`\*\*budget is (\d+) s\*\*`)
)

// TestFastTierBudget holds CONTRIBUTING.md's budget for the fast tier to
// the one .ci/run enforces, and checks that .ci/run runs the fast tier as a
// contributor does (-short, CI unset) before the README's command.
func TestFastTierBudget(t *testing.T) {
	run := readFile(t, filepath.Join(repoRoot, ".ci", "run"))
	m := fastBudgetRe.FindStringSubmatch(run)
	if m == nil {
		t.Fatal(".ci/run: no fast_budget=N line")
	}
	p := budgetProse.FindStringSubmatch(readFile(t, filepath.Join(repoRoot, "CONTRIBUTING.md")))
	if p == nil {
		t.Fatal("CONTRIBUTING.md: no \"**budget is N s**\" in its Two tiers")
	}
	if p[1] != m[1] {
		t.Errorf("CONTRIBUTING.md says the fast tier's budget is %s s; .ci/run enforces %s s", p[1], m[1])
	}
	fast := strings.Index(run, "CI= go test -short -count=1 ./...")
	readme := strings.Index(run, "bash .ci/setup.sh && go test ./...")
	if fast < 0 || readme < 0 || fast > readme {
		t.Errorf(".ci/run must time \"CI= go test -short -count=1 ./...\" before the README's command (at %d and %d)", fast, readme)
	}
}
