package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/pgtag"
)

// A fenced transaction's guard (the statement that raises its fences) waits
// for any other transaction that holds one of those fences' rows. When that
// transaction belongs to a holder that froze with it open (a GC pause, a
// stopped process, a suspended VM whose TCP connection stays up), the wait
// lasts as long as the freeze, long after that holder's lease ended and the
// waiter got the lock. So a guard that has waited preemptAfter looks at
// what blocks it, on a connection of its own, and ends the session of every
// blocker that is a fenced transaction of older tokens only
// (pg_terminate_backend): that transaction is rolled back, its holder gets
// ErrTerminated from its next statement, and the guard goes on. The
// unblocked path costs nothing: a timer that is stopped.
//
// A fenced transaction makes its tokens visible to the others as its
// session's application_name, set for the transaction alone in the guard
// statement itself (internal/pgtag).

// Defaults of [WithPreemptAfter] and of how often a waiting guard looks
// again.
const (
	defaultPreemptAfter = 100 * time.Millisecond
	preemptEvery        = 250 * time.Millisecond
)

// waiterOf returns the waiter of claims (see pgtag.Waiter).
func waiterOf(claims []fence.Claim, valid func() bool) pgtag.Waiter {
	w := pgtag.Waiter{Valid: valid}
	for _, c := range claims {
		w.Claims = append(w.Claims, pgtag.Claim{Hash: pgtag.Hash(c.Resource), Token: int64(c.Token)})
	}
	return w
}

// holderValid returns a waiter's validity test for h: nil when h tells
// nothing of it.
func holderValid(h any) func() bool {
	type doner interface{ Done() <-chan struct{} }
	d, hasDone := h.(doner)
	e, hasExp := h.(fence.Expirer)
	if !hasDone || !hasExp {
		return nil
	}
	return func() bool {
		select {
		case <-d.Done():
			return false
		default:
		}
		return time.Now().Before(e.ValidUntil())
	}
}

// preemption is one transaction's watch over its guard.
type preemption struct {
	after time.Duration // 0: off
	w     pgtag.Waiter
	pool  *pgxpool.Pool // nil: the handle is no pool
	// rows, when set, lists the xmax of the rows the statement claims, its
	// keys rowKeys ($2); see pgtag.BlockersSQL.
	rows    string
	rowKeys any
	// vet, when set, says why no blocker may be ended now (nil: they may);
	// run on the watch's connection before each look.
	vet func(context.Context, *pgx.Conn) error
}

