package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencelock/fencelock/fence"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// firstWrites races writers with tokens 1..writers on a new key, rounds
// times, and returns how many writes failed with ErrRetryable; any other
// wrong outcome fails t.
func firstWrites(t *testing.T, s *sqlfence.Store, writers, rounds int) (retryable int) {
	t.Helper()
	for r := range rounds {
		k := fmt.Sprintf("race/%d", r)
		errs := make([]error, writers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				<-start
				errs[w] = s.Put(t.Context(), k, fence.Token(w+1), []byte(fmt.Sprint(w+1)))
			})
		}
		close(start)
		wg.Wait()
		var acked fence.Token
		for w, err := range errs {
			switch {
			case err == nil:
				acked = max(acked, fence.Token(w+1))
			case errors.Is(err, sqlfence.ErrRetryable):
				retryable++
			case errors.Is(err, fence.ErrStale) && w < writers-1:
			default:
				t.Errorf("round %d: Put(token %d): got %v, want nil or fence.ErrStale", r, w+1, err)
			}
		}
		rec, err := s.Get(t.Context(), k)
		if acked > 0 && (err != nil || rec.Token != acked) {
			t.Errorf("round %d: the key holds token %d (%v), want %d, the highest acknowledged", r, rec.Token, err, acked)
		}
	}
	return retryable
}

// TestFirstWritesRace: concurrent first writes to new keys. SQLite has one
// writer: the others get SQLITE_BUSY at once (no busy_timeout here),
// nothing was written, and the write is tried again: no writer may see an
// error but ErrStale. The control, with WithRetries(0), shows the errors
// the retries absorb in SQLite (MariaDB's and PostgreSQL's counts are
// logged; TestUpsertDeadlockRetried makes MariaDB's deadlock happen).
func TestFirstWritesRace(t *testing.T) {
	testenv.Long(t, "a race of first writes, repeated (about 12 s)")
	eachServer(t, func(t *testing.T, srv server) {
		_, s := newStore(t, srv)
		if n := firstWrites(t, s, 12, 20); n > 0 {
			t.Errorf("with retries: %d writes failed with ErrRetryable, want 0", n)
		}
		_, bare := newStore(t, srv, sqlfence.WithRetries(0))
		n := firstWrites(t, bare, 12, 20)
		t.Logf("control, WithRetries(0): %d of %d writes failed with ErrRetryable", n, 12*20)
		if n == 0 && srv.d == sqlfence.SQLite {
			t.Errorf("control, WithRetries(0): no write failed with ErrRetryable, want some (the race did not happen)")
		}
	})
}

// TestUpsertDeadlockRetried: in MariaDB, upserts that wait on a new row
// another transaction inserted deadlock when that transaction rolls back:
// the waiters' locks become gap locks, and each one's insert then waits
// for the other's. The server rolls one back (1213); nothing was written,
// and the upsert is tried again. The control, with WithRetries(0), shows
// the deadlock reaching the caller as ErrRetryable.
func TestUpsertDeadlockRetried(t *testing.T) {
	srv := servers[0]
	for _, tt := range []struct {
		name    string
		retries int
		wantErr bool
	}{{"retried", 20, false}, {"control: WithRetries(0)", 0, true}} {
		t.Run(tt.name, func(t *testing.T) {
			db, tbl := newAccounts(t, srv, sqlfence.WithRetries(tt.retries))
			deadlocks := 0
			for r := range 5 {
				errs := waitersOnRolledBackInsert(t, db, tbl, fmt.Sprintf("acct-%d", r))
				for i, err := range errs {
					switch {
					case err == nil, errors.Is(err, fence.ErrStale) && i == 0:
					case errors.Is(err, sqlfence.ErrRetryable) && tt.wantErr:
						deadlocks++
					default:
						t.Errorf("round %d: waiter with token %d: got %v, want nil (or ErrStale for the lower token)", r, i+2, err)
					}
				}
			}
			t.Logf("%d waiters of 10 got ErrRetryable", deadlocks)
			if tt.wantErr && deadlocks == 0 {
				t.Errorf("control: got no ErrRetryable in 5 rounds, want the deadlock to reach the caller")
			}
		})
	}
}

// waitersOnRolledBackInsert inserts row id in a transaction, starts two
// upserts of it (tokens 2 and 3) that wait for that row, rolls the
// transaction back once both wait, and returns their errors.
func waitersOnRolledBackInsert(t *testing.T, db *sql.DB, tbl *sqlfence.Table, id string) []error {
	t.Helper()
	ctx := t.Context()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tbl.Upsert(ctx, tx, id, 1, sqlfence.Set("balance", 1)); err != nil {
		t.Fatalf("holder's upsert: got %v, want nil", err)
	}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = tbl.Upsert(ctx, db, id, fence.Token(i+2), sqlfence.Set("balance", i+2)) })
	}
	waitLockWaits(t, db, 2)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	return errs
}

// waitLockWaits waits until n upserts of accounts are in flight in this
// test's database and InnoDB shows one waiting for a row lock (MariaDB
// shows one lock waiter per row). Near the poll's end it logs what the
// server runs, so that a wait that never ends says why.
func waitLockWaits(t *testing.T, db *sql.DB, n int) {
	t.Helper()
	start, logged := time.Now(), false
	poll.Until(t, "upserts waiting for the row", func() bool {
		var inFlight int
		err := db.QueryRowContext(context.Background(),
			"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND INFO LIKE 'INSERT INTO %'").Scan(&inFlight)
		waits := innodbLockWaits(t, db)
		if ok := err == nil && inFlight >= n && waits >= 1; ok || logged || time.Since(start) < poll.Timeout*9/10 {
			return ok
		}
		logged = true
		t.Logf("after %v: %d upserts in flight (err %v), %d lock waits; the server runs:\n%s", time.Since(start), inFlight, err, waits, processList(db))
		return false
	})
}

// processList is the server's PROCESSLIST, a line per connection, for a
// wait's failure.
func processList(db *sql.DB) string {
	rows, err := db.QueryContext(context.Background(), "SELECT ID, COALESCE(DB, ''), COMMAND, TIME, COALESCE(STATE, ''), COALESCE(INFO, '') FROM information_schema.PROCESSLIST")
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id, secs int64
		var dbName, cmd, state, info string
		if err := rows.Scan(&id, &dbName, &cmd, &secs, &state, &info); err != nil {
			return err.Error()
		}
		fmt.Fprintf(&b, "%d %s %s %ds %q %q\n", id, dbName, cmd, secs, state, info)
	}
	return b.String()
}

// innodbLockWaits counts the transactions InnoDB shows waiting for a lock.
// It reads SHOW ENGINE INNODB STATUS, made anew on each call: MariaDB's
// INNODB_TRX table is a cache that is refreshed only after 100 ms without
// a read, never while polled every few milliseconds.
func innodbLockWaits(t *testing.T, db *sql.DB) int {
	t.Helper()
	var typ, name, status string
	if err := db.QueryRowContext(context.Background(), "SHOW ENGINE INNODB STATUS").Scan(&typ, &name, &status); err != nil {
		t.Fatalf("SHOW ENGINE INNODB STATUS: %v", err)
	}
	return strings.Count(status, "\nLOCK WAIT ")
}
