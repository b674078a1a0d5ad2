package pgadvisory

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/nilcheck"
)

// Lock is a session-level PostgreSQL advisory lock held on a connection of
// its own, with a fencing token from a sequence: a [fence.Holder] for a
// [fence.Guard].
//
// Its Done is closed when its session ends or cannot be reached (see
// [Lock.Err]), and on [Lock.Release]. Once closed it stays closed. Made
// [WithSessionTimeout], its session is a lease the server ends when it
// goes quiet, and [Lock.ValidUntil] its deadline. A Lock is safe for
// concurrent use.
type Lock struct {
	// Set once before use.
	key    int64
	token  fence.Token
	issuer string
	conn   *pgx.Conn // used by watch alone until it has returned
	done   chan struct{}
	stop   context.CancelFunc // ends watch
	exited chan struct{}      // closed when watch has returned

	timeout time.Duration // idle_session_timeout; 0: none. Set once.

	mu       sync.Mutex // guards the fields below
	err      error      // why Done closed
	lastSent time.Time  // before the last statement that answered was sent
	release  sync.Once
}

var (
	_ fence.Holder      = (*Lock)(nil)
	_ fence.Expirer     = (*Lock)(nil)
	_ fence.IssuerNamer = (*Lock)(nil)
)

// ValidUntil returns the deadline of a Lock made [WithSessionTimeout]:
// the timeout after its last ping (or its token's statement) was sent,
// before which the server does not end an idle session (or of one whose
// session has an idle_session_timeout already). Without either, far
// in the future: the session does not expire.
func (l *Lock) ValidUntil() time.Time {
	if l.timeout == 0 {
		return farFuture
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastSent.Add(l.timeout)
}

// farFuture is the deadline of a Lock without a session timeout.
var farFuture = time.Now().Add(100 * 365 * 24 * time.Hour)

// Acquire connects to PostgreSQL with cfg (a connection of the Lock's
// own, for as long as it is held), waits for the advisory lock key
// (pg_advisory_lock), and takes its token from the sequence (nextval)
// while holding it. ctx bounds the whole call: when it ends the wait is
// cancelled on the server (a cancel request) and the connection closed,
// so nothing stays held or queued. On an error nothing is held.
//
// cfg must come from pgx.ParseConfig; Acquire does not change it. The
// session must be a real one: behind a pooler in transaction mode
// (PgBouncer's pool_mode=transaction) a session lock is meaningless.
func Acquire(ctx context.Context, cfg *pgx.ConnConfig, key int64, opts ...Option) (*Lock, error) {
	return acquire(ctx, cfg, key, true, opts)
}

// TryAcquire is [Acquire] without the wait (pg_try_advisory_lock): it
// fails with [ErrNotAcquired], having taken no token, when another
// session holds key.
func TryAcquire(ctx context.Context, cfg *pgx.ConnConfig, key int64, opts ...Option) (*Lock, error) {
	return acquire(ctx, cfg, key, false, opts)
}

func acquire(ctx context.Context, cfg *pgx.ConnConfig, key int64, wait bool, opts []Option) (*Lock, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if nilcheck.IsNil(cfg) {
		return nil, fmt.Errorf("%w: nil ConnConfig", ErrInvalidArgument)
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgadvisory: connecting: %w", err)
	}
	asked := o.timeout // WithSessionTimeout's, for the session to set
	if o, err = serverTimeout(ctx, conn, o); err != nil {
		closeConn(conn)
		return nil, err
	}
	// A timeout the server gave is the session's already.
	if err := setTimeout(ctx, conn, asked); err != nil {
		closeConn(conn)
		return nil, err
	}
	tok, sent, found, err := lockAndIssue(ctx, conn, key, wait, o)
	if err != nil {
		closeConn(conn)
		return nil, err
	}
	issuer := o.issuer
	if issuer == "" {
		issuer = "postgres:" + found
	}
	return start(conn, key, tok, issuer, o, sent), nil
}

// setTimeout sets the session's idle_session_timeout to d (none when 0).
func setTimeout(ctx context.Context, conn *pgx.Conn, d time.Duration) error {
	if d == 0 {
		return nil
	}
	ms := strconv.FormatInt(d.Milliseconds(), 10)
	if _, err := conn.Exec(ctx, "SELECT set_config('idle_session_timeout', $1, false)", ms); err != nil {
		return fmt.Errorf("pgadvisory: WithSessionTimeout: setting idle_session_timeout (PostgreSQL 14 or later): %w", err)
	}
	return nil
}

// lockAndIssue takes the advisory lock on conn and then a token. The
// statements run without pgx's own context handling (which would close
// the connection and leave the server's wait queued): a cancel request
// ends them when ctx does.
//
// It also returns the time before its last statement was sent (the
// session is idle from that statement's end), and the database's and the
// sequence's names as the server found them ("db:schema.sequence"): the
// config may name no database, and two search_paths two sequences.
func lockAndIssue(ctx context.Context, conn *pgx.Conn, key int64, wait bool, o options) (fence.Token, time.Time, string, error) {
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() { defer close(fired); cancelRequest(conn) })
	defer func() {
		if !stop() {
			<-fired // no goroutine outlives the call
		}
	}()
	bg := context.WithoutCancel(ctx)
	if wait {
		if _, err := conn.Exec(bg, "SELECT pg_advisory_lock($1)", key); err != nil {
			return 0, time.Time{}, "", errorOf(ctx, fmt.Errorf("pgadvisory: pg_advisory_lock(%d): %w", key, err))
		}
	}
	// Without the wait, one statement: the CASE takes no token unless
	// pg_try_advisory_lock gets the lock.
	q, args := "SELECT CASE WHEN pg_try_advisory_lock($2) THEN nextval($1::regclass) END", []any{o.sequence.Sanitize(), key}
	if wait {
		q, args = "SELECT nextval($1::regclass)", args[:1]
	}
	q += ", current_database() || ':' || (pg_identify_object('pg_class'::regclass, $1::regclass, 0)).identity"
	var tok *int64
	var found string
	sent := time.Now()
	if err := conn.QueryRow(bg, q, args...).Scan(&tok, &found); err != nil {
		return 0, time.Time{}, "", errorOf(ctx, fmt.Errorf("pgadvisory: taking a token from %s (created by CreateSequence?): %w", o.sequence.Sanitize(), err))
	}
	if tok == nil {
		return 0, time.Time{}, "", ErrNotAcquired
	}
	if err := ctx.Err(); err != nil { // ended as the lock was taken: the caller is gone
		return 0, time.Time{}, "", err
	}
	return fence.Token(*tok), sent, found, nil
}

