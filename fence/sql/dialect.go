package sqlfence

import (
	"fmt"
	"strconv"
)

// Dialect is the SQL a server speaks, as far as fenced writes differ:
// identifier quoting, placeholders, the upsert statement, how rows are
// counted, which errors mean "retry". The zero Dialect is not valid.
type Dialect int

const (
	// MySQL is MySQL and MariaDB (github.com/go-sql-driver/mysql).
	// Identifiers are quoted with backticks. The server's affected-rows
	// count is rows changed, not rows matched, unless the client sets
	// clientFoundRows; fenced writes work either way (see "Where the
	// servers differ" in the package documentation).
	MySQL Dialect = iota + 1
	// SQLite is SQLite 3.24.0 or later (modernc.org/sqlite, or any driver
	// for it). Identifiers are quoted with double quotes.
	SQLite
	// PostgreSQL is PostgreSQL through a database/sql driver, such as
	// pgx's github.com/jackc/pgx/v5/stdlib. Identifiers are quoted with
	// double quotes, placeholders are $1, $2, ....
	PostgreSQL
)

// String returns the dialect's name.
func (d Dialect) String() string {
	switch d {
	case MySQL:
		return "MySQL"
	case SQLite:
		return "SQLite"
	case PostgreSQL:
		return "PostgreSQL"
	}
	return "Dialect(" + strconv.Itoa(int(d)) + ")"
}

func (d Dialect) check() error {
	switch d {
	case MySQL, SQLite, PostgreSQL:
		return nil
	}
	return fmt.Errorf("%w: unknown dialect %d (want sqlfence.MySQL, SQLite or PostgreSQL)", ErrInvalidOption, int(d))
}

// quoteChar is the character that opens and closes a quoted identifier.
func (d Dialect) quoteChar() byte {
	if d == MySQL {
		return '`'
	}
	return '"'
}

// maxIdent is the longest identifier the dialect keeps whole: longer ones
// are refused or, in PostgreSQL, silently truncated (and might then name
// another table). Bytes for PostgreSQL, characters for MySQL; SQLite has
// no limit.
func (d Dialect) maxIdent() (n int, chars bool) {
	switch d {
	case MySQL:
		return 64, true
	case PostgreSQL:
		return 63, false
	}
	return 0, false
}

// stmt builds one statement with its arguments: each value is sent as a
// parameter, in the dialect's placeholder form.
type stmt struct {
	d    Dialect
	b    []byte
	args []any
}

func (s *stmt) sql(parts ...string) *stmt {
	for _, p := range parts {
		s.b = append(s.b, p...)
	}
	return s
}

// arg appends a placeholder for v.
func (s *stmt) arg(v any) *stmt {
	s.args = append(s.args, v)
	if s.d == PostgreSQL {
		s.b = append(s.b, '$')
		s.b = strconv.AppendInt(s.b, int64(len(s.args)), 10)
		return s
	}
	s.b = append(s.b, '?')
	return s
}

func (s *stmt) String() string { return string(s.b) }

// keyColumnDDL declares a text primary key column called name (not
// quoted: a fixed name of this package's). MySQL's is VARBINARY: its
// default collations compare case-insensitively and ignore trailing
// spaces, which would make "a", "A" and "a " one key and give them one
// floor.
func (d Dialect) keyColumnDDL(name string) string {
	q, _ := quoteIdent(d, "column", name)
	if d == MySQL {
		return q + " VARBINARY(767) NOT NULL PRIMARY KEY"
	}
	return q + " TEXT NOT NULL PRIMARY KEY"
}

// blobType is the type of a byte-string column.
func (d Dialect) blobType() string {
	switch d {
	case MySQL:
		return "LONGBLOB"
	case PostgreSQL:
		return "BYTEA"
	}
	return "BLOB"
}

// tableSuffix ends a CREATE TABLE: InnoDB in MySQL, for its row locks and
// transactions.
func (d Dialect) tableSuffix() string {
	if d == MySQL {
		return " ENGINE=InnoDB"
	}
	return ""
}
