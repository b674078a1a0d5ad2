package azblobfence_test

import (
	"net/http"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"go.uber.org/goleak"

	azblobfence "github.com/fencelock/fencelock/fence/azblob"
	"github.com/fencelock/fencelock/internal/testkit/azuritetest"
)

// TestMain starts the Azurite every test shares.
func TestMain(m *testing.M) { goleak.VerifyTestMain(azuritetest.Main(m)) }

// client returns a client of the shared server's container (its requests
// through wrap, when given), with the SDK's default retries.
func client(t testing.TB, wrap ...func(http.RoundTripper) http.RoundTripper) *container.Client {
	t.Helper()
	var w func(http.RoundTripper) http.RoundTripper
	if len(wrap) > 0 {
		w = wrap[0]
	}
	return azuritetest.New(t).Container(t, w)
}

func mustNew(t testing.TB, c *container.Client, opts ...azblobfence.Option) *azblobfence.Store {
	t.Helper()
	s, err := azblobfence.New(c, opts...)
	if err != nil {
		t.Fatalf("New: got %v, want nil", err)
	}
	return s
}

func newStore(t testing.TB, opts ...azblobfence.Option) *azblobfence.Store {
	t.Helper()
	return mustNew(t, client(t), opts...)
}

var _ azblobfence.Container = (*container.Client)(nil)