// watch starts watching the statement about to run on conn, and returns
// the function that stops the watch once the statement has returned; that
// function describes, for the statement's error, a blocker the watch found
// and could not end (nil if none). Until p.after has passed, the watch is
// a timer alone: no goroutine, no copy of the connection's config.
func (p preemption) watch(ctx context.Context, conn *pgx.Conn) (stop func() error) {
	if p.after <= 0 || conn == nil || conn.PgConn() == nil {
		return func() error { return nil }
	}
	pid := conn.PgConn().PID()
	if pid > math.MaxInt32 {
		pid = 0 // a pooler's own number: no server process has it
	}
	if pid == 0 && p.rows == "" {
		return func() error {
			return fmt.Errorf("the connection's process id is no server's (a pooler between?): nothing was looked at")
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	var (
		wg    sync.WaitGroup
		found error // set by the watch, read once it has returned
	)
	wg.Add(1)
	timer := time.AfterFunc(p.after, func() {
		defer wg.Done()
		// The connection's config and process id are set once it is
		// open: reading them here, while the guard uses the connection,
		// is safe.
		found = p.run(ctx, conn.Config(), pid)
	})
	return func() error {
		cancel()
		if timer.Stop() {
			wg.Done()
			return nil
		}
		wg.Wait()
		return found
	}
}

// run looks at pid's blockers now and then every preemptEvery until ctx
// ends, on a connection of its own made from cfg, ending those p.w ends.
// It returns what it could not do, for the guard's error.
func (p preemption) run(ctx context.Context, cfg *pgx.ConnConfig, pid uint32) error {
	var (
		conn *pgx.Conn
		done func() // gives conn back
		last error
	)
	defer func() {
		if done != nil {
			done()
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
			c, release, err := p.connect(ctx, cfg)
			if err != nil {
				last = fmt.Errorf("connecting to look at what blocks it (it needs a connection more than the one that waits): %w", err)
				t.Reset(preemptEvery)
				continue
			}
			conn, done = c, release
		}
		err := p.endBlockers(ctx, conn, pid)
		if ctx.Err() != nil && last != nil {
			return last // a look the end cut short: keep what the one before found
		}
		last = err
		if last != nil && conn.IsClosed() {
			done()
			conn, done = nil, nil
		}
		t.Reset(preemptEvery)
	}
}

// poolWait bounds the wait for a connection of the pool to look from,
// before one is dialed instead.
const poolWait = 200 * time.Millisecond

// connect returns a connection to look at blockers from, and what gives it
// back: one of p.pool's (which its BeforeConnect, a rotated credential,
// applies to), or when none comes within poolWait, one dialed from cfg,
// the waiting connection's own config.
func (p preemption) connect(ctx context.Context, cfg *pgx.ConnConfig) (*pgx.Conn, func(), error) {
	if p.pool != nil {
		actx, cancel := context.WithTimeout(ctx, poolWait)
		c, err := p.pool.Acquire(actx)
		cancel()
		if err == nil {
			return c.Conn(), c.Release, nil
		}
	}
	if p.pool != nil {
		// The pool's own hook sets what it connects with now (a rotated
		// credential): the waiting connection's config may be stale.
		if before := p.pool.Config().BeforeConnect; before != nil {
			if err := before(ctx, cfg); err != nil {
				return nil, nil, err
			}
		}
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	return c, func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = c.Close(closeCtx)
	}, nil
}

// endBlockers ends the blockers of pid that p.w ends, and describes those
// it left or could not end.
func (p preemption) endBlockers(ctx context.Context, conn *pgx.Conn, pid uint32) error {
	type blocker struct {
		pid int64
		tag string
		xid *string
	}
	if p.vet != nil {
		if err := p.vet(ctx, conn); err != nil {
			return err
		}
	}
	args := []any{int64(pid)}
	if p.rows != "" {
		args = append(args, p.rowKeys)
	}
	rows, _ := conn.Query(ctx, pgtag.BlockersSQL(p.rows), args...)
	bs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (blocker, error) {
		var b blocker
		return b, r.Scan(&b.pid, &b.tag, &b.xid)
	})
	if err != nil {
		return fmt.Errorf("looking at what blocks it: %w", err)
	}
	if len(bs) == 0 {
		return fmt.Errorf("the server lists no session blocking session %d, nor one holding the rows claimed (a pooler between the client and the server shows process ids of its own)", pid)
	}
	var errs []error
	for _, b := range bs {
		tag, ok := pgtag.Parse(b.tag)
		lo, hi := tag.Lo, tag.Hi
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("blocked by session %d, which is no fenced transaction (application_name %q)", b.pid, b.tag))
		case !p.w.Ends(tag):
			errs = append(errs, fmt.Errorf("blocked by session %d, a fenced transaction of tokens %d to %d, not all older than this one's", b.pid, lo, hi))
		default:
			if _, err := conn.Exec(ctx, pgtag.TerminateSQL, b.pid, b.tag, b.xid); err != nil {
				errs = append(errs, fmt.Errorf("blocked by session %d, a fenced transaction of older tokens (%d to %d), which could not be ended (the role needs to be the blocker's, or to have pg_signal_backend for a role that is no superuser): %w", b.pid, lo, hi, err))
			}
		}
	}
	return errors.Join(errs...)
}

// connOf returns the connection under db, or nil when it has none of its
// own (a pool, before a connection is acquired from it).
func connOf(db DB) *pgx.Conn {
	switch c := db.(type) {
	case *pgx.Conn:
		return c
	case *pgxpool.Conn:
		return c.Conn()
	case pgx.Tx:
		return c.Conn()
	}
	return nil
}

