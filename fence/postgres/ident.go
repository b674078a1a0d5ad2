package postgres

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// maxIdentLen is PostgreSQL's limit on identifiers (NAMEDATALEN-1 bytes).
// Longer names would be truncated silently, and could then name another
// table or column.
const maxIdentLen = 63

// quoteName checks a possibly schema-qualified name and returns it quoted.
func quoteName(what string, name pgx.Identifier) (string, error) {
	if len(name) == 0 {
		return "", fmt.Errorf("%w: empty %s name", ErrInvalidIdentifier, what)
	}
	for _, part := range name {
		if err := checkIdent(what, part); err != nil {
			return "", err
		}
	}
	return name.Sanitize(), nil
}

// quoteIdent checks a single (column) name and returns it quoted.
func quoteIdent(what, name string) (string, error) {
	if err := checkIdent(what, name); err != nil {
		return "", err
	}
	return pgx.Identifier{name}.Sanitize(), nil
}

func checkIdent(what, s string) error {
	var why string
	switch {
	case s == "":
		why = "is empty"
	case strings.IndexByte(s, 0) >= 0:
		why = "contains a NUL byte"
	case !utf8.ValidString(s):
		why = "is not valid UTF-8"
	case len(s) > maxIdentLen:
		why = fmt.Sprintf("is %d bytes long, over PostgreSQL's %d", len(s), maxIdentLen)
	default:
		return nil
	}
	return fmt.Errorf("%w: %s name %q %s", ErrInvalidIdentifier, what, s, why)
}

// quoteLiteral quotes s as an SQL string literal (standard_conforming_strings
// on, as it is by default since PostgreSQL 9.1). s has no NUL byte.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
