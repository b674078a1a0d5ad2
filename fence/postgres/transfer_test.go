package postgres_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
)

// newBank returns a pool on a fresh database with the fence table and two
// accounts, A and B, of 1000 each, and a fenced view of them.
func newBank(t *testing.T) (*pgxpool.Pool, *postgres.Table) {
	t.Helper()
	pool, tbl := newAccounts(t)
	if err := postgres.CreateSchema(t.Context(), pool); err != nil {
		t.Fatal(err)
	}
	mustExec(t, pool, "INSERT INTO accounts (id, balance) VALUES ('A', 1000), ('B', 1000)")
	return pool, tbl
}

// txRunner runs fn in a transaction on the holder's claims.
type txRunner func(ctx context.Context, pool *pgxpool.Pool, claims []fence.Claim, fn func(pgx.Tx) error) error

func plainTx(ctx context.Context, pool *pgxpool.Pool, _ []fence.Claim, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, pool, fn)
}

func fencedTx(ctx context.Context, pool *pgxpool.Pool, claims []fence.Claim, fn func(pgx.Tx) error) error {
	return postgres.RunInTxAll(ctx, pool, claims, fn)
}

// reader reads an account's balance in tx, as the holder of c.
type reader func(ctx context.Context, tbl *postgres.Table, tx pgx.Tx, c fence.Claim) (int64, error)

func fencedRead(ctx context.Context, tbl *postgres.Table, tx pgx.Tx, c fence.Claim) (int64, error) {
	var b int64
	return b, tbl.GetForUpdate(ctx, tx, c.Resource, c.Token, []string{"balance"}, &b)
}

func plainRead(ctx context.Context, _ *postgres.Table, tx pgx.Tx, c fence.Claim) (int64, error) {
	var b int64
	return b, tx.QueryRow(ctx, "SELECT balance FROM accounts WHERE id = $1", c.Resource).Scan(&b)
}

// transfer is a transfer's body as the user wrote it: read both
// balances, write both computed from the reads, each write fenced with its
// account's token. paused runs between the two writes.
func transfer(ctx context.Context, tbl *postgres.Table, read reader, from, to fence.Claim, amount int64, paused func()) func(pgx.Tx) error {
	return func(tx pgx.Tx) error {
		a, err := read(ctx, tbl, tx, from)
		if err != nil {
			return err
		}
		b, err := read(ctx, tbl, tx, to)
		if err != nil {
			return err
		}
		if err := tbl.Update(ctx, tx, from.Resource, from.Token, postgres.Set("balance", a-amount)); err != nil {
			return err
		}
		paused()
		return tbl.Update(ctx, tx, to.Resource, to.Token, postgres.Set("balance", b+amount))
	}
}

// TestTransferLostUpdate is issue 36's lost transfer. T1 (tokens 2 and 3)
// moves 100 from A to B and stops after writing A, holding its row
// uncommitted. T2 (tokens 4 and 6), the newer holder, moves 10 the same
// way: it reads both accounts, T1 then writes B and commits, and T2 writes.
// Read the fenced way (GetForUpdate, alone or inside RunInTxAll), T2 waits
// for T1 and reads what it committed: both transfers are kept. The control
// reads with a plain SELECT, and T2 writes over T1's transfer: both commit
// and T1's 100 is gone.
func TestTransferLostUpdate(t *testing.T) {
	tests := []struct {
		name   string
		run    txRunner
		read   reader
		wantA  int64
		wantB  int64
		reason string
	}{
		{"GetForUpdate", plainTx, fencedRead, 890, 1110, "the fenced read let T2 compute from what T1 had not committed yet"},
		{"RunInTxAll and GetForUpdate", fencedTx, fencedRead, 890, 1110, "the fenced transaction let T2 read before T1 committed"},
		{"control: SELECT", plainTx, plainRead, 990, 1010, "the control lost nothing: the test proves nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool, tbl := newBank(t)
			ctx := t.Context()
			t1A, t1B, t2A, t2B := claim("A", 2), claim("B", 3), claim("A", 4), claim("B", 6)
			wrote, resume := make(chan struct{}), make(chan struct{})
			release := sync.OnceFunc(func() { close(resume) })
			defer release() // should the test fail before, T1 must not stay paused
			errs := make(chan error, 2)
			go func() {
				pause := func() { close(wrote); <-resume }
				errs <- tt.run(ctx, pool, []fence.Claim{t1A, t1B}, transfer(ctx, tbl, tt.read, t1A, t1B, 100, pause))
			}()
			<-wrote
			go func() {
				errs <- tt.run(ctx, pool, []fence.Claim{t2A, t2B}, transfer(ctx, tbl, tt.read, t2A, t2B, 10, func() {}))
			}()
			waitLockWaiters(t, pool, 1) // T2 waits on A, held by T1
			release()
			for range 2 {
				if err := <-errs; err != nil {
					t.Fatalf("a transfer failed: %v; want both to commit", err)
				}
			}
			a, _, _ := account(t, pool, "A")
			b, _, _ := account(t, pool, "B")
			if a != tt.wantA || b != tt.wantB {
				t.Fatalf("after both transfers: got A=%d B=%d, want A=%d B=%d: %s", a, b, tt.wantA, tt.wantB, tt.reason)
			}
		})
	}
}

