package sqlfence

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/pgtag"
)

// A fenced transaction's statement raising a fence waits for any other
// transaction that holds the fence's row. When that transaction belongs to
// a holder that froze with it open (a GC pause, a stopped process, a
// suspended VM whose TCP connection stays up), the wait lasts as long as
// the freeze, long after that holder's lease ended and the waiter got the
// lock. So on MySQL and MariaDB a statement that has waited preemptAfter
// looks, on a connection of its own, at the transactions holding the row
// (InnoDB's lock waits), reads the row as they left it (READ UNCOMMITTED)
// and as committed, and ends the connection of the holder (KILL
// CONNECTION) when it raised the fence to an older token than the
// waiter's: that transaction is rolled back, its holder gets ErrTerminated,
// and the statement goes on. The unblocked path costs a timer that is
// stopped.

// Defaults of [WithPreemptAfter] and of how often a waiting statement
// looks again.
const (
	defaultPreemptAfter = 100 * time.Millisecond
	preemptEvery        = 250 * time.Millisecond
)

// preemption is one fence statement's watch: claim's row, in f, waited for
// by a transaction of pool.
type preemption struct {
	f     *Fences
	pool  *sql.DB // nil: no other connection to look from
	after time.Duration
	claim fence.Claim
}

// guard runs advance, the statement raising p.claim's fence, under the
// watch. When ctx ends meanwhile, the error says so, and names what the
// statement was waiting for if the watch found it.
func (p preemption) guard(ctx context.Context, advance func() error) (err error) {
	stop := p.watch(ctx)
	// Deferred, so that a panic in advance (a tracer's) stops the watch
	// too.
	defer func() {
		found, watching := stop()
		if err == nil || ctx.Err() == nil || errors.Is(err, fence.ErrStale) {
			return
		}
		why := ""
		if found != nil {
			why = " (" + found.Error() + ")"
		} else if !watching {
			why = " (nothing looked at what it waited for: preemption is off, or the handle has no other connection to look from)"
		}
		err = fmt.Errorf("sqlfence: fenced transaction on %s: the context ended (%w) while it was raising the fence%s; the transaction was rolled back and nothing was written",
			p.claim.Resource, context.Cause(ctx), why)
	}()
	return advance()
}

// watch starts the watch over the statement about to raise p.claim's
// fence, and returns what stops it once the statement has returned, which
// returns what the watch found and could not end, and whether there was a
// watch at all. Until p.after has passed the watch is a timer alone.
func (p preemption) watch(ctx context.Context) (stop func() (error, bool)) {
	if p.after <= 0 || p.pool == nil || (p.f.d != MySQL && p.f.d != PostgreSQL) {
		return func() (error, bool) { return nil, false }
	}
	ctx, cancel := context.WithCancel(ctx)
	var (
		wg    sync.WaitGroup
		found error // set by the watch, read once it has returned
	)
	wg.Add(1)
	timer := time.AfterFunc(p.after, func() {
		defer wg.Done()
		found = p.run(ctx)
	})
	return func() (error, bool) {
		cancel()
		if timer.Stop() {
			wg.Done()
		}
		wg.Wait()
		return found, true
	}
}

// run looks at the row's holders now and then every preemptEvery until
// ctx ends, ending those older than the claim. It returns what it could
// not do, for the statement's error.
func (p preemption) run(ctx context.Context) error {
	var (
		conn *sql.Conn
		last error
	)
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return last
		case <-t.C:
		}
		if conn == nil {
			c, err := p.pool.Conn(ctx)
			if err != nil {
				last = fmt.Errorf("taking a connection to look at what blocks it: %w", err)
				t.Reset(preemptEvery)
				continue
			}
			conn = c
		}
		var err error
		if p.f.d == PostgreSQL {
			err = p.endPostgresBlockers(ctx, conn)
		} else {
			err = p.endBlockers(ctx, conn)
		}
		if ctx.Err() != nil && last != nil {
			return last // a look the end cut short: keep what the one before found
		}
		last = err
		t.Reset(preemptEvery)
	}
}

