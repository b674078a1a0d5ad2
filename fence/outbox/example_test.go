package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
)

// lease is a lock held for the example's length; in a program it is an
// *etcdlock.Lock or an *etcdlock.Partition.
type lease struct{ token fence.Token }

func (l lease) Token() fence.Token    { return l.token }
func (l lease) Done() <-chan struct{} { return nil }

// A dispatcher delivers the effects two holders recorded, in order per
// resource, each with its idempotency key; a holder whose token is stale
// records nothing, so its email never leaves.
func ExampleDispatcher() {
	ctx := context.Background()
	log := outbox.NewMemoryLog() // in a program: fence/postgres's Outbox, fence/etcd's...
	email := func(token fence.Token, seq int64, text string) outbox.Effect {
		return outbox.Effect{Resource: "order-42", Token: token, Seq: seq, Destination: "mail", Payload: []byte(text)}
	}
	log.Record(ctx, fence.Claim{Resource: "order-42", Token: 7}, email(7, 0, "order received"))
	log.Record(ctx, fence.Claim{Resource: "order-42", Token: 9}, email(9, 0, "payment received"))
	err := log.Record(ctx, fence.Claim{Resource: "order-42", Token: 8}, email(8, 0, "order cancelled")) // paused, late
	fmt.Println("stale holder:", errors.Is(err, fence.ErrStale))

	sent := make(chan string)
	d, _ := outbox.NewDispatcher(log, outbox.SenderFunc(func(ctx context.Context, e outbox.Effect) error {
		sent <- fmt.Sprintf("%s: %s", e.Key()[:8], e.Payload) // the key: Idempotency-Key, Nats-Msg-Id...
		return nil
	}))
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	go d.Run(ctx, lease{token: 100}, outbox.All)
	fmt.Println(<-sent)
	fmt.Println(<-sent)
	// Output:
	// stale holder: true
	// fl1-7-0-: order received
	// fl1-9-0-: payment received
}
