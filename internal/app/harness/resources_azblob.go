package harness

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/fencelock/fencelock/fence"
	azblobfence "github.com/fencelock/fencelock/fence/azblob"
)

// azConfig is where a worker's Azure blobs are: the run's proxy in front
// of its Azurite (azLog), and the run's container there.
type azConfig struct {
	URL       string // the blob endpoint, its account in the path
	Account   string
	Key       string
	Container string
}

// azResource is a block blob of the run's container on Azurite: fenced,
// written with fence/azblob's Store.Put (Put Blob with If-Match on the
// blob's ETag); in the control, with a plain Put Blob of the value and
// the metadata the Store would write, which checks nothing.
type azResource struct {
	c     *container.Client
	store *azblobfence.Store
}

func openAzResource(cfg azConfig) (azResource, error) {
	cred, err := container.NewSharedKeyCredential(cfg.Account, cfg.Key)
	if err != nil {
		return azResource{}, err
	}
	c, err := container.NewClientWithSharedKeyCredential(strings.TrimSuffix(cfg.URL, "/")+"/"+cfg.Container, cred,
		&container.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: -1}}})
	if err != nil {
		return azResource{}, err
	}
	st, err := azblobfence.New(c)
	if err != nil {
		return azResource{}, err
	}
	return azResource{c: c, store: st}, nil
}

func (r azResource) write(ctx context.Context, fenced bool, key string, tok fence.Token, val string) error {
	ctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	if fenced {
		return r.store.Put(ctx, key, tok, []byte(val))
	}
	var id [16]byte
	_, _ = rand.Read(id[:])
	body := streaming.NopCloser(bytes.NewReader([]byte(val)))
	_, err := r.c.NewBlockBlobClient(key).Upload(ctx, body, &blockblob.UploadOptions{Metadata: map[string]*string{
		azblobfence.MetadataToken: to.Ptr(tok.String()), azblobfence.MetadataWrite: to.Ptr(hex.EncodeToString(id[:])),
		azblobfence.MetadataKind: to.Ptr("value"),
	}})
	return err
}

func (r azResource) read(ctx context.Context, key string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	rec, err := r.store.Get(ctx, key)
	if errors.Is(err, fence.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("harness: reading blob %s: %w", key, err)
	}
	return string(rec.Value), nil
}
