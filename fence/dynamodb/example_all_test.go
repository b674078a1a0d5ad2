package dynamofence_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log"
	"strconv"

	"github.com/fencelock/fencelock/fence"
	dynamofence "github.com/fencelock/fencelock/fence/dynamodb"
	"github.com/fencelock/fencelock/internal/testkit/dynamotest"
)

// ExampleStore_UpdateAll moves 30 between two accounts, each under its own
// lock's token, in one TransactWriteItems: both balances are written, or
// neither.
func ExampleStore_UpdateAll() {
	ctx := context.Background()
	ddb := newClient(dynamotest.Shared().URL()) // e.g. "http://localhost:8000"
	if err := dynamofence.CreateStoreTable(ctx, ddb, "fences", dynamofence.DefaultKeyAttribute); err != nil {
		log.Fatal(err)
	}
	store, err := dynamofence.New(ddb, "fences")
	if err != nil {
		log.Fatal(err)
	}
	run := rand.Text() // keys of this run alone
	a, b := "acct/"+run+"/A", "acct/"+run+"/B"

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
		fmt.Printf("late transfer refused for B (token %d, DynamoDB holds %d): %t\n", stale.Token, stale.Current, stale.Resource == b)
	}
	for _, k := range []string{a, b} {
		rec, err := store.Get(ctx, k)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %s, token %d\n", k[len(k)-1:], rec.Value, rec.Token)
	}
	// Output:
	// late transfer refused for B (token 52, DynamoDB holds 60): true
	// A: 70, token 41
	// B: 0, token 60
}
