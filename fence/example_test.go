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
