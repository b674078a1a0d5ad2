package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
)

// Take a lock, write under its token, release it.
func ExampleClient_Lock() {
	// endpoints: an etcd cluster (here the embedded one the tests start).
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()

	locks, err := etcdlock.New(cli, etcdlock.WithTTL(10*time.Second), etcdlock.WithPrefix("/example-lock/"))
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(context.Background())

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lock, err := locks.Lock(ctx, "nightly-report")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("held, token positive:", lock.Token() > 0)
	fmt.Println("granted TTL:", lock.TTL())

	if err := lock.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	<-lock.Done()
	fmt.Println("after unlock:", lock.Err())
	// Output:
	// held, token positive: true
	// granted TTL: 10s
	// after unlock: etcdlock: unlocked
}

// TryLock returns at once when someone else holds the lock.
func ExampleClient_TryLock() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // bounds every call, Unlock included
	defer cancel()

	a, _ := etcdlock.New(cli, etcdlock.WithPrefix("/example-trylock/"))
	defer a.Close(ctx)
	b, _ := etcdlock.New(cli, etcdlock.WithPrefix("/example-trylock/"))
	defer b.Close(ctx)

	held, err := a.TryLock(ctx, "compaction")
	if err != nil {
		log.Fatal(err)
	}
	_, err = b.TryLock(ctx, "compaction")
	fmt.Println("second TryLock:", errors.Is(err, etcdlock.ErrLocked))

	held.Unlock(ctx)
	again, err := b.TryLock(ctx, "compaction")
	fmt.Println("after release:", err, again.Token() > held.Token())
	again.Unlock(ctx)
	// Output:
	// second TryLock: true
	// after release: <nil> true
}

// A holder whose lease ran out while it was paused writes late: the store
// refuses it because a newer holder's token got there first.
func Example_guard() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second) // bounds the waits for the lock, not the writes
	defer cancel()
	store := fence.NewMemoryStore() // stands for any fenced resource

	a, _ := etcdlock.New(cli, etcdlock.WithPrefix("/example-guard/"))
	defer a.Close(ctx)
	b, _ := etcdlock.New(cli, etcdlock.WithPrefix("/example-guard/"))
	defer b.Close(ctx)

	lockA, _ := a.Lock(waitCtx, "account-7")
	guardA, _ := fence.NewGuard(lockA)

	err = guardA.Do(ctx, func(ctx context.Context, token fence.Token) error {
		// A has passed its guard's check; now it stalls, and its lease ends
		// (revoked here, to stand for an expiry during the pause).
		cli.Revoke(ctx, lockA.Lease())

		lockB, _ := b.Lock(waitCtx, "account-7")
		guardB, _ := fence.NewGuard(lockB)
		fmt.Println("B writes:", guardB.Put(ctx, store, "balance", []byte("100")))
		defer lockB.Unlock(ctx)

		return store.Put(ctx, "balance", token, []byte("90")) // A wakes up
	})
	fmt.Println("A's late write refused:", errors.Is(err, fence.ErrStale))
	rec, _ := store.Get(ctx, "balance")
	fmt.Printf("balance: %s\n", rec.Value)
	// Output:
	// B writes: <nil>
	// A's late write refused: true
	// balance: 100
}

// One active instance: Run calls lead only while this process leads the
// election, with a context that ends with the term, and every write of the
// term goes through a Guard, so a deposed leader's late writes are refused.
func ExampleClient_Run() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	store := fence.NewMemoryStore() // stands for any fenced resource

	sched, err := etcdlock.New(cli, etcdlock.WithPrefix("/example-run/"), etcdlock.WithOwner("scheduler-1"))
	if err != nil {
		log.Fatal(err)
	}
	defer sched.Close(context.Background())

	ctx, stop := context.WithCancel(context.Background())
	err = sched.Run(ctx, "scheduler", "10.0.0.7:8080", func(ctx context.Context, term *etcdlock.Term) error {
		guard, err := fence.NewGuard(term)
		if err != nil {
			return err
		}
		leader, err := sched.Leader(ctx, "scheduler")
		if err != nil {
			return err
		}
		fmt.Println("leading:", leader.Owner, leader.Data, leader.Token == term.Token())
		if err := guard.Put(ctx, store, "last-run", []byte("done")); err != nil {
			return err
		}
		fmt.Println("wrote under token", term.Token() > 0)
		stop() // a real leader works until ctx ends (the term is lost, or Run is stopped)
		<-ctx.Done()
		return nil
	})
	fmt.Println("Run:", err)
	// Output:
	// leading: scheduler-1 10.0.0.7:8080 true
	// wrote under token true
	// Run: context canceled
}

// LeaderHealth, served at /healthz, answers 503 while a lead function
// goes on after its term ended (here broken by an operator), for a
// liveness probe to restart the process.
func ExampleLeaderHealth() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	locks, err := etcdlock.New(cli, etcdlock.WithPrefix("/example-health/"))
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(context.Background())

	health, err := etcdlock.NewLeaderHealth(etcdlock.WithStopTimeout(200 * time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(health) // in a program: http.Handle("/healthz", health)
	defer srv.Close()
	probe := func() {
		resp, err := srv.Client().Get(srv.URL + "/healthz")
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		reason, _, _ := strings.Cut(string(body), ", term") // the rest: the token and the times
		fmt.Println(resp.StatusCode, strings.TrimSpace(reason))
	}

	ctx, stop := context.WithCancel(context.Background())
	err = locks.Run(ctx, "compactor", "", func(ctx context.Context, term *etcdlock.Term) error {
		probe()
		if _, err := locks.BreakElection(context.Background(), "compactor", term.Token()); err != nil {
			return err
		}
		<-ctx.Done()
		time.Sleep(300 * time.Millisecond) // wedged: still at work after the term ended
		probe()
		stop()
		return nil
	}, etcdlock.WithLeaderHealth(health))
	fmt.Println("Run:", err)
	probe()
	// Output:
	// 200 ok
	// 503 etcdlock: leader unhealthy: election "compactor"
	// Run: context canceled
	// 200 ok
}

// Inspect tells who holds a lock and who waits; TryLock's error names the
// holder too.
func ExampleClient_Inspect() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // bounds every call, Unlock included
	defer cancel()

	a, _ := etcdlock.New(cli, etcdlock.WithPrefix("/example-inspect/"), etcdlock.WithOwner("report-job/host-7"))
	defer a.Close(ctx)
	b, _ := etcdlock.New(cli, etcdlock.WithPrefix("/example-inspect/"), etcdlock.WithOwner("report-job/host-9"))
	defer b.Close(ctx)

	lock, err := a.Lock(ctx, "report", etcdlock.WithMetadata("run 42"))
	if err != nil {
		log.Fatal(err)
	}
	defer lock.Unlock(ctx)

	q, err := b.Inspect(ctx, "report")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("held by:", q.Holder.Owner, q.Holder.Data, q.Holder.Token == lock.Token())
	fmt.Println("waiters:", len(q.Waiters))

	_, err = b.TryLock(ctx, "report")
	var locked *etcdlock.LockedError
	if errors.As(err, &locked) {
		fmt.Println("TryLock refused; holder:", locked.Holder.Owner)
	}
	// Output:
	// held by: report-job/host-7 run 42 true
	// waiters: 0
	// TryLock refused; holder: report-job/host-7
}
