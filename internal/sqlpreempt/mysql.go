package sqlpreempt

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/fencelock/fencelock/fence"
)

// endMySQL ends the transaction holding the row when it raised the fence
// to an older token, and describes what it left or could not end.
func (w Watch) endMySQL(ctx context.Context, conn *sql.Conn) error {
	if len(w.Row.LockData) == 0 {
		return errors.New("the row's key is of a type whose lock InnoDB's lock_data does not name in a way this package reads; nothing looked at what blocks it")
	}
	threads, err := w.holders(ctx, conn)
	if err != nil || len(threads) == 0 {
		return err
	}
	dirty, committed, err := w.tokens(ctx, conn)
	if err != nil {
		return err
	}
	h := threads[0]
	switch {
	case len(threads) > 1:
		return fmt.Errorf("blocked by connections %v, which hold the fence's row together; none ended", threads)
	case dirty == committed:
		return fmt.Errorf("blocked by connection %d, which holds the fence's row without having raised it (no fenced transaction, or one about to roll back)", h.thread)
	case dirty >= w.Token:
		return fmt.Errorf("blocked by connection %d, a fenced transaction of token %d, not older than this one's", h.thread, dirty)
	}
	// The connection may have ended that transaction since, and run
	// another's: end it only if it still runs the one that blocked. KILL
	// has no condition of its own: what is left is the time between the
	// two statements, in which the blocker may commit and its connection
	// start another holder's transaction, which the KILL then ends.
	var n int
	if err := conn.QueryRowContext(ctx, stillSQL, h.thread, h.trx).Scan(&n); err != nil || n == 0 {
		return err
	}
	// The id is the server's own number, formatted, not a caller's string.
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", h.thread)); err != nil {
		return fmt.Errorf("blocked by connection %d, a fenced transaction of an older token (%d), which could not be ended (the user needs to be the blocker's or to have CONNECTION ADMIN): %w", h.thread, dirty, err)
	}
	return nil
}

// holdersSQL lists the connections of the transactions that hold (not
// wait for: a holder may wait for another row) a lock others wait for on
// a row of the table %s (as InnoDB names it: `db`.`table`) whose key
// lock_data shows as one of %s.
const holdersSQL = "SELECT DISTINCT b.trx_mysql_thread_id, b.trx_id" +
	" FROM information_schema.INNODB_LOCK_WAITS w" +
	" JOIN information_schema.INNODB_LOCKS l ON l.lock_id = w.blocking_lock_id" +
	" JOIN information_schema.INNODB_TRX b ON b.trx_id = w.blocking_trx_id" +
	" WHERE (b.trx_requested_lock_id IS NULL OR b.trx_requested_lock_id <> w.blocking_lock_id)" +
	" AND l.lock_table = %s AND l.lock_data IN (%s)"

// holder is a transaction holding a row others wait for, and its
// connection.
type holder struct {
	thread int64
	trx    string
}

// stillSQL tells whether connection $1 still runs transaction $2.
const stillSQL = "SELECT count(*) FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = ? AND trx_id = ?"

// holders returns the connections holding the row that others wait for.
func (w Watch) holders(ctx context.Context, conn *sql.Conn) ([]holder, error) {
	table := "?"
	args := []any{w.Row.Table}
	if !w.Row.Qualified {
		table = "CONCAT('`', REPLACE(DATABASE(), '`', '``'), '`.', ?)"
	}
	for _, d := range w.Row.LockData {
		args = append(args, d)
	}
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(w.Row.LockData)), ", ")
	rows, err := conn.QueryContext(ctx, fmt.Sprintf(holdersSQL, table, marks), args...)
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &me) && me.Number == 1109: // ER_UNKNOWN_TABLE
		return nil, fmt.Errorf("looking at what blocks it: the server has no information_schema.INNODB_LOCK_WAITS (MySQL 8 moved lock waits to performance_schema.data_lock_waits, which is not read yet): %w", err)
	case err != nil:
		return nil, fmt.Errorf("looking at what blocks it (the user needs PROCESS): %w", err)
	}
	defer rows.Close()
	var ids []holder
	for rows.Next() {
		var h holder
		if err := rows.Scan(&h.thread, &h.trx); err != nil {
			return nil, fmt.Errorf("looking at what blocks it: %w", err)
		}
		ids = append(ids, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("looking at what blocks it: %w", err)
	}
	return ids, nil
}

// tokens reads the row's fence as its holder left it, uncommitted, and as
// committed (0 for no row).
func (w Watch) tokens(ctx context.Context, conn *sql.Conn) (dirty, committed fence.Token, err error) {
	q := "SELECT " + w.Row.Fence + " FROM " + w.Row.Table + " WHERE " + w.where(1)
	read := func(db interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}) (fence.Token, error) {
		var t sql.NullInt64
		err := db.QueryRowContext(ctx, q, w.Row.Values...).Scan(&t)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, nil
		}
		return fence.Token(t.Int64), err
	}
	if committed, err = read(conn); err != nil {
		return 0, 0, fmt.Errorf("reading the fence: %w", err)
	}
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadUncommitted, ReadOnly: true})
	if err != nil {
		return 0, 0, fmt.Errorf("reading the fence uncommitted: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if dirty, err = read(tx); err != nil {
		return 0, 0, fmt.Errorf("reading the fence uncommitted: %w", err)
	}
	return dirty, committed, nil
}

// Hex is how lock_data shows a binary key column's value (VARBINARY,
// BINARY, BLOB): 0x and its bytes in upper-case hex.
func Hex(b []byte) string { return "0x" + strings.ToUpper(hex.EncodeToString(b)) }

// Quoted is how lock_data shows a text key column's value (CHAR,
// VARCHAR): in single quotes, with NUL and \ escaped by a backslash and
// a single quote doubled, as an SQL literal writes it
// (ut_str_sql_format; TestPreemptKeys holds it). It is the value as it
// is only when the column's character set keeps it byte for byte in utf8
// (ASCII always does).
func Quoted(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case 0:
			b.WriteString(`\0`)
		case '\'':
			b.WriteString("''")
		case '\\':
			b.WriteString(`\\`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// LockData joins the ways each column of a key may show in lock_data
// (one slice per column, in the primary key's order) into the ways the
// key may: InnoDB joins a key's columns with ", ". A column with no way
// makes none.
func LockData(columns ...[]string) []string {
	out := []string{""}
	for i, ways := range columns {
		next := make([]string, 0, len(out)*len(ways))
		for _, o := range out {
			for _, w := range ways {
				if i > 0 {
					w = o + ", " + w
				}
				next = append(next, w)
			}
		}
		out = next
	}
	if len(columns) == 0 {
		return nil
	}
	return out
}
