package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/fence"
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
// statement itself (tagPrefix, then "min-max").

// tagPrefix starts the application_name of a fenced transaction.
const tagPrefix = "fencelock:t="

// Defaults of [WithPreemptAfter] and of how often a waiting guard looks
// again.
const (
	defaultPreemptAfter = 100 * time.Millisecond
	preemptEvery        = 250 * time.Millisecond
)

// blockersSQL lists the sessions that block pid, with their tags.
const blockersSQL = "SELECT pid, coalesce(application_name, '') FROM pg_stat_activity WHERE pid = ANY(pg_blocking_pids($1))"

// terminateSQL ends session $1 if it still shows tag $2 and still blocks
// $3: a blocker whose transaction ended since it was looked at, its
// connection now running another's, is left alone.
const terminateSQL = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity" +
	" WHERE pid = $1 AND application_name = $2 AND $1 = ANY(pg_blocking_pids($3))"

// tagSQL is the SQL expression that sets the tag of a transaction to take
// in the tokens from the bigint expressions lo to hi: the range of the tag
// the transaction has so far (from an earlier claim), widened to them.
func tagSQL(lo, hi string) string {
	const cur = "current_setting('application_name')"
	const tagged = "(" + cur + " ~ '^" + tagPrefix + "[0-9]+-[0-9]+$')"
	old := func(part int) string {
		return "CASE WHEN " + tagged + " THEN split_part(substr(" + cur + ", " + strconv.Itoa(len(tagPrefix)+1) + "), '-', " + strconv.Itoa(part) + ")::bigint END"
	}
	return "set_config('application_name', '" + tagPrefix + "' || least((" + lo + ")::bigint, " + old(1) + ")::text || '-' || greatest((" +
		hi + ")::bigint, " + old(2) + ")::text, true)"
}

// parseTag returns the tokens of a fenced transaction's tag; ok is false for
// a session that is not in one.
func parseTag(tag string) (lo, hi fence.Token, ok bool) {
	rest, found := strings.CutPrefix(tag, tagPrefix)
	if !found {
		return 0, 0, false
	}
	a, b, found := strings.Cut(rest, "-")
	x, errA := strconv.ParseInt(a, 10, 64)
	y, errB := strconv.ParseInt(b, 10, 64)
	if !found || errA != nil || errB != nil || x <= 0 || y < x {
		return 0, 0, false
	}
	return fence.Token(x), fence.Token(y), true
}

// waiter is what a waiting guard knows of its own transaction: its tokens,
// and, when it has a holder that knows, whether that holder still holds
// them all.
type waiter struct {
	tokens []fence.Token // sorted, at least one
	valid  func() bool   // nil: unknown
}

// ends reports whether the waiter ends a blocker whose tokens run from lo
// to hi. A blocker holds the row of a resource the waiter claims too (that
// is what the guard waits for), under a token of its own there.
//
// A blocker older than every token of the waiter is a past holder of that
// resource: the waiter's token for it is newer. One that is older than the
// waiter's newest token only, and that carries none of the waiter's
// tokens, is one too when the waiter still holds all its locks: then the
// resource's holder is the waiter's own lock, and the blocker, not that
// lock, is older. Without that knowledge the waiter may be the stale one
// there, and the blocker is left alone. A blocker that may carry one of the
// waiter's tokens may be the same holder's own transaction, and is never
// ended.
func (w waiter) ends(lo, hi fence.Token) bool {
	first, last := w.tokens[0], w.tokens[len(w.tokens)-1]
	if hi < first {
		return true
	}
	if hi >= last || w.valid == nil {
		return false
	}
	for _, t := range w.tokens {
		if lo <= t && t <= hi {
			return false
		}
	}
	return w.valid()
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
	w     waiter
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
		found = p.run(ctx, conn.Config(), conn.PgConn().PID())
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
		last error
	)
	defer func() {
		if conn != nil {
			closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			defer cancel()
			_ = conn.Close(closeCtx)
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
			c, err := pgx.ConnectConfig(ctx, cfg)
			if err != nil {
				last = fmt.Errorf("connecting to look at what blocks it: %w", err)
				t.Reset(preemptEvery)
				continue
			}
			conn = c
		}
		last = p.endBlockers(ctx, conn, pid)
		if last != nil && conn.IsClosed() {
			conn = nil
		}
		t.Reset(preemptEvery)
	}
}

// endBlockers ends the blockers of pid that p.w ends, and describes those
// it left or could not end.
func (p preemption) endBlockers(ctx context.Context, conn *pgx.Conn, pid uint32) error {
	type blocker struct {
		pid int64
		tag string
	}
	rows, _ := conn.Query(ctx, blockersSQL, int64(pid))
	bs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (blocker, error) {
		var b blocker
		return b, r.Scan(&b.pid, &b.tag)
	})
	if err != nil {
		return fmt.Errorf("looking at what blocks it: %w", err)
	}
	var errs []error
	for _, b := range bs {
		lo, hi, ok := parseTag(b.tag)
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("blocked by session %d, which is no fenced transaction (application_name %q)", b.pid, b.tag))
		case !p.w.ends(lo, hi):
			errs = append(errs, fmt.Errorf("blocked by session %d, a fenced transaction of tokens %d to %d, not all older than this one's", b.pid, lo, hi))
		default:
			if _, err := conn.Exec(ctx, terminateSQL, b.pid, b.tag, int64(pid)); err != nil {
				errs = append(errs, fmt.Errorf("blocked by session %d, a fenced transaction of older tokens (%d to %d), which could not be ended (the role needs to be the blocker's or to have pg_signal_backend): %w", b.pid, lo, hi, err))
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

// tagReturning and tagColumn tag a Table's claim, run in a transaction,
// with its token ($2): as the RETURNING clause of an UPDATE or INSERT that
// has none, and as one more column of one that has.
var (
	tagReturning = " RETURNING " + tagSQL("$2::bigint", "$2::bigint")
	tagColumn    = ", " + tagSQL("$2::bigint", "$2::bigint")
)

// tagged is sql with tag appended when db is a transaction: a claim in
// autocommit ends with its statement, and blocks nobody for longer.
func tagged(db DB, sql, tag string) string {
	if _, inTx := db.(pgx.Tx); inTx {
		return sql + tag
	}
	return sql
}

// watched runs stmt, a statement of a Table claiming a row with token on
// db, under a preemption watch that waits after (0: none). When ctx ends
// meanwhile, the error names what the statement waited for, if the watch
// found it.
func watched[T any](ctx context.Context, after time.Duration, db DB, token fence.Token, stmt func() (T, error)) (T, error) {
	p := preemption{after: after, w: waiter{tokens: []fence.Token{token}}}
	stop := p.watch(ctx, connOf(db))
	v, err := stmt()
	if found := stop(); err != nil && found != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (it waited for another transaction: %v)", err, found)
	}
	return v, err
}
