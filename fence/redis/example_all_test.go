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

// ExampleStore_UpdateAll moves 30 between two accounts, each under its own
// lock's token, in one script: both balances are written, or neither. The
// keys share a hash tag ({42}), so they are in one hash slot; keys of two
// slots are refused before anything is sent.
func ExampleStore_UpdateAll() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{
		Addr: redistest.Shared().Addr(), // e.g. "localhost:6379"
	})
	defer rdb.Close()
	store, err := redisfence.New(rdb, "example:all:")
	if err != nil {
		log.Fatal(err)
	}
	a, b := "acct:{42}:A", "acct:{42}:B"
	defer rdb.Del(ctx, store.Key(a), store.Key(b))

	move := func(n int) fence.UpdateAllFunc {
		return func(old map[string]fence.Record) (map[string][]byte, error) {
			x, _ := strconv.Atoi(string(old[a].Value)) // the zero Record for no value: 0
			y, _ := strconv.Atoi(string(old[b].Value))
			return map[string][]byte{a: []byte(strconv.Itoa(x - n)), b: []byte(strconv.Itoa(y + n))}, nil
		}
	}
	// 41 and 52 are the tokens of the two locks this process holds, e.g.
	// an *etcdlock.MultiLock's (store.UpdateHeld takes it whole).
	claims := []fence.Claim{{Resource: a, Token: 41}, {Resource: b, Token: 52}}
	if err := store.Put(ctx, a, 41, []byte("100")); err != nil {
		log.Fatal(err)
	}
	if err := store.UpdateAll(ctx, claims, move(30)); err != nil {
		log.Fatal(err)
	}
	// A newer holder of B's lock (token 60) writes B; the holder of 41
	// and 52, paused all along, transfers again.
	if err := store.Put(ctx, b, 60, []byte("0")); err != nil {
		log.Fatal(err)
	}
	err = store.UpdateAll(ctx, claims, move(30))
	var stale *fence.StaleError
	if errors.As(err, &stale) {
		fmt.Printf("late transfer refused for %s (token %d, Redis holds %d)\n", stale.Resource, stale.Token, stale.Current)
	}
	for _, k := range []string{a, b} {
		rec, err := store.Get(ctx, k)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %s, token %d\n", k, rec.Value, rec.Token)
	}
	err = store.UpdateAll(ctx, []fence.Claim{{Resource: "acct:7:A", Token: 41}, {Resource: "acct:8:B", Token: 52}}, move(30))
	fmt.Println("keys of two slots refused:", errors.Is(err, redisfence.ErrCrossSlot))
	// Output:
	// late transfer refused for acct:{42}:B (token 52, Redis holds 60)
	// acct:{42}:A: 70, token 41
	// acct:{42}:B: 0, token 60
	// keys of two slots refused: true
}
