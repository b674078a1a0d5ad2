package sqlcbank_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	sqlcbank "github.com/fencelock/fencelock/docs/sqlc"
	"github.com/fencelock/fencelock/docs/sqlc/db"
	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// setBalanceHeld writes balance to account id under the account's etcd
// lock, the write fenced with the lock's token.
func setBalanceHeld(ctx context.Context, locks *etcdlock.Client, q *db.Queries, id string, balance int64) error {
	l, err := locks.Lock(ctx, id, etcdlock.WithWait(10*time.Second))
	if err != nil {
		return err
	}
	defer func() { _ = l.Unlock(context.WithoutCancel(ctx)) }() // etcdlock.ErrLost: lost before release
	g, err := fence.NewGuard(l)
	if err != nil {
		return err
	}
	// The guard refuses at once, without I/O, a lock it knows is lost; the
	// row refuses a write whose token is older than one it has accepted.
	return g.Do(ctx, func(ctx context.Context, token fence.Token) error {
		return sqlcbank.SetBalance(ctx, q, token, id, balance)
	})
}

func newLocks(t *testing.T, etcd *embedetcd.Server) *etcdlock.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcd.Endpoints(), Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	locks, err := etcdlock.New(cli)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { locks.Close(context.Background()) })
	return locks
}

// TestUnderLock: a holder whose lock is broken after its guard's check
// (a pause, as a GC's) writes after the next holder: the row refuses it,
// a *fence.StaleError with the next holder's token, and keeps the next
// holder's balance. The control writes through the unfenced query: the
// late write lands over the next holder's.
func TestUnderLock(t *testing.T) {
	etcd := embedetcd.NewServer(t)
	for _, tc := range []struct {
		name   string
		fenced bool
	}{
		{"fenced", true},
		{"unfenced (control)", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := newBank(t)
			q := db.New(pool)
			ctx := t.Context()
			mustExec(t, pool, "INSERT INTO accounts (id, balance) VALUES ('acct-A', 1000)")
			first, second := newLocks(t, etcd), newLocks(t, etcd)

			l, err := first.Lock(ctx, "acct-A")
			if err != nil {
				t.Fatal(err)
			}
			g, err := fence.NewGuard(l)
			if err != nil {
				t.Fatal(err)
			}
			checked, resume, wrote := make(chan struct{}), make(chan struct{}), make(chan error, 1)
			go func() {
				wrote <- g.Do(ctx, func(ctx context.Context, token fence.Token) error {
					close(checked) // the guard let it through
					<-resume
					if !tc.fenced {
						return q.SetBalance(ctx, db.SetBalanceParams{ID: "acct-A", Balance: 1})
					}
					return sqlcbank.SetBalance(ctx, q, token, "acct-A", 1)
				})
			}()
			<-checked
			if _, err := second.Break(ctx, "acct-A", l.Token()); err != nil {
				t.Fatal(err)
			}
			if err := setBalanceHeld(ctx, second, q, "acct-A", 700); err != nil {
				t.Fatalf("next holder: got %v, want nil", err)
			}
			next, err := db.New(pool).ReadFence(ctx, "acct-A")
			if err != nil {
				t.Fatal(err)
			}
			close(resume)
			err = <-wrote
			if !tc.fenced {
				if err != nil {
					t.Fatalf("control: got %v, want nil", err)
				}
				wantAccount(t, pool, "acct-A", 1, next) // the next holder's 700 is lost
				return
			}
			fencewant.Stale(t, err, l.Token(), fence.Token(next))
			wantAccount(t, pool, "acct-A", 700, next)
		})
	}
}
