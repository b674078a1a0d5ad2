package redisfence_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	redisfence "github.com/fencelock/fencelock/fence/redis"
	"github.com/fencelock/fencelock/internal/testkit/redistest"
)

// Example writes a record with a fencing token, reads it back, and shows a
// paused holder's late write, with an older token, refused by Redis.
func Example() {
	ctx := context.Background()
	rdb := newClient(redistest.Shared().Addr()) // e.g. "localhost:6379"
	defer rdb.Close()
	store, err := redisfence.New(rdb, "example:fences:")
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Del(ctx, store.Key("scheduler/state"))

	// 34 is the token of the lock this process holds, e.g. lock.Token().
	if err := store.Put(ctx, "scheduler/state", 34, []byte(`{"leader": "b"}`)); err != nil {
		log.Fatal(err)
	}
	// The holder of token 33, paused until its lock was gone, writes late.
	err = store.Put(ctx, "scheduler/state", 33, []byte(`{"leader": "a"}`))
	var stale *fence.StaleError
	if errors.As(err, &stale) {
		fmt.Printf("token %d refused: Redis holds %d\n", stale.Token, stale.Current)
	}
	rec, err := store.Get(ctx, "scheduler/state")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s, token %d\n", rec.Value, rec.Token)
	// Output:
	// token 33 refused: Redis holds 34
	// {"leader": "b"}, token 34
}

// newClient returns a client of the Redis server at addr, such as
// "localhost:6379", whose calls end when their contexts do. docs/redis.md
// shows this function as it is here.
func newClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr: addr,
		// Without it, a call waits for its reply for ReadTimeout (3 s by
		// default), whatever its context says.
		ContextTimeoutEnabled: true,
	})
}

// errNoFunds is withdraw's refusal.
var errNoFunds = errors.New("insufficient funds")

// withdraw takes amount from the balance of account, a hash of yours in
// Redis, under the lock whose guard it is given: the read claims the hash
// for the lock's token, and the write lands only if the balance read is
// still there, so neither a deposed holder's late write nor a concurrent
// one is lost.
func withdraw(ctx context.Context, guard *fence.Guard, accounts *redisfence.Hash, account string, amount int) error {
	return guard.Do(ctx, func(ctx context.Context, token fence.Token) error {
		return accounts.Update(ctx, account, token, []string{"balance"}, func(old map[string]string) (map[string]string, error) {
			balance, err := strconv.Atoi(old["balance"])
			if err != nil {
				return nil, fmt.Errorf("account %s: balance %q: %w", account, old["balance"], err)
			}
			if balance < amount {
				return nil, errNoFunds // nothing is written; Update returns it
			}
			return map[string]string{"balance": strconv.Itoa(balance - amount)}, nil
		})
	})
}

// heldLock stands for an *etcdlock.Lock holding token 34, and the paused
// holder's lock, 33, which no longer knows it is lost.
type heldLock fence.Token

func (l heldLock) Token() fence.Token  { return fence.Token(l) }
func (heldLock) Done() <-chan struct{} { return nil }

// ExampleHash_Update withdraws from an account kept in a Redis hash of the
// application's own, with the balance in a field of its own and the token
// in the field "fence". The holder of token 33, paused until its lock was
// gone, tries to withdraw after the holder of 34 has: Redis refuses it.
func ExampleHash_Update() {
	ctx := context.Background()
	rdb := newClient(redistest.Shared().Addr()) // e.g. "localhost:6379"
	defer rdb.Close()
	accounts, err := redisfence.NewHash(rdb, "fence")
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Del(ctx, "example:account:7")
	if err := rdb.HSet(ctx, "example:account:7", "owner", "ada", "balance", "100").Err(); err != nil {
		log.Fatal(err)
	}

	now, _ := fence.NewGuard(heldLock(34))
	paused, _ := fence.NewGuard(heldLock(33))
	if err := withdraw(ctx, now, accounts, "example:account:7", 30); err != nil {
		log.Fatal(err)
	}
	err = withdraw(ctx, paused, accounts, "example:account:7", 30)
	fmt.Println("paused holder refused:", errors.Is(err, fence.ErrStale))
	err = withdraw(ctx, now, accounts, "example:account:7", 100)
	fmt.Println("overdraft refused:", errors.Is(err, errNoFunds))

	fields, err := rdb.HGetAll(ctx, "example:account:7").Result()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(fields["owner"], fields["balance"], fields["fence"])
	// Output:
	// paused holder refused: true
	// overdraft refused: true
	// ada 70 0000000000000000034
}
