package sqlfence_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/fencelock/fencelock/fence"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

// commitLoser dials as pgx would and, once armed, lets the next COMMIT
// reach the server while its reply never reaches the driver: reads on
// that connection wait for release, then fail.
type commitLoser struct {
	mu    sync.Mutex // guards armed
	armed chan struct{}
}

func (l *commitLoser) wrap(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &losingConn{Conn: c, l: l}, nil
	}
}

func (l *commitLoser) arm() (release func()) {
	ch := make(chan struct{})
	var once sync.Once
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armed = ch
	return func() { once.Do(func() { close(ch) }) }
}

type losingConn struct {
	net.Conn
	l    *commitLoser
	mu   sync.Mutex
	lost chan struct{}
}

func (c *losingConn) Write(b []byte) (int, error) {
	c.l.mu.Lock()
	if c.l.armed != nil && bytes.Contains(bytes.ToLower(b), []byte("commit")) {
		c.mu.Lock()
		c.lost = c.l.armed
		c.mu.Unlock()
		c.l.armed = nil
	}
	c.l.mu.Unlock()
	return c.Conn.Write(b)
}

func (c *losingConn) Read(b []byte) (int, error) {
	c.mu.Lock()
	lost := c.lost
	c.mu.Unlock()
	if lost != nil {
		<-lost
		_ = c.Conn.Close()
		return 0, io.ErrUnexpectedEOF
	}
	return c.Conn.Read(b)
}

// TestRunInTxCommitLostPostgreSQL: on PostgreSQL through pgx's
// database/sql driver, a COMMIT that lands with its reply lost is an
// unknown outcome, not a failure (pgx reports the lost read as "conn
// closed", safe to retry).
func TestRunInTxCommitLostPostgreSQL(t *testing.T) {
	dsn := pgtest.New(t).NewDatabase(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	loser := &commitLoser{}
	cfg.DialFunc = loser.wrap(cfg.DialFunc)
	viaLoser := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { _ = viaLoser.Close() })
	direct, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = direct.Close() })
	ctx := t.Context()
	f, err := sqlfence.NewFences(sqlfence.PostgreSQL, sqlfence.Identifier{sqlfence.DefaultFenceTable})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.CreateTable(ctx, direct); err != nil {
		t.Fatal(err)
	}
	mustExec(t, direct, "CREATE TABLE ledger (seq BIGINT PRIMARY KEY, token BIGINT NOT NULL, note VARCHAR(64))")
	srv := servers[3]
	release := loser.arm()
	defer release()
	done := make(chan error, 1)
	go func() {
		done <- f.RunInTx(ctx, viaLoser, "r", 7, func(tx *sql.Tx) error { return appendLedger(ctx, srv, tx, 7, "A") })
	}()
	poll.Until(t, "the ledger row whose COMMIT reply is lost to be committed", func() bool { return len(ledger(t, direct)) == 1 })
	release()
	err = <-done
	fencewant.Unknown(t, err, 7)
	if errors.Is(err, fence.ErrStale) {
		t.Fatalf("got %v, want no stale refusal", err)
	}
}
