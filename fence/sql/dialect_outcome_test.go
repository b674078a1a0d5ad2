package sqlfence

import (
	"database/sql"
	"errors"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fencelock/fencelock/fence"
)

// An error that says the server ended the session (MySQL 1927
// connection killed, 1053 server shutdown; PostgreSQL class 08, 57P, XX)
// may arrive after a commit, whichever dialect's statement was sent: the
// dialect check (answeredAs) must not turn it into "nothing was written"
// (ErrDialect). A statement of another dialect can run: SQLite's
// `UPDATE "t" SET ... = ? WHERE ...` parses on MySQL with ANSI_QUOTES,
// PostgreSQL's on SQLite, and COMMIT on every server.
func TestDialectMismatchKeepsUnknownOutcome(t *testing.T) {
	sessionEnded := []struct {
		name   string
		d      Dialect // the Table's / Fences' dialect
		server error
	}{
		{"SQLite statement, MySQL server killed", SQLite, &mysql.MySQLError{Number: 1927, Message: "Connection was killed"}},
		{"PostgreSQL statement, MySQL server shut down", PostgreSQL, &mysql.MySQLError{Number: 1053, Message: "Server shutdown in progress"}},
		{"MySQL statement, PostgreSQL admin shutdown", MySQL, &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}},
		{"SQLite statement, PostgreSQL connection failure", SQLite, &pgconn.PgError{Code: "08006", Message: "connection failure"}},
	}
	var db *sql.DB // not a *sql.Tx: an autocommit statement
	for _, c := range sessionEnded {
		// Same-dialect control: the library's own rule says "unknown".
		if _, answered := answeredAs(c.server); !answered {
			t.Fatalf("%s: answeredAs does not recognise the error", c.name)
		}
		if err := c.d.writeError(db, "update", "t/a", 5, c.server); !errors.Is(err, fence.ErrUnknownOutcome) {
			t.Errorf("%s: writeError = %v; want fence.ErrUnknownOutcome (errors.Is(ErrDialect) = %v)", c.name, err, errors.Is(err, ErrDialect))
		}
		if err := c.d.commitError("t/a", 5, c.server); !errors.Is(err, fence.ErrUnknownOutcome) {
			t.Errorf("%s: commitError = %v; want fence.ErrUnknownOutcome", c.name, err)
		}
	}
}
