package gcsfence_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strconv"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"

	"github.com/fencelock/fencelock/fence"
	gcsfence "github.com/fencelock/fencelock/fence/gcs"
	"github.com/fencelock/fencelock/internal/testkit/gcstest"
)

// advanceCheckpoint moves a job's checkpoint, an object in a bucket, past
// the items it has processed, under the lock whose guard it is given: the
// read claims the object for the lock's token, and the write lands only on
// the generation it read, so a deposed holder can neither write its late
// checkpoint nor have it overwritten unseen.
func advanceCheckpoint(ctx context.Context, guard *fence.Guard, store *gcsfence.Store, job string, processed int) error {
	return guard.Update(ctx, store, "checkpoints/"+job, func(old fence.Record) ([]byte, error) {
		done := 0
		if old.Value != nil { // the zero Record: no checkpoint yet
			var err error
			if done, err = strconv.Atoi(string(old.Value)); err != nil {
				return nil, fmt.Errorf("checkpoint of %s: %q: %w", job, old.Value, err)
			}
		}
		return []byte(strconv.Itoa(done + processed)), nil
	})
}

// newEmulatorClient returns a client of the Cloud Storage emulator that
// the environment names (docs/gcs.md shows it): with
// STORAGE_EMULATOR_HOST=localhost:4443, the library sends every request
// there, over http. The emulator checks no credentials, and reads go
// through the JSON API: fake-gcs-server routes the library's default XML
// reads (GET /bucket/object) only for its -public-host
// (storage.googleapis.com by default), and answers 404 to others, which
// the Store would take for a missing record.
func newEmulatorClient(ctx context.Context) (*storage.Client, error) {
	return storage.NewClient(ctx, option.WithoutAuthentication(), storage.WithJSONReads())
}

// lockHolding stands for an *etcdlock.Lock holding a token.
type lockHolding fence.Token

func (l lockHolding) Token() fence.Token  { return fence.Token(l) }
func (lockHolding) Done() <-chan struct{} { return nil }

// Example advances a job's checkpoint under the lock of token 34; the
// holder of 33, paused until its lock was gone, is refused by the bucket.
func Example() {
	ctx := context.Background()
	client, err := gcstest.Shared().NewClient(nil) // storage.NewClient(ctx) for Google Cloud Storage
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	store, err := gcsfence.New(client, gcstest.Bucket, gcsfence.WithPrefix("example/"))
	if err != nil {
		log.Fatal(err)
	}

	now, _ := fence.NewGuard(lockHolding(34))
	paused, _ := fence.NewGuard(lockHolding(33))
	for range 2 {
		if err := advanceCheckpoint(ctx, now, store, "reindex", 100); err != nil {
			log.Fatal(err)
		}
	}
	err = advanceCheckpoint(ctx, paused, store, "reindex", 100)
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
