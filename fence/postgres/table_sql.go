package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/nilcheck"
)

// prepare checks a fenced row write's arguments, before any I/O, and builds
// its statement: $1 is the key, $2 the token, $3... the assigned values.
func (t *Table) prepare(ctx context.Context, db DB, key any, token fence.Token, set []Assignment,
	build func(cols []column) string) (string, []any, error) {
	if err := checkWrite(ctx, db, key, token); err != nil {
		return "", nil, err
	}
	cols, err := t.columns(set)
	if err != nil {
		return "", nil, err
	}
	args := make([]any, 0, 2+len(set))
	args = append(args, key, int64(token))
	for _, a := range set {
		args = append(args, a.value)
	}
	return build(cols), args, nil
}

// checkWrite checks what every fenced write needs, in the order the fence
// package's conformance suite expects: arguments, then the context.
func checkWrite(ctx context.Context, db DB, key any, token fence.Token) error {
	if err := checkDB(db); err != nil {
		return err
	}
	if s, ok := key.(string); key == nil || ok && s == "" {
		return fmt.Errorf("%w: empty key", fence.ErrInvalidKey)
	}
	if err := token.Validate(); err != nil {
		return err
	}
	return checkCtx(ctx)
}

// column is an assigned column, quoted, and whether its value is added to
// it ([Add]) rather than set.
type column struct {
	q   string
	add bool
}

// columns returns the assigned columns, quoted, refusing empty, duplicate
// and reserved (key, fence) ones.
func (t *Table) columns(set []Assignment) ([]column, error) {
	cols := make([]column, len(set))
	seen := make(map[string]bool, len(set))
	for i, a := range set {
		q, err := quoteIdent("column", a.column)
		if err != nil {
			return nil, err
		}
		switch {
		case a.column == t.keyRaw || a.column == t.fenRaw:
			return nil, fmt.Errorf("%w: column %q is the table's key or fence column", ErrInvalidArgument, a.column)
		case a.add && nilcheck.IsNil(a.value):
			return nil, fmt.Errorf("%w: Add(%q, nil): no amount to add (it would set the column to NULL)", ErrInvalidArgument, a.column)
		case seen[a.column]:
			return nil, fmt.Errorf("%w: column %q assigned twice", ErrInvalidArgument, a.column)
		}
		seen[a.column] = true
		cols[i] = column{q: q, add: a.add}
	}
	return cols, nil
}

func (t *Table) updateSQL(cols []column) string {
	var b strings.Builder
	b.WriteString("UPDATE " + t.name + " SET ")
	for i, c := range cols {
		b.WriteString(c.q + " = ")
		if c.add {
			b.WriteString(c.q + " + ")
		}
		b.WriteString("$" + strconv.Itoa(i+3) + ", ")
	}
	b.WriteString(t.fence + " = $2 WHERE " + t.key + " = $1 AND " + t.fence + " <= $2")
	return b.String()
}

// upsertSQL builds the upsert. Its INSERT takes its row from a SELECT that
// gives none when the row's fence, as the statement's snapshot shows it, is
// above the token: then no BEFORE INSERT row trigger fires and no column
// default (a sequence) is evaluated. The ON CONFLICT condition still decides
// in every other case, a newer holder's write committed since included. An
// added column ([Add]) is inserted as its delta and added to an existing
// row's value.
func (t *Table) upsertSQL(cols []column) string {
	var b strings.Builder
	b.WriteString("INSERT INTO " + t.name + " AS cur (" + t.key)
	for _, c := range cols {
		b.WriteString(", " + c.q)
	}
	b.WriteString(", " + t.fence + ") SELECT $1")
	for i := range cols {
		b.WriteString(", $" + strconv.Itoa(i+3))
	}
	b.WriteString(", $2 WHERE NOT EXISTS (SELECT FROM " + t.name + " WHERE " + t.key + " = $1 AND " + t.fence + " > $2)")
	b.WriteString(" ON CONFLICT (" + t.key + ") DO UPDATE SET ")
	for _, c := range cols {
		b.WriteString(c.q + " = ")
		if c.add {
			b.WriteString("cur." + c.q + " + ")
		}
		b.WriteString("EXCLUDED." + c.q + ", ")
	}
	b.WriteString(t.fence + " = EXCLUDED." + t.fence + " WHERE cur." + t.fence + " <= EXCLUDED." + t.fence)
	return b.String()
}
