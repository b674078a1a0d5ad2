package redisholder_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/redisholder"
	"github.com/fencelock/fencelock/internal/testkit/redistest"
)

// Example takes a redislock lock with a token, writes through a guard,
// and shows the write of a holder whose lock ran out refused by the
// resource once the next holder has written.
func Example() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Shared().Addr(), ContextTimeoutEnabled: true}) // e.g. "localhost:6379"
	defer rdb.Close()
	key := "example:report-lock"
	defer rdb.Del(ctx, key, redisholder.TokenKey(key))
	store := fence.NewMemoryStore() // fence/postgres, fence/redis, …

	a, err := redisholder.Obtain(ctx, rdb, key, 30*time.Second, nil)
	if err != nil {
		log.Fatal(err)
	}
	ga, _ := fence.NewGuard(a)
	fmt.Println("A holds token", a.Token())

	rdb.Del(ctx, key) // A is paused until its lock's TTL runs out

	b, err := redisholder.Obtain(ctx, rdb, key, 30*time.Second, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Release(ctx)
	gb, _ := fence.NewGuard(b)
	fmt.Println("B holds token", b.Token())
	if err := gb.Put(ctx, store, "report", []byte("B's")); err != nil {
		log.Fatal(err)
	}

	err = ga.Put(ctx, store, "report", []byte("A's")) // A resumes
	fmt.Println("A's late write refused:", errors.Is(err, fence.ErrStale))
	// Output:
	// A holds token 1
	// B holds token 2
	// A's late write refused: true
}
