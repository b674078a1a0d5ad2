package fence_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/fencelock/fencelock/fence"
)

// exampleHolder is a lock holder for the examples: a token, never lost.
type exampleHolder fence.Token

func (h exampleHolder) Token() fence.Token    { return fence.Token(h) }
func (h exampleHolder) Done() <-chan struct{} { return nil }

// A counter incremented under a lock: Update reads, computes and writes
// in one call that a late write of an older holder cannot slip into.
func ExampleGuard_Update() {
	ctx := context.Background()
	store := fence.NewMemoryStore()
	g, _ := fence.NewGuard(exampleHolder(7)) // in real code: fence.NewGuard(lock)
	for range 3 {
		err := g.Update(ctx, store, "invoices-sent", func(old fence.Record) ([]byte, error) {
			n := 0
			if old.Value != nil { // no value yet: the zero Record
				n, _ = strconv.Atoi(string(old.Value))
			}
			return strconv.AppendInt(nil, int64(n+1), 10), nil
		})
		if err != nil {
			fmt.Println(err)
		}
	}
	r, _ := store.Get(ctx, "invoices-sent")
	fmt.Printf("%s (token %d)\n", r.Value, r.Token)
	// Output: 3 (token 7)
}

// Reading before a write claims the resource: once the newer holder (9)
// has read, the older holder's (5) late write is refused, so the value the
// newer holder computed from its read cannot overwrite a write it never saw.
func ExampleGuard_GetForUpdate() {
	ctx := context.Background()
	store := fence.NewMemoryStore()
	_ = store.Put(ctx, "balance", 5, []byte("100"))

	newer, _ := fence.NewGuard(exampleHolder(9))
	r, _ := newer.GetForUpdate(ctx, store, "balance")
	fmt.Printf("read %s, the floor is now %d\n", r.Value, r.Token)

	err := store.Put(ctx, "balance", 5, []byte("0")) // the older holder, late
	fmt.Println("late write refused:", errors.Is(err, fence.ErrStale))
	// Output:
	// read 100, the floor is now 9
	// late write refused: true
}

// exampleLocks holds two locks, each with its own token, as an
// *etcdlock.MultiLock does.
type exampleLocks []fence.Claim

func (h exampleLocks) Claims() []fence.Claim { return h }

// A transfer between two accounts under two locks: UpdateHeld claims both
// keys with their own tokens and writes both balances, or neither.
func ExampleUpdateHeld() {
	ctx := context.Background()
	store := fence.NewMemoryStore() // or fence/etcd's, fence/redis's, fence/dynamodb's Store
	_ = store.Put(ctx, "acct/A", 3, []byte("100"))
	held := exampleLocks{{Resource: "acct/A", Token: 7}, {Resource: "acct/B", Token: 9}} // in real code: locks.LockAll(ctx, names)
	err := fence.UpdateHeld(ctx, store, held, func(old map[string]fence.Record) (map[string][]byte, error) {
		a, _ := strconv.Atoi(string(old["acct/A"].Value))
		b, _ := strconv.Atoi(string(old["acct/B"].Value)) // no value yet: the zero Record
		if a < 30 {
			return nil, errors.New("insufficient funds") // nothing written
		}
		return map[string][]byte{"acct/A": []byte(strconv.Itoa(a - 30)), "acct/B": []byte(strconv.Itoa(b + 30))}, nil
	})
	fmt.Println("transfer:", err)
	for _, k := range []string{"acct/A", "acct/B"} {
		rec, _ := store.Get(ctx, k)
		fmt.Printf("%s: %s, token %d\n", k, rec.Value, rec.Token)
	}
	// Output:
	// transfer: <nil>
	// acct/A: 70, token 7
	// acct/B: 30, token 9
}

// A token of the caller's own, from a lock this module does not provide:
// NewHolder makes it a Holder, whose done channel the caller closes when
// its lock ends.
func ExampleNewHolder() {
	ctx := context.Background()
	store := fence.NewMemoryStore()
	_ = store.Put(ctx, "report", 8, []byte("by the holder of token 8"))

	done := make(chan struct{}) // closed when the caller's lock ends
	h, err := fence.NewHolder(7, done)
	if err != nil {
		fmt.Println(err)
		return
	}
	g, _ := fence.NewGuard(h)
	err = g.Put(ctx, store, "report", []byte("late"))
	fmt.Println(errors.Is(err, fence.ErrStale))

	close(done)
	err = g.Put(ctx, store, "report", []byte("later"))
	fmt.Println(errors.Is(err, fence.ErrLockLost))
	// Output:
	// true
	// true
}
