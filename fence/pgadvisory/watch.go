package pgadvisory

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fencelock/fencelock/fence"
)

// start returns the Lock of a session holding key, and starts watching it.
func start(conn *pgx.Conn, key int64, tok fence.Token, issuer string, o options, sent time.Time) *Lock {
	ctx, stop := context.WithCancel(context.Background())
	l := &Lock{key: key, token: tok, issuer: issuer, conn: conn, done: make(chan struct{}), stop: stop, exited: make(chan struct{}),
		timeout: o.timeout, lastSent: sent}
	go l.watch(ctx, o.interval)
	return l
}

// watch waits on the connection for up to interval at a time (a session
// the server ends sends an error and closes the socket: the wait returns
// it at once), then pings, bounded by interval, until one of them fails
// or ctx ends (Release).
func (l *Lock) watch(ctx context.Context, interval time.Duration) {
	defer close(l.exited)
	for {
		err := l.waitOnce(ctx, interval)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			l.end(fmt.Errorf("%w: %w", ErrSessionLost, err))
			closeConn(l.conn)
			return
		}
	}
}

// waitOnce waits on the connection for interval, then pings it. Neither
// goes past the Lock's deadline: a ping that has not answered by then
// fails, so Done closes at the deadline, not an interval after.
func (l *Lock) waitOnce(ctx context.Context, interval time.Duration) error {
	wctx, cancel := context.WithDeadline(ctx, l.bound(interval))
	err := l.conn.PgConn().WaitForNotification(wctx)
	cancel()
	if err != nil && !pgconn.Timeout(err) {
		return err
	}
	if ctx.Err() != nil {
		return nil
	}
	// Not ended by Release (ctx): a ping cut short breaks the connection,
	// and Release's unlock needs it; Release waits for it instead.
	pctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), l.bound(interval))
	defer cancel()
	sent := time.Now()
	if err := l.conn.Ping(pctx); err != nil {
		return err
	}
	l.mu.Lock()
	l.lastSent = sent
	l.mu.Unlock()
	return nil
}

// bound returns d from now, or the Lock's deadline if that is sooner.
func (l *Lock) bound(d time.Duration) time.Time {
	t := time.Now().Add(d)
	if l.timeout == 0 {
		return t
	}
	if until := l.ValidUntil(); until.Before(t) {
		return until
	}
	return t
}

// end closes Done with err as its cause, once.
func (l *Lock) end(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	l.err = err
	close(l.done)
}

// Release closes Done and releases the lock: it stops the watch, unlocks
// (pg_advisory_unlock_all, so that the lock is free when it returns) and
// closes the connection, ending the session. ctx bounds the unlock, and
// so does a timeout of a few seconds; the session's end frees the lock
// anyway. A Lock whose session was lost has
// nothing to unlock. Calls after the first return nil.
func (l *Lock) Release(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	var err error
	l.release.Do(func() {
		l.end(ErrReleased)
		l.stop()
		<-l.exited
		if !l.conn.IsClosed() {
			// Bounded whatever ctx: closing the connection frees the
			// lock anyway, and a server that stopped answering must not
			// hold the caller (a deferred Release) for ever.
			uctx, cancel := context.WithTimeout(ctx, cancelTimeout)
			defer cancel()
			if _, uerr := l.conn.Exec(uctx, "SELECT pg_advisory_unlock_all()"); uerr != nil {
				err = fmt.Errorf("pgadvisory: unlocking %d (the session's end frees it): %w", l.key, uerr)
			}
		}
		closeConn(l.conn)
	})
	return err
}