// errorOf returns ctx's error when ctx ended (the cancel request is why
// the statement failed), else err.
func errorOf(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%w (%v)", cerr, err)
	}
	return err
}

// cancelTimeout bounds a cancel request, and the closing of a connection.
const cancelTimeout = 5 * time.Second

// cancelRequest asks the server to cancel conn's statement; if it cannot,
// it closes the connection's socket, which ends the statement's wait here
// (the server ends the session when it next writes to it).
func cancelRequest(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), cancelTimeout)
	defer cancel()
	if err := conn.PgConn().CancelRequest(ctx); err != nil {
		_ = conn.PgConn().Conn().Close()
	}
}

// closeConn closes conn, ending its session and so releasing its locks.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), cancelTimeout)
	defer cancel()
	_ = conn.Close(ctx)
}

// Token returns the lock's fencing token, taken from the sequence while
// the lock was held: each acquisition gets a higher one.
func (l *Lock) Token() fence.Token { return l.token }

// Issuer names the source of the lock's tokens ([fence.IssuerNamer]):
// "postgres:", the database's name and the sequence's, as the server
// found them ("postgres:app:public.fencelock_advisory_token"), or the name
// [WithIssuer] gave. A store that checks issuers refuses its tokens on a
// key that accepted another issuer's.
func (l *Lock) Issuer() string { return l.issuer }

// Key returns the advisory lock's key.
func (l *Lock) Key() int64 { return l.key }

// Done returns a channel closed once the lock's session has ended or
// could not be reached, or [Lock.Release] was called. Made
// [WithSessionTimeout], a Lock that cannot reach its server closes it by
// [Lock.ValidUntil].
func (l *Lock) Done() <-chan struct{} { return l.done }

// Err returns nil while Done is open; then why it closed: an error
// matching [ErrSessionLost] (wrapping the connection's), or
// [ErrReleased].
func (l *Lock) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// ErrReleased is [Lock.Err] after [Lock.Release].
var ErrReleased = errors.New("pgadvisory: lock released")
