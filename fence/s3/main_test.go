package s3fence_test

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"go.uber.org/goleak"

	s3fence "github.com/fencelock/fencelock/fence/s3"
	"github.com/fencelock/fencelock/internal/testkit/s3test"
)

// TestMain starts the S3 server every test in this package shares
// (s3test.New returns it).
func TestMain(m *testing.M) { goleak.VerifyTestMain(s3test.Main(m)) }

// newStore returns a store on the shared server's bucket with its own
// client, so its cache is its own: like a separate process.
func newStore(t *testing.T, opts ...s3fence.Option) *s3fence.Store {
	t.Helper()
	srv := s3test.New(t)
	return mustNew(t, srv.Client(t), srv.Bucket, opts...)
}

func mustNew(t testing.TB, c s3fence.Client, bucket string, opts ...s3fence.Option) *s3fence.Store {
	t.Helper()
	s, err := s3fence.New(c, bucket, opts...)
	if err != nil {
		t.Fatalf("New: got %v, want nil", err)
	}
	return s
}

// client returns a client for the shared server.
func client(t *testing.T, opts ...s3test.ClientOption) *s3.Client {
	t.Helper()
	return s3test.New(t).Client(t, opts...)
}

// key returns a key no other test or run uses.
func key(t testing.TB) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "s3fence-test/" + strings.ReplaceAll(t.Name(), "/", "-") + "/" + hex.EncodeToString(b[:])
}