// addTransfer moves amount between two accounts with no read in the
// client; the accounts are written in the order given.
func addTransfer(ctx context.Context, tbl *postgres.Table, from, to fence.Claim, amount int64, paused func()) func(pgx.Tx) error {
	return func(tx pgx.Tx) error {
		if err := tbl.Update(ctx, tx, from.Resource, from.Token, postgres.Add("balance", -amount)); err != nil {
			return err
		}
		paused()
		return tbl.Update(ctx, tx, to.Resource, to.Token, postgres.Add("balance", amount))
	}
}

// TestTransferOppositeDirections: two transfers in opposite directions, A
// to B and B to A, each writing its source first. T1 writes A and pauses;
// T2 starts. In RunInTxAll, T2 waits on the fences, taken in one order,
// before touching a row, and both commit. The control, the same
// transactions without RunInTxAll, deadlocks on the rows: T2 holds B and
// waits for A, T1 then waits for B, and the server rolls one back.
func TestTransferOppositeDirections(t *testing.T) {
	for _, tt := range []struct {
		name string
		run  txRunner
	}{{"RunInTxAll", fencedTx}, {"control: plain transactions", plainTx}} {
		t.Run(tt.name, func(t *testing.T) {
			pool, tbl := newBank(t)
			ctx := t.Context()
			a, b := claim("A", 1), claim("B", 1)
			wrote, resume := make(chan struct{}), make(chan struct{})
			release := sync.OnceFunc(func() { close(resume) })
			defer release() // should the test fail before, T1 must not stay paused
			errs := make(chan error, 2)
			go func() {
				pause := func() { close(wrote); <-resume }
				errs <- tt.run(ctx, pool, []fence.Claim{a, b}, addTransfer(ctx, tbl, a, b, 100, pause))
			}()
			<-wrote
			go func() { errs <- tt.run(ctx, pool, []fence.Claim{b, a}, addTransfer(ctx, tbl, b, a, 10, func() {})) }()
			waitLockWaiters(t, pool, 1)
			release()
			deadlocks := 0
			for range 2 {
				err := <-errs
				switch {
				case errors.Is(err, postgres.ErrRetryable):
					deadlocks++
				case err != nil:
					t.Fatalf("transfer: got %v, want nil or (control) a deadlock", err)
				}
			}
			if want := map[bool]int{true: 0, false: 1}[tt.name == "RunInTxAll"]; deadlocks != want {
				t.Fatalf("transfers rolled back for a deadlock: got %d, want %d", deadlocks, want)
			}
		})
	}
}

// TestTransferOppositeDirectionsStress runs transfers A to B and B to A
// concurrently, many times, in RunInTxAll: none deadlocks, and the total
// is conserved.
func TestTransferOppositeDirectionsStress(t *testing.T) {
	pool, tbl := newBank(t)
	ctx := t.Context()
	const rounds = 100
	a, b := claim("A", 1), claim("B", 1)
	var wg sync.WaitGroup
	for _, dir := range [][2]fence.Claim{{a, b}, {b, a}} {
		wg.Go(func() {
			for range rounds {
				err := postgres.RunInTxAll(ctx, pool, dir[:], addTransfer(ctx, tbl, dir[0], dir[1], 1, func() {}))
				if err != nil {
					t.Errorf("transfer %s to %s: %v", dir[0].Resource, dir[1].Resource, err)
					return
				}
			}
		})
	}
	wg.Wait()
	wantAccount(t, pool, "A", 1000, 1)
	wantAccount(t, pool, "B", 1000, 1)
}
