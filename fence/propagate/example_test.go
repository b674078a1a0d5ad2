package propagate_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/propagate"
	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
)

// Two workers hold the lock "acct-7" in turn and call a ledger service,
// which writes PostgreSQL with the token each call carries. Worker A is
// paused after taking the lock; its lease expires meanwhile (here it is
// revoked, as etcd does when it expires), and B takes the lock and calls.
// A then wakes and makes its late call: the fenced ledger's database
// refuses it (409, which A's client sees as fence.ErrStale); the unfenced
// one, the control, lets it overwrite B's write.
func Example_ledger() {
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{Endpoints: embedetcd.Shared().Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	client := &http.Client{Transport: &propagate.Transport{}}

	for _, fenced := range []bool{true, false} {
		url, pool, done := exampleLedger(fenced)
		a, b := exampleLocker(cli, fenced), exampleLocker(cli, fenced)

		lockA, err := a.Lock(ctx, "acct-7")
		if err != nil {
			log.Fatal(err)
		}
		guardA, err := fence.NewGuard(lockA)
		if err != nil {
			log.Fatal(err)
		}
		var errB error
		// A writes through its Guard: a refusal whose token the lock
		// service never issued then also says fence.ErrTokenRegressed.
		errA := guardA.Do(ctx, func(ctx context.Context, tok fence.Token) error {
			// A pauses here, after its guard's check; its lease expires.
			if _, err := cli.Revoke(ctx, lockA.Lease()); err != nil {
				log.Fatal(err)
			}
			errB = callerB(ctx, b, client, url)
			ctxA, err := propagate.NewContext(ctx, propagate.Fencing{Name: lockA.Name(), Token: tok})
			if err != nil {
				return err
			}
			return setBalance(ctxA, client, url, 90) // A wakes: its late call
		})
		var balance int64
		if err := pool.QueryRow(ctx, "SELECT balance FROM ledger_balances WHERE id = 'acct-7'").Scan(&balance); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("fenced %v: B's call: %v; A's late call stale: %v; balance %d\n", fenced, errB, errors.Is(errA, fence.ErrStale), balance)

		a.Close(ctx)
		b.Close(ctx)
		done()
	}
	// Output:
	// fenced true: B's call: <nil>; A's late call stale: true; balance 120
	// fenced false: B's call: <nil>; A's late call stale: false; balance 90
}

// callerB is the second holder: it takes the lock and calls through its
// Guard, then releases the lock.
func callerB(ctx context.Context, b *etcdlock.Client, client *http.Client, url string) error {
	lockB, err := b.Lock(ctx, "acct-7")
	if err != nil {
		return err
	}
	defer lockB.Unlock(context.WithoutCancel(ctx))
	guardB, err := fence.NewGuard(lockB)
	if err != nil {
		return err
	}
	return guardB.Do(ctx, func(ctx context.Context, tok fence.Token) error {
		ctx, err := propagate.NewContext(ctx, propagate.Fencing{Name: lockB.Name(), Token: tok})
		if err != nil {
			return err
		}
		return setBalance(ctx, client, url, 120)
	})
}

// exampleLocker returns an etcdlock client on cli, in a key space of the
// run's own.
func exampleLocker(cli *clientv3.Client, fenced bool) *etcdlock.Client {
	c, err := etcdlock.New(cli, etcdlock.WithTTL(time.Second), etcdlock.WithPrefix(fmt.Sprintf("/example-ledger-%v/", fenced)))
	if err != nil {
		log.Fatal(err)
	}
	return c
}

// exampleLedger starts the ledger on a fresh database; done stops it and
// drops the database.
func exampleLedger(fenced bool) (url string, pool *pgxpool.Pool, done func()) {
	ctx := context.Background()
	srv := pgtest.Shared()
	name, dsn, err := srv.CreateDatabase(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if pool, err = pgxpool.New(ctx, dsn); err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, ledgerSchema); err != nil {
		log.Fatal(err)
	}
	h, err := newLedger(pool, fenced)
	if err != nil {
		log.Fatal(err)
	}
	hs := httptest.NewServer(h)
	return hs.URL, pool, func() {
		hs.Close()
		pool.Close()
		_ = srv.DropDatabase(ctx, name)
	}
}