// tagOf is the tag of a claim of the tokens lo to hi with entries
// (joined by ";") by the statement about to run on db, computed here from
// the application_name the server reported after db's last statement
// (pgtag.Merge: the server's own, pgtag.SQL, costs the statement more than
// the claim), as setTag's parameter: the name the tag was merged into,
// the tag, then lo, hi and entries for the server to merge them itself
// when its name is not that one (a pooler that kept the report from the
// client, a handle with no pgx connection under it).
func tagOf(db DB, lo, hi int64, entries string) []string {
	cur := reportedName(db)
	return []string{cur, pgtag.Merge(cur, lo, hi, entries), strconv.FormatInt(lo, 10), strconv.FormatInt(hi, 10), entries}
}

// reportedName is the application_name the server reported on db's
// connection after its last statement, "" when db has no pgx connection.
func reportedName(db DB) string {
	if c := connOf(db); c != nil && c.PgConn() != nil {
		return c.PgConn().ParameterStatus("application_name")
	}
	return ""
}

// setTag is the SQL that sets the tag of tagOf, given as the text[]
// parameter $n: the client's tag when the session's name is the one the
// client merged it into (or the tag already: RunInTxAll's guard sets it
// once per row), else the server's merge (pgtag.SQL). A tag
// merged into a name the session no longer has would drop the claims the
// transaction made before, and show a newer holder's transaction to a
// stale waiter as older than it is.
func setTag(n int) string {
	p := func(i int) string { return "($" + strconv.Itoa(n) + "::text[])[" + strconv.Itoa(i) + "]" }
	return "CASE WHEN current_setting('application_name') IN (" + p(1) + ", " + p(2) + ")" +
		" THEN set_config('application_name', " + p(2) + ", true) ELSE " + pgtag.SQL(p(3), p(4), p(5)) + " END"
}

// tagging returns what tags a Table's claim of the row named resource, run
// in db, with token ($2): sql with the tag set (as the RETURNING clause of
// an UPDATE or INSERT that has none, or as one more column of one that
// has), and args with the tag appended. A claim in autocommit ends with
// its statement, and blocks nobody for longer: it is not tagged; nor is
// one the transaction's tag covers already (the row claimed before with
// the same token, as a write after GetForUpdate is).
func tagging(db DB, sql string, returning bool, resource string, token fence.Token, args []any) (string, []any) {
	if _, inTx := db.(pgx.Tx); !inTx {
		return sql, args
	}
	cur := reportedName(db)
	if tag, ok := pgtag.Parse(cur); ok && tag.Covers(pgtag.Hash(resource), int64(token)) {
		return sql, args
	}
	if returning {
		sql += ", " + setTag(len(args)+1)
	} else {
		sql += " RETURNING " + setTag(len(args)+1)
	}
	return sql, append(slices.Clip(args), tagOf(db, int64(token), int64(token), pgtag.Entry(resource, int64(token))))
}

// watched runs stmt, a statement claiming a row (named resource in tags)
// with token on db (pool the handle it came from), under a preemption watch that waits after (0:
// none); rows (over $2, key) lists the xmax of the row (see pgtag.BlockersSQL). When ctx ends
// meanwhile, the error names what the statement waited for, if the watch
// found it.
func watched[T any](ctx context.Context, after time.Duration, pool, db DB, resource string, token fence.Token, rows string, key any,
	stmt func() (T, error)) (v T, err error) {
	return vetted(ctx, after, nil, pool, db, resource, token, rows, key, stmt)
}

// vetted is watched whose watch ends blockers only while vet, run on the
// watch's connection before each look, returns nil (nil vet: always).
func vetted[T any](ctx context.Context, after time.Duration, vet func(context.Context, *pgx.Conn) error, pool, db DB, resource string,
	token fence.Token, rows string, key any, stmt func() (T, error)) (v T, err error) {
	p := preemption{after: after, w: waiterOf([]fence.Claim{{Resource: resource, Token: token}}, nil), rows: rows, rowKeys: key, vet: vet}
	p.pool, _ = pool.(*pgxpool.Pool)
	stop := p.watch(ctx, connOf(db))
	// Deferred, so that a panic in stmt (a tracer's) stops the watch too.
	defer func() {
		if found := stop(); err != nil && found != nil && ctx.Err() != nil {
			err = fmt.Errorf("%w (it waited for another transaction: %v)", err, found)
		}
	}()
	return stmt()
}
