// Package sqlfence makes writes through database/sql fenced: a write
// carrying an older [fence.Token] than one the database has already
// accepted is refused by the database itself, atomically, however late it
// arrives. It speaks three dialects: [MySQL] (and MariaDB), [SQLite] and
// [PostgreSQL].
package sqlfence
