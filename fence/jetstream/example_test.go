package jsfence_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fencelock/fencelock/fence"
	jsfence "github.com/fencelock/fencelock/fence/jetstream"
	"github.com/fencelock/fencelock/internal/testkit/natstest"
)

// advanceCheckpoint moves a job's checkpoint, an entry of a bucket, past
// the items it has processed, under the lock whose guard it is given: the
// read claims the key for the lock's token, and the write lands only on
// the revision it read, so a deposed holder can neither write its late
// checkpoint nor have it overwritten unseen.
func advanceCheckpoint(ctx context.Context, guard *fence.Guard, store *jsfence.Store, job string) error {
	return guard.Update(ctx, store, "checkpoints/"+job, func(old fence.Record) ([]byte, error) {
		done := 0
		if old.Value != nil { // the zero Record: no checkpoint yet
			var err error
			if done, err = strconv.Atoi(string(old.Value)); err != nil {
				return nil, fmt.Errorf("checkpoint of %s: %q: %w", job, old.Value, err)
			}
		}
		return []byte(strconv.Itoa(done + 100)), nil
	})
}

// newBucket returns the bucket named name on the NATS server at url, such
// as "nats://localhost:4222", creating it if needed, and the connection
// to close when done. docs/jetstream.md shows this function as it is here.
func newBucket(ctx context.Context, url, name string) (jetstream.KeyValue, *nats.Conn, error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: name})
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return kv, nc, nil
}

// lockHolding stands for an *etcdlock.Lock holding a token.
type lockHolding fence.Token

func (l lockHolding) Token() fence.Token  { return fence.Token(l) }
func (lockHolding) Done() <-chan struct{} { return nil }

// Example advances a job's checkpoint under the lock of token 34; the
// holder of 33, paused until its lock was gone, is refused by the bucket.
func Example() {
	ctx := context.Background()
	kv, nc, err := newBucket(ctx, natstest.Shared().URL(), "example_fences") // e.g. "nats://localhost:4222"
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	defer func() { _ = mustJetStream(nc).DeleteKeyValue(ctx, "example_fences") }()
	store, err := jsfence.New(kv)
	if err != nil {
		log.Fatal(err)
	}
	if err := store.CheckRevisions(ctx); err != nil {
		log.Fatal(err) // a server that cannot fence
	}

	now, _ := fence.NewGuard(lockHolding(34))
	paused, _ := fence.NewGuard(lockHolding(33))
	for range 2 {
		if err := advanceCheckpoint(ctx, now, store, "reindex"); err != nil {
			log.Fatal(err)
		}
	}
	err = advanceCheckpoint(ctx, paused, store, "reindex")
	fmt.Println("paused holder refused:", errors.Is(err, fence.ErrStale))
	rec, err := store.Get(ctx, "checkpoints/reindex")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("checkpoint %s, token %d\n", rec.Value, rec.Token)
	// Output:
	// paused holder refused: true
	// checkpoint 200, token 34
}

func mustJetStream(nc *nats.Conn) jetstream.JetStream {
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	return js
}
