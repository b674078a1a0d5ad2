package propagate_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/fence/propagate"
	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// TestMain starts the PostgreSQL server and the embedded etcd member the
// tests and examples share (not in a fuzz worker: see testenv.Main.Run).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(testenv.Join(m, pgtest.Main(m), embedetcd.Main(m)))
}

// ledgerSchema is the ledger service's table, and the fence table of
// postgres.Exec.
const ledgerSchema = `CREATE TABLE ledger_balances (id text PRIMARY KEY, balance bigint NOT NULL);
	INSERT INTO ledger_balances VALUES ('acct-7', 100);
	CREATE TABLE fencelock_fences (resource text PRIMARY KEY, token bigint NOT NULL CHECK (token > 0));`

// newLedger returns the ledger service: PUT /accounts/{id}?balance=N sets
// an account's balance. The call must hold the account's lock (named
// after the account). Fenced, the write is postgres.Exec's, fenced on the
// account with the token the call carries, and a stale one is answered
// 409; unfenced (the control), it is a plain UPDATE.
func newLedger(pool *pgxpool.Pool, fenced bool) (http.Handler, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /accounts/{id}", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		balance, err := strconv.ParseInt(r.URL.Query().Get("balance"), 10, 64)
		if err != nil {
			http.Error(w, "bad balance", http.StatusBadRequest)
			return
		}
		f, _ := propagate.FromContext(r.Context()) // there: NewHandler refused calls without one
		if f.Name != id {
			http.Error(w, fmt.Sprintf("the call holds lock %q, not the account's", f.Name), http.StatusForbidden)
			return
		}
		const update = "UPDATE ledger_balances SET balance = $1 WHERE id = $2"
		if fenced {
			_, err = postgres.Exec(r.Context(), pool, id, f.Token, update, balance, id)
		} else {
			_, err = pool.Exec(r.Context(), update, balance, id)
		}
		if propagate.WriteStale(w, err) {
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return propagate.NewHandler(mux)
}

// setBalance is the worker's call of the ledger: ctx carries its lock's
// name and token, which the client's Transport sends.
func setBalance(ctx context.Context, client *http.Client, url string, balance int64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, fmt.Sprintf("%s/accounts/acct-7?balance=%d", url, balance), nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := propagate.CheckResponse(resp); err != nil {
		return err // errors.Is(err, fence.ErrStale): a newer holder wrote first
	}
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("ledger: %s", resp.Status)
	}
	return nil
}

// ledgerServer starts the ledger on a fresh database of the shared server
// and returns its URL and a pool on its database; both end with t.
func ledgerServer(t *testing.T, fenced bool) (string, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.NewPool(t)
	if _, err := pool.Exec(t.Context(), ledgerSchema); err != nil {
		t.Fatal(err)
	}
	h, err := newLedger(pool, fenced)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL, pool
}

func balanceOf(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	var b int64
	if err := pool.QueryRow(t.Context(), "SELECT balance FROM ledger_balances WHERE id = 'acct-7'").Scan(&b); err != nil {
		t.Fatal(err)
	}
	return b
}
