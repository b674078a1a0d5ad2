package pgadvisory_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/pgadvisory"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
)

// Example takes an advisory lock with a token, writes through a guard,
// and shows the write of a holder whose session ended (it did not hear
// of it) refused by the resource once the next holder has written.
func Example() {
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(pgtest.Shared().DSN()) // e.g. "postgres://app@db/app"
	if err != nil {
		log.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := pgadvisory.CreateSequence(ctx, conn, pgadvisory.WithSequence(pgx.Identifier{"example_tokens"})); err != nil {
		log.Fatal(err)
	}
	defer conn.Exec(ctx, "DROP SEQUENCE example_tokens")
	store := fence.NewMemoryStore() // fence/postgres, fence/redis, …

	a, err := pgadvisory.Acquire(ctx, cfg, 42, pgadvisory.WithSequence(pgx.Identifier{"example_tokens"}))
	if err != nil {
		log.Fatal(err)
	}
	ga, _ := fence.NewGuard(stillHeld{a}) // A does not hear its session end
	fmt.Println("A holds token", a.Token())
	a.Release(ctx) // A's session ends

	b, err := pgadvisory.Acquire(ctx, cfg, 42, pgadvisory.WithSequence(pgx.Identifier{"example_tokens"}))
	if err != nil {
		log.Fatal(err)
	}
	defer b.Release(ctx)
	gb, _ := fence.NewGuard(b)
	fmt.Println("B holds token", b.Token())
	if err := gb.Put(ctx, store, "report", []byte("B's")); err != nil {
		log.Fatal(err)
	}

	err = ga.Put(ctx, store, "report", []byte("A's"))
	fmt.Println("A's late write refused:", errors.Is(err, fence.ErrStale))
	// Output:
	// A holds token 1
	// B holds token 2
	// A's late write refused: true
}
