package postgres

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// FuzzQuoteName: any name is either refused with ErrInvalidIdentifier or
// quoted so that it reads back as exactly its parts: no input can end the
// quoted identifier early and reach the SQL around it.
func FuzzQuoteName(f *testing.F) {
	for _, s := range [][2]string{{"public", "jobs"}, {"", "x"}, {`a"b`, `";DROP TABLE x;--`}, {"x\x00y", "z"}, {"ü", "\xff"}, {strings.Repeat("n", 64), "t"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, schema, table string) {
		for _, name := range []pgx.Identifier{{table}, {schema, table}} {
			q, err := quoteName("table", name)
			if err != nil {
				if !errors.Is(err, ErrInvalidIdentifier) {
					t.Fatalf("quoteName(%q): error %v does not match ErrInvalidIdentifier", name, err)
				}
				continue
			}
			got, ok := unquote(q)
			if !ok || len(got) != len(name) {
				t.Fatalf("quoteName(%q) = %s, which does not read back (%q)", name, q, got)
			}
			for i := range name {
				if got[i] != name[i] {
					t.Fatalf("quoteName(%q) = %s reads back as %q", name, q, got)
				}
			}
		}
	})
}

// unquote parses a dot-separated list of double-quoted identifiers, as
// PostgreSQL reads them ("" is a quote inside one).
func unquote(s string) ([]string, bool) {
	var parts []string
	for {
		if !strings.HasPrefix(s, `"`) {
			return nil, false
		}
		s = s[1:]
		var b strings.Builder
		for {
			i := strings.IndexByte(s, '"')
			if i < 0 {
				return nil, false
			}
			b.WriteString(s[:i])
			s = s[i+1:]
			if strings.HasPrefix(s, `"`) {
				b.WriteByte('"')
				s = s[1:]
				continue
			}
			break
		}
		parts = append(parts, b.String())
		if s == "" {
			return parts, true
		}
		if !strings.HasPrefix(s, ".") {
			return nil, false
		}
		s = s[1:]
	}
}
