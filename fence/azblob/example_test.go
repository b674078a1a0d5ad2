package azblobfence_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strconv"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/fencelock/fencelock/fence"
	azblobfence "github.com/fencelock/fencelock/fence/azblob"
	"github.com/fencelock/fencelock/internal/testkit/azuritetest"
)

// advanceWatermark moves a job's watermark, a blob in a container, past
// the items it has processed, under the lock whose guard it is given: the
// read claims the blob for the lock's token, and the write lands only on
// the ETag it read, so a deposed holder can neither write its late
// watermark nor have it overwritten unseen.
func advanceWatermark(ctx context.Context, guard *fence.Guard, store *azblobfence.Store, job string, processed int) error {
	return guard.Update(ctx, store, "watermarks/"+job, func(old fence.Record) ([]byte, error) {
		done := 0
		if old.Value != nil { // the zero Record: no watermark yet
			var err error
			if done, err = strconv.Atoi(string(old.Value)); err != nil {
				return nil, fmt.Errorf("watermark of %s: %q: %w", job, old.Value, err)
			}
		}
		return []byte(strconv.Itoa(done + processed)), nil
	})
}

// newAzuriteClient returns a client of the container name of Azurite's
// development account, devstoreaccount1, whose key every Azurite has, at
// endpoint (http://127.0.0.1:10000/devstoreaccount1 by default), and
// creates the container unless it exists. opts may be nil.
func newAzuriteClient(ctx context.Context, endpoint, name string, opts *container.ClientOptions) (*container.Client, error) {
	cred, err := container.NewSharedKeyCredential("devstoreaccount1",
		"Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==")
	if err != nil {
		return nil, err
	}
	c, err := container.NewClientWithSharedKeyCredential(endpoint+"/"+name, cred, opts)
	if err != nil {
		return nil, err
	}
	if _, err := c.Create(ctx, nil); err != nil && !bloberror.HasCode(err, bloberror.ContainerAlreadyExists) {
		return nil, err
	}
	return c, nil
}

// examplePrefix is the Example's prefix, one per run, so that it starts
// with no watermark on a server the tests reuse (FENCELOCK_AZURITE_ENDPOINT).
var examplePrefix = "example/" + strconv.FormatInt(time.Now().UnixNano(), 36) + "/"

// lockHolding stands for an *etcdlock.Lock holding a token.
type lockHolding fence.Token

func (l lockHolding) Token() fence.Token  { return fence.Token(l) }
func (lockHolding) Done() <-chan struct{} { return nil }

// Example advances a job's watermark under the lock of token 34; the
// holder of 33, paused until its lock was gone, is refused by the blob.
func Example() {
	ctx := context.Background()
	// With Azure: container.NewClient(url, cred, nil), cred from azidentity.
	c, err := azuritetest.Shared().NewContainerClient(azuritetest.Container, nil)
	if err != nil {
		log.Fatal(err)
	}
	store, err := azblobfence.New(c, azblobfence.WithPrefix(examplePrefix))
	if err != nil {
		log.Fatal(err)
	}

	now, _ := fence.NewGuard(lockHolding(34))
	paused, _ := fence.NewGuard(lockHolding(33))
	for range 2 {
		if err := advanceWatermark(ctx, now, store, "reindex", 100); err != nil {
			log.Fatal(err)
		}
	}
	err = advanceWatermark(ctx, paused, store, "reindex", 100)
	fmt.Println("paused holder refused:", errors.Is(err, fence.ErrStale))
	rec, err := store.Get(ctx, "watermarks/reindex")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("watermark %s, token %d\n", rec.Value, rec.Token)
	// Output:
	// paused holder refused: true
	// watermark 200, token 34
}
