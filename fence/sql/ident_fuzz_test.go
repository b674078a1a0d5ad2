package sqlfence

import (
	"errors"
	"strings"
	"testing"
)

// FuzzQuoteName: in every dialect, any name is either refused with
// ErrInvalidIdentifier or quoted so that it reads back as exactly its
// parts: no input can end the quoted identifier early and reach the SQL
// around it.
func FuzzQuoteName(f *testing.F) {
	for _, s := range [][2]string{{"app", "jobs"}, {"", "x"}, {`a"b`, `";DROP TABLE x;--`}, {"a`b", "`; DROP TABLE x; --"},
		{"x\x00y", "z"}, {"ü", "\xff"}, {strings.Repeat("n", 64), "t"}, {strings.Repeat("ü", 64), "t "}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, schema, table string) {
		for _, d := range []Dialect{MySQL, SQLite, PostgreSQL} {
			for _, name := range []Identifier{{table}, {schema, table}} {
				q, err := quoteName(d, "table", name)
				if err != nil {
					if !errors.Is(err, ErrInvalidIdentifier) {
						t.Fatalf("%s: quoteName(%q): error %v does not match ErrInvalidIdentifier", d, name, err)
					}
					continue
				}
				got, ok := unquote(q, d.quoteChar())
				if !ok || len(got) != len(name) {
					t.Fatalf("%s: quoteName(%q) = %s, which does not read back (%q)", d, name, q, got)
				}
				for i := range name {
					if got[i] != name[i] {
						t.Fatalf("%s: quoteName(%q) = %s reads back as %q", d, name, q, got)
					}
				}
			}
		}
	})
}

// unquote parses a dot-separated list of identifiers quoted with qc, as
// the server reads them (qc doubled is one qc inside one).
func unquote(s string, qc byte) ([]string, bool) {
	var parts []string
	for {
		if s == "" || s[0] != qc {
			return nil, false
		}
		s = s[1:]
		var b strings.Builder
		for {
			i := strings.IndexByte(s, qc)
			if i < 0 {
				return nil, false
			}
			b.WriteString(s[:i])
			s = s[i+1:]
			if s != "" && s[0] == qc {
				b.WriteByte(qc)
				s = s[1:]
				continue
			}
			break
		}
		parts = append(parts, b.String())
		if s == "" {
			return parts, true
		}
		if s[0] != '.' {
			return nil, false
		}
		s = s[1:]
	}
}

// TestQuoteIdentLimits: each dialect's length limit, counted as the
// server counts it (MySQL in characters, PostgreSQL in bytes).
func TestQuoteIdentLimits(t *testing.T) {
	tests := []struct {
		name string
		d    Dialect
		id   string
		ok   bool
	}{
		{"MySQL 64 characters", MySQL, strings.Repeat("ü", 64), true},
		{"MySQL 65 characters", MySQL, strings.Repeat("n", 65), false},
		{"MySQL trailing space", MySQL, "t ", false},
		{"PostgreSQL 63 bytes", PostgreSQL, strings.Repeat("n", 63), true},
		{"PostgreSQL 64 bytes", PostgreSQL, strings.Repeat("ü", 32), false},
		{"SQLite long", SQLite, strings.Repeat("n", 500), true},
		{"NUL", SQLite, "a\x00", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := quoteIdent(tt.d, "column", tt.id)
			if (err == nil) != tt.ok || err != nil && !errors.Is(err, ErrInvalidIdentifier) {
				t.Fatalf("quoteIdent: got %v, want ok=%v (or ErrInvalidIdentifier)", err, tt.ok)
			}
		})
	}
}

func TestSQLiteSupportsUpsert(t *testing.T) {
	tests := []struct {
		version string
		ok      bool
	}{
		{"3.24.0", true}, {"3.45.1", true}, {"4.0", true}, {"3.23.1", false}, {"3.8.11", false}, {"2.8.17", false}, {"x", false},
	}
	for _, tt := range tests {
		err := sqliteSupportsUpsert(tt.version)
		if (err == nil) != tt.ok || err != nil && !errors.Is(err, ErrUnsupported) {
			t.Errorf("sqliteSupportsUpsert(%q): got %v, want ok=%v (or ErrUnsupported)", tt.version, err, tt.ok)
		}
	}
}

func TestSQLiteSupportsReturning(t *testing.T) {
	tests := []struct {
		version string
		ok      bool
	}{
		{"3.35.0", true}, {"3.54.1", true}, {"4.0", true}, {"3.34.1", false}, {"3.24.0", false}, {"x", false},
	}
	for _, tt := range tests {
		err := sqliteSupportsReturning(tt.version)
		if (err == nil) != tt.ok || err != nil && !errors.Is(err, ErrUnsupported) {
			t.Errorf("sqliteSupportsReturning(%q): got %v, want ok=%v (or ErrUnsupported)", tt.version, err, tt.ok)
		}
	}
}