// endBlockers ends the transaction holding the claim's row when it raised
// the fence to an older token, and describes what it left or could not
// end.
func (p preemption) endBlockers(ctx context.Context, conn *sql.Conn) error {
	threads, err := p.holders(ctx, conn)
	if err != nil || len(threads) == 0 {
		return err
	}
	dirty, committed, err := p.tokens(ctx, conn)
	if err != nil {
		return err
	}
	h := threads[0]
	switch {
	case len(threads) > 1:
		return fmt.Errorf("blocked by connections %v, which hold the fence's row together; none ended", threads)
	case dirty == committed:
		return fmt.Errorf("blocked by connection %d, which holds the fence's row without having raised it (no fenced transaction, or one about to roll back)", h.thread)
	case dirty >= p.claim.Token:
		return fmt.Errorf("blocked by connection %d, a fenced transaction of token %d, not older than this one's", h.thread, dirty)
	}
	// The connection may have ended that transaction since, and run
	// another's: end it only if it still runs the one that blocked. KILL
	// has no condition of its own: what is left is the time between the
	// two statements, in which the blocker may commit and its connection
	// start another holder's transaction, which the KILL then ends (the
	// package doc says so).
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
// $2's row of the table $1 (as InnoDB names them: `db`.`table`, and the
// key in hex).
const holdersSQL = "SELECT DISTINCT b.trx_mysql_thread_id, b.trx_id" +
	" FROM information_schema.INNODB_LOCK_WAITS w" +
	" JOIN information_schema.INNODB_LOCKS l ON l.lock_id = w.blocking_lock_id" +
	" JOIN information_schema.INNODB_TRX b ON b.trx_id = w.blocking_trx_id" +
	" WHERE (b.trx_requested_lock_id IS NULL OR b.trx_requested_lock_id <> w.blocking_lock_id)" +
	" AND l.lock_table = %s AND l.lock_data = ?"

// holder is a transaction holding a row others wait for, and its
// connection.
type holder struct {
	thread int64
	trx    string
}

// stillSQL tells whether connection $1 still runs transaction $2.
const stillSQL = "SELECT count(*) FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = ? AND trx_id = ?"

// holders returns the connections holding the claim's row that others
// wait for.
func (p preemption) holders(ctx context.Context, conn *sql.Conn) ([]holder, error) {
	table := "?"
	args := []any{p.f.name}
	if !p.f.qualified {
		table = "CONCAT('`', REPLACE(DATABASE(), '`', '``'), '`.', ?)"
	}
	args = append(args, "0x"+strings.ToUpper(hex.EncodeToString([]byte(p.claim.Resource))))
	rows, err := conn.QueryContext(ctx, fmt.Sprintf(holdersSQL, table), args...)
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &me) && me.Number == 1109: // ER_UNKNOWN_TABLE
		return nil, fmt.Errorf("looking at what blocks it: the server has no information_schema.INNODB_LOCK_WAITS (MySQL 8 moved lock waits to performance_schema.data_lock_waits, which this package does not read yet): %w", err)
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

// tokens reads the claim's fence as its holder left it, uncommitted, and
// as committed (0 for no row).
func (p preemption) tokens(ctx context.Context, conn *sql.Conn) (dirty, committed fence.Token, err error) {
	q := "SELECT token FROM " + p.f.name + " WHERE resource = ?"
	read := func(db interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}) (fence.Token, error) {
		var t int64
		err := db.QueryRowContext(ctx, q, []byte(p.claim.Resource)).Scan(&t)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, nil
		}
		return fence.Token(t), err
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

// endPostgresBlockers ends, on PostgreSQL, the transaction holding the
// claim's fence row when every token it carries is older than the claim's
// (its tag, internal/pgtag), and describes what it left or could not end.
// The waiter's own process id is not known through database/sql: the
// holder is found by the row's xmax, which needs the row to have existed
// before the holder's transaction.
func (p preemption) endPostgresBlockers(ctx context.Context, conn *sql.Conn) error {
	rows, err := conn.QueryContext(ctx, pgtag.BlockersSQL("SELECT xmax::text FROM "+p.f.name+" WHERE resource = $2"), int64(0), p.claim.Resource)
	if err != nil {
		return fmt.Errorf("looking at what blocks it: %w", err)
	}
	type blocker struct {
		pid int64
		tag string
		xid sql.NullString
	}
	var bs []blocker
	for rows.Next() {
		var b blocker
		if err := rows.Scan(&b.pid, &b.tag, &b.xid); err != nil {
			rows.Close()
			return fmt.Errorf("looking at what blocks it: %w", err)
		}
		bs = append(bs, b)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("looking at what blocks it: %w", err)
	}
	rows.Close()
	var errs []error
	for _, b := range bs {
		tag, ok := pgtag.Parse(b.tag)
		lo, hi := tag.Lo, tag.Hi
		w := pgtag.Waiter{Claims: []pgtag.Claim{{Hash: pgtag.Hash(p.claim.Resource), Token: int64(p.claim.Token)}}}
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("blocked by session %d, which is no fenced transaction (application_name %q)", b.pid, b.tag))
		case !w.Ends(tag):
			errs = append(errs, fmt.Errorf("blocked by session %d, a fenced transaction of tokens %d to %d, not all older than this one's", b.pid, lo, hi))
		default:
			if _, err := conn.ExecContext(ctx, pgtag.TerminateSQL, b.pid, b.tag, b.xid); err != nil {
				errs = append(errs, fmt.Errorf("blocked by session %d, a fenced transaction of older tokens (%d to %d), which could not be ended (the role needs to be the blocker's, or to have pg_signal_backend for a role that is no superuser): %w", b.pid, lo, hi, err))
			}
		}
	}
	return errors.Join(errs...)
}
