package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock/fence"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/mysqltest"
	"github.com/fencelock/fencelock/internal/testkit/netproxy"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// proxied returns two handles on one fresh MariaDB database: direct, and
// through a proxy that can break the connection.
func proxied(t *testing.T) (direct, viaProxy *sql.DB, p *netproxy.Proxy) {
	t.Helper()
	srv := mysqltest.New(t)
	cfg := srv.NewDatabase(t)
	p, err := netproxy.Start(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	direct = mysqltest.Open(t, cfg)
	pcfg := cfg.Clone()
	pcfg.Addr = p.Addr()
	viaProxy = mysqltest.Open(t, pcfg)
	return direct, viaProxy, p
}

func wantKnownFailure(t *testing.T, err error) {
	t.Helper()
	if err == nil || errors.Is(err, fence.ErrUnknownOutcome) {
		t.Fatalf("got error %v, want a failure not matching fence.ErrUnknownOutcome", err)
	}
}

// waitStatement waits until a statement starting with prefix runs on the
// server and InnoDB shows a transaction waiting for a lock.
func waitStatement(t *testing.T, db *sql.DB, prefix string) {
	t.Helper()
	poll.Until(t, prefix+" waiting for a row lock", func() bool {
		var running int
		err := db.QueryRowContext(context.Background(),
			"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE CONCAT(?, '%')", prefix).Scan(&running)
		return err == nil && running >= 1 && innodbLockWaits(t, db) >= 1
	})
}

// TestUpdateConnectionLostWhileWaiting: a fenced update waits on a row
// lock and its connection is reset. The server still holds the statement
// and, once the lock is free, commits it: the outcome was unknown, and
// reporting it as a failure would have been wrong. The control resets the
// connection while it is idle: database/sql finds it broken when handing
// it out (the driver's ResetSession) and the write goes out on a new one.
func TestUpdateConnectionLostWhileWaiting(t *testing.T) {
	srv := servers[0]
	direct, viaProxy, p := proxied(t)
	mustExec(t, direct, accountsDDL(sqlfence.MySQL))
	mustExec(t, direct, "INSERT INTO accounts (id, balance, fence) VALUES ('a', 1, 1)")
	tbl, err := sqlfence.NewTable(sqlfence.MySQL, sqlfence.Identifier{"accounts"}, sqlfence.WithKeyColumn("id"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	holder, err := direct.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, holder, "SELECT * FROM accounts WHERE id = 'a' FOR UPDATE")
	errc := make(chan error, 1)
	go func() { errc <- tbl.Update(ctx, viaProxy, "a", 2, sqlfence.Set("balance", 2)) }()
	waitStatement(t, direct, "UPDATE")
	p.Reset()
	fencewant.Unknown(t, <-errc, 2, sqlfence.ErrRetryable)
	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the update whose connection was lost to land", func() bool {
		_, f, _ := account(t, srv, direct, "a")
		return f == 2
	})

	// Control: an idle connection reset is found before anything is sent.
	p.Reset()
	if err := tbl.Update(ctx, viaProxy, "a", 3, sqlfence.Set("balance", 3)); err != nil {
		t.Fatalf("Update after an idle connection was reset: got %v, want nil (sent on a new connection)", err)
	}
	wantAccount(t, srv, direct, "a", 3, 3)
}

// TestStorePutCancelledWhileWaiting: a Put whose context ends while it
// waits for a row lock is unknown (the server may still run it); the
// control's context ended before the call, a known failure.
func TestStorePutCancelledWhileWaiting(t *testing.T) {
	_, viaProxy, _ := proxied(t)
	s, err := sqlfence.NewStore(viaProxy, sqlfence.MySQL, sqlfence.Identifier{sqlfence.DefaultStoreTable})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := s.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "k", 1, []byte("one")); err != nil {
		t.Fatal(err)
	}
	holder, err := viaProxy.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	mustExec(t, holder, "SELECT * FROM fencelock_store WHERE `key` = 'k' FOR UPDATE")
	pctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- s.Put(pctx, "k", 2, []byte("two")) }()
	waitStatement(t, viaProxy, "INSERT")
	cancel()
	err = <-errc
	fencewant.Unknown(t, err, 2)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want it to wrap context.Canceled", err)
	}
	wantKnownFailure(t, s.Put(pctx, "k", 3, []byte("three")))
}

// TestRunInTxCommitLost: the COMMIT reaches the server, which commits, and
// the answer is lost: the outcome is unknown, and the transaction did
// commit. The control breaks the connection before fn's last write: that
// write fails, COMMIT is never sent, and the failure is a known one.
func TestRunInTxCommitLost(t *testing.T) {
	testenv.Long(t, "it waits out lost COMMITs on every server")
	srv := servers[0]
	tests := []struct {
		name     string
		atCommit bool
	}{{"answer to COMMIT lost", true}, {"before the last write (control)", false}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			direct, viaProxy, p := proxied(t)
			f, err := sqlfence.NewFences(sqlfence.MySQL, sqlfence.Identifier{sqlfence.DefaultFenceTable})
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			if err := f.CreateTable(ctx, direct); err != nil {
				t.Fatal(err)
			}
			mustExec(t, direct, "CREATE TABLE ledger (seq BIGINT PRIMARY KEY, token BIGINT NOT NULL, note VARCHAR(64))")
			committed := make(chan struct{})
			go func() {
				defer close(committed)
				if !tt.atCommit {
					return
				}
				poll.Until(t, "the ledger row to be committed", func() bool { return len(ledger(t, direct)) == 1 })
				p.Reset()
			}()
			err = f.RunInTx(ctx, viaProxy, "r", 7, func(tx *sql.Tx) error {
				if !tt.atCommit {
					p.Reset()
				}
				if err := appendLedger(ctx, srv, tx, 7, "A"); err != nil {
					return err
				}
				if tt.atCommit {
					// COMMIT and its answer are each held this long: the
					// row is seen committed, and the connection reset,
					// while the answer is held.
					p.Delay(2 * time.Second)
				}
				return nil
			})
			<-committed
			if tt.atCommit {
				fencewant.Unknown(t, err, 7)
				return
			}
			wantKnownFailure(t, err)
			if n := len(ledger(t, direct)); n != 0 {
				t.Fatalf("ledger rows: got %d, want 0", n)
			}
		})
	}
}
