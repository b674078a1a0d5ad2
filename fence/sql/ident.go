package sqlfence

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Identifier is a possibly schema-qualified SQL name, one part per
// element: Identifier{"accounts"}, Identifier{"billing", "accounts"} (a
// database in MySQL, a schema in PostgreSQL, an attached database in
// SQLite). It is quoted for the [Dialect]; its parts are never
// interpreted.
type Identifier []string

// quoteName checks a possibly qualified name and returns it quoted for d.
func quoteName(d Dialect, what string, name Identifier) (string, error) {
	if len(name) == 0 {
		return "", fmt.Errorf("%w: empty %s name", ErrInvalidIdentifier, what)
	}
	var b strings.Builder
	for i, part := range name {
		q, err := quoteIdent(d, what, part)
		if err != nil {
			return "", err
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(q)
	}
	return b.String(), nil
}

// quoteIdent checks one name and returns it quoted for d: the quote
// character doubled inside, so that no name can end the quoting early.
func quoteIdent(d Dialect, what, name string) (string, error) {
	if err := checkIdent(d, what, name); err != nil {
		return "", err
	}
	q := string(d.quoteChar())
	return q + strings.ReplaceAll(name, q, q+q) + q, nil
}

func checkIdent(d Dialect, what, s string) error {
	max, chars := d.maxIdent()
	n := len(s)
	if chars {
		n = utf8.RuneCountInString(s)
	}
	var why string
	switch {
	case s == "":
		why = "is empty"
	case strings.IndexByte(s, 0) >= 0:
		why = "contains a NUL byte"
	case !utf8.ValidString(s):
		why = "is not valid UTF-8"
	case max > 0 && n > max:
		why = fmt.Sprintf("is %d long, over %s's %d", n, d, max)
	case d == MySQL && strings.TrimRight(s, " ") != s:
		why = "ends with a space, which MySQL does not allow"
	default:
		return nil
	}
	return fmt.Errorf("%w: %s name %q %s", ErrInvalidIdentifier, what, s, why)
}
