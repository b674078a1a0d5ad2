package sqlfence

import (
	"database/sql/driver"
	"reflect"
)

// Assignment sets one column in a fenced write ([Table.Update],
// [Table.Upsert]). Create it with [Set] or [Add]; the zero Assignment
// names no column and is refused.
type Assignment struct {
	column string
	value  any
	add    bool // column = column + value
}

// Set returns an assignment of value, sent as a query parameter, to
// column.
func Set(column string, value any) Assignment { return Assignment{column: column, value: value} }

// Add returns an assignment that adds delta, sent as a query parameter,
// to column's current value in the same statement (column = column + ?),
// so that a counter or a balance needs no read in the client:
//
//	accounts.Update(ctx, tx, "acct-A", token, sqlfence.Add("balance", -100))
//
// In [Table.Update] it applies to the row as the statement finds it,
// under the row's lock. In [Table.Upsert] a new row gets delta itself,
// as if the column had been 0, and an existing row column + delta.
// A NULL column stays NULL, as SQL's + has it.
func Add(column string, delta any) Assignment {
	return Assignment{column: column, value: delta, add: true}
}

// update appends "col = ?" (or "col = col + ?") to s, col being a's
// column quoted.
func (a Assignment) update(s *stmt, col string) {
	s.sql(col, " = ")
	if a.add {
		s.sql(col, " + ")
	}
	s.arg(a.value)
}

// onConflict appends the assignment of an upsert's existing row in
// PostgreSQL and SQLite, where alias names that row and excluded the
// proposed one.
func (a Assignment) onConflict(s *stmt, col, alias string) {
	if a.add {
		s.sql(col, " = ", alias, ".", col, " + excluded.", col)
		return
	}
	s.sql(col, " = excluded.", col)
}

// onDuplicate appends the assignment of an upsert's existing row in MySQL,
// where ok is the fence condition: the column is left as it is when ok is
// false.
func (a Assignment) onDuplicate(s *stmt, col, ok string) {
	v := "VALUES(" + col + ")"
	if a.add {
		v = col + " + " + v
	}
	s.sql(col, " = IF(", ok, ", ", v, ", ", col, ")")
}

// holds appends the condition under which a row that MySQL did not count
// as updated holds this assignment: the value for a Set (<=> is NULL-safe
// equality); for an Add, a delta of 0 (any other changes the row) or, for
// an upsert, which may have inserted the row, the delta as the value.
func (a Assignment) holds(s *stmt, col string, upsert bool) {
	switch {
	case !a.add:
		s.sql(" AND ", col, " <=> ").arg(a.value)
	case upsert:
		s.sql(" AND (", col, " <=> ").arg(a.value).sql(" OR ").arg(a.value).sql(" = 0)")
	default:
		s.sql(" AND ").arg(a.value).sql(" = 0")
	}
}

// isAmount reports whether v is an amount Add can send alike to every
// dialect: an integer or a float, or a driver.Valuer (a decimal type). A
// string, a bool or a []byte is read three ways by MySQL, SQLite and
// PostgreSQL (SQLite adds "abc" as 0), so it is refused.
func isAmount(v any) bool {
	if _, ok := v.(driver.Valuer); ok {
		return true
	}
	switch reflect.ValueOf(v).Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}
