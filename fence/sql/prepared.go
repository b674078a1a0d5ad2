package sqlfence

import (
	"context"
	"database/sql"
	"errors"
	"sync"

	"github.com/go-sql-driver/mysql"
)

// maxPrepared bounds the statements one [Table] or [Fences] keeps
// prepared: one per pool and statement text (a Table has a text per set of
// assigned columns). Past it, statements are sent unprepared, as they
// would be without the cache.
const maxPrepared = 64

// prepared keeps the fenced statements of one Table or Fences prepared on
// the pools they run on, so that each is parsed and planned once per
// connection rather than on every write: in SQLite, in the process, the
// parse was most of what the fence cost a row update; with MySQL's
// driver defaults, each statement with arguments was prepared and closed
// on the server, a round trip more per write. The statement is the one
// that would be sent unprepared, with the same arguments, so nothing about
// its outcome changes.
type prepared struct {
	off    bool // statements are sent unprepared: PostgreSQL, or WithoutPrepare
	mu     sync.Mutex
	m      map[preparedKey]*sql.Stmt
	misses int // statements not found since the last sweep of a full cache
}

func newPrepared(d Dialect, o options) *prepared {
	return &prepared{off: d == PostgreSQL || o.noPrepare}
}

type preparedKey struct {
	pool *sql.DB
	text string
}

// exec runs text with args on db: through a statement prepared on pool
// when db is pool, or a transaction begun on pool for which text was
// prepared before it began; otherwise (a *sql.Conn, a transaction whose
// pool is not known, a full cache, a failed prepare) as db.ExecContext
// would. Inside a transaction nothing is prepared: that would take a
// second connection of the pool while the transaction holds one, and
// wait forever in a pool of one. A failed prepare is not kept: the
// unprepared statement then fails with the server's error, classified as
// before. A statement kept prepared that the server refuses to prepare
// again on another connection (MySQL's max_prepared_stmt_count) is sent
// unprepared too: the refusal ran nothing, and with interpolateParams the
// unprepared statement needs no server-side statement at all.
func (p *prepared) exec(ctx context.Context, pool *sql.DB, db DB, text string, args ...any) (sql.Result, error) {
	if st := p.lookup(ctx, pool, db, text); st != nil {
		res, err := st.ExecContext(ctx, args...)
		if !prepareRefused(err) {
			return res, err
		}
	}
	return db.ExecContext(ctx, text, args...)
}

// scan runs query, a statement that returns one row, with args on db and
// scans the row into dest, the statement prepared as exec's are (on db
// when it is a pool; in a transaction, not). A refusal to prepare it is
// sent unprepared, as by exec.
func (p *prepared) scan(ctx context.Context, db DB, query string, args []any, dest ...any) error {
	if st := p.lookup(ctx, nil, db, query); st != nil {
		err := st.QueryRowContext(ctx, args...).Scan(dest...)
		if !prepareRefused(err) {
			return err
		}
	}
	return db.QueryRowContext(ctx, query, args...).Scan(dest...)
}

// lookup returns the statement exec runs text with on db, or nil to send
// it unprepared.
func (p *prepared) lookup(ctx context.Context, pool *sql.DB, db DB, text string) *sql.Stmt {
	if p.off {
		return nil
	}
	switch h := db.(type) {
	case *sql.DB:
		return p.stmt(ctx, h, text)
	case *sql.Tx:
		if pool == nil {
			return nil
		}
		if st := p.prepared(pool, text); st != nil {
			return h.StmtContext(ctx, st)
		}
	}
	return nil
}

// prepareRefused reports whether err is the server's refusal to prepare a
// statement for want of room (MySQL's ER_MAX_PREPARED_STMT_COUNT_REACHED),
// which only a prepare can fail with: nothing was run.
func prepareRefused(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1461
}

// prepared returns text prepared on pool, or nil if it is not.
func (p *prepared) prepared(pool *sql.DB, text string) *sql.Stmt {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m[preparedKey{pool, text}]
}

// stmt returns text prepared on pool, preparing it if it is not yet, or
// nil if it cannot be kept. The caller must hold no connection of pool.
func (p *prepared) stmt(ctx context.Context, pool *sql.DB, text string) *sql.Stmt {
	if p.off {
		return nil
	}
	k := preparedKey{pool, text}
	p.mu.Lock()
	st, ok := p.m[k]
	if !ok {
		p.sweepLocked()
	}
	full := len(p.m) >= maxPrepared
	p.mu.Unlock()
	if ok || full {
		return st
	}
	st, err := pool.PrepareContext(ctx, text)
	if err != nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.m[k]; ok { // prepared meanwhile by another write
		_ = st.Close()
		return old
	}
	if len(p.m) >= maxPrepared {
		_ = st.Close()
		return nil
	}
	if p.m == nil {
		p.m = map[preparedKey]*sql.Stmt{}
	}
	p.m[k] = st
	return st
}

// sweepLocked drops the statements of pools that were closed: the cache
// would otherwise keep each closed pool (and its statements) reachable for
// as long as the Table or Fences lives, and take one of its maxPrepared
// places. It runs on a statement not found in the cache: every time while
// the cache has room (a miss then prepares, a round trip dearer than the
// sweep), and once every maxPrepared misses when it is full.
func (p *prepared) sweepLocked() {
	if len(p.m) >= maxPrepared {
		if p.misses++; p.misses < maxPrepared {
			return
		}
	}
	p.misses = 0
	for k, st := range p.m {
		if poolClosed(k.pool) {
			_ = st.Close()
			delete(p.m, k)
		}
	}
}

// ended is a context that has ended, for poolClosed.
var ended = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// poolClosed reports whether db was closed, without I/O and without
// waiting: database/sql checks that a pool is open before it looks at the
// context, so asking for a connection with a context that has ended fails
// with the context's error on an open pool, and with another on a closed
// one (TestPreparedClosedPoolReleased fails if that order changes).
func poolClosed(db *sql.DB) bool {
	c, err := db.Conn(ended)
	if c != nil { // not with an ended context; if ever, give it back
		_ = c.Close()
		return false
	}
	return !errors.Is(err, context.Canceled)
}
