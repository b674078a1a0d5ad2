package azblobfence_test

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/fence"
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

// prefix returns a prefix no other test or run uses.
func prefix(t testing.TB) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "fencelock-test/" + strings.ReplaceAll(t.Name(), "/", "-") + "/" + hex.EncodeToString(b[:]) + "/"
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

func mustPut(t testing.TB, s *azblobfence.Store, key string, token fence.Token, value string) {
	t.Helper()
	if err := s.Put(t.Context(), key, token, []byte(value)); err != nil {
		t.Fatalf("Put(%q, %d): got %v, want nil", key, token, err)
	}
}

func wantRecord(t testing.TB, s *azblobfence.Store, key string, token fence.Token, value string) {
	t.Helper()
	r, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q): got %v, want token %d %q", key, err, token, value)
	}
	if r.Token != token || string(r.Value) != value {
		t.Fatalf("Get(%q): got token %d %q, want token %d %q", key, r.Token, r.Value, token, value)
	}
}

var _ azblobfence.Container = (*container.Client)(nil)
