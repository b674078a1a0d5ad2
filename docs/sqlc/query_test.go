package sqlcbank_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// queries returns query.sql's statements by name, their comments removed.
func queries(t *testing.T) map[string]string {
	t.Helper()
	src, err := os.ReadFile("query.sql")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	name := ""
	for line := range strings.Lines(string(src)) {
		if m := nameRe.FindStringSubmatch(line); m != nil {
			name = m[1]
			continue
		}
		if name != "" && !strings.HasPrefix(strings.TrimSpace(line), "--") {
			out[name] += line
		}
	}
	return out
}

var nameRe = regexp.MustCompile(`^-- name: (\w+) :\w+`)

// TestQueriesFenced holds query.sql to the pattern: every fenced query
// matches the row only while fence <= @token and sets the fence to the
// token; the control query alone does neither. It also checks that the
// generated code in db has every query of query.sql (run go generate
// after editing it).
func TestQueriesFenced(t *testing.T) {
	qs := queries(t)
	for _, tc := range []struct {
		name, predicate, assignment string
	}{
		{"SetBalanceFenced", "fence <= @token", "fence = @token"},
		{"ClaimAccount", "fence <= @token", "fence = @token"},
		{"PutAccountFenced", "accounts.fence <= EXCLUDED.fence", "fence = EXCLUDED.fence"},
	} {
		q, ok := qs[tc.name]
		if !ok {
			t.Errorf("query.sql: no query %s", tc.name)
			continue
		}
		for _, want := range []string{tc.predicate, tc.assignment} {
			if !strings.Contains(q, want) {
				t.Errorf("query.sql: %s: got\n%s\nwant it to contain %q", tc.name, q, want)
			}
		}
	}
	if !strings.Contains(qs["PutAccountFenced"], "VALUES (@id, @balance, @token)") {
		t.Errorf("query.sql: PutAccountFenced: got\n%s\nwant the token inserted as the fence", qs["PutAccountFenced"])
	}
	if strings.Contains(qs["SetBalance"], "fence") {
		t.Errorf("query.sql: SetBalance, the control, mentions the fence: %s", qs["SetBalance"])
	}
	generated, err := os.ReadFile("db/query.sql.go")
	if err != nil {
		t.Fatal(err)
	}
	for name := range qs {
		if !strings.Contains(string(generated), "func (q *Queries) "+name+"(") {
			t.Errorf("db/query.sql.go: no method %s: run go generate ./docs/sqlc", name)
		}
	}
}
