package sqlfence

import (
	"context"
	"database/sql"
	"sync"
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
	off bool // statements are sent unprepared: PostgreSQL, or WithoutPrepare
	mu  sync.Mutex
	m   map[preparedKey]*sql.Stmt
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
// before.
func (p *prepared) exec(ctx context.Context, pool *sql.DB, db DB, text string, args ...any) (sql.Result, error) {
	if p.off {
		return db.ExecContext(ctx, text, args...)
	}
	switch h := db.(type) {
	case *sql.DB:
		if st := p.stmt(ctx, h, text); st != nil {
			return st.ExecContext(ctx, args...)
		}
	case *sql.Tx:
		if pool == nil {
			break
		}
		if st := p.prepared(pool, text); st != nil {
			return h.StmtContext(ctx, st).ExecContext(ctx, args...)
		}
	}
	return db.ExecContext(ctx, text, args...)
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
