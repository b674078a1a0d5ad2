package jsfence_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/fence"
	jsfence "github.com/fencelock/fencelock/fence/jetstream"
	"github.com/fencelock/fencelock/internal/testkit/natstest"
)

// TestMain starts the nats-server the tests share.
func TestMain(m *testing.M) { goleak.VerifyTestMain(natstest.Main(m)) }

// bucket creates, on the shared server, a bucket named after the test
// (with a random tail), keeping 10 revisions of each key, deleted when t
// ends. It returns the bucket on a connection of its own, and its name.
func bucket(t testing.TB) (jetstream.KeyValue, string) {
	t.Helper()
	return bucketKeeping(t, 10)
}

// bucketKeeping is bucket, keeping history revisions of each key (64 at
// most).
func bucketKeeping(t testing.TB, history uint8) (jetstream.KeyValue, string) {
	t.Helper()
	js := natstest.New(t).JetStream(t)
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := strings.ReplaceAll(key(t), "/", "_") + "_" + hex.EncodeToString(b[:])
	kv, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: name, History: history})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteKeyValue(context.Background(), name) })
	return kv, name
}

// key returns a key named after the test, in the characters a bucket's
// keys may have.
func key(t testing.TB) string {
	return strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("-/_=", r) {
			return r
		}
		return '_'
	}, t.Name())
}

// open returns the bucket name on a new connection to the shared server.
func open(t testing.TB, name string) jetstream.KeyValue {
	t.Helper()
	kv, err := natstest.New(t).JetStream(t).KeyValue(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

var probeOnce sync.Once

// mustNew returns a Store on kv. The first checks that the server honours
// the expected revision of a write.
func mustNew(t testing.TB, kv jsfence.KeyValue, opts ...jsfence.Option) *jsfence.Store {
	t.Helper()
	s, err := jsfence.New(kv, opts...)
	if err != nil {
		t.Fatalf("New: got %v, want nil", err)
	}
	probeOnce.Do(func() { err = s.CheckRevisions(t.Context()) })
	if err != nil {
		t.Fatalf("CheckRevisions: got %v, want nil", err)
	}
	return s
}

// newStore returns a Store on a new bucket of its own.
func newStore(t testing.TB, opts ...jsfence.Option) *jsfence.Store {
	t.Helper()
	kv, _ := bucket(t)
	return mustNew(t, kv, opts...)
}

func mustPut(t testing.TB, s *jsfence.Store, key string, token fence.Token, value string) {
	t.Helper()
	if err := s.Put(t.Context(), key, token, []byte(value)); err != nil {
		t.Fatalf("Put(%q, %d): got %v, want nil", key, token, err)
	}
}

// landed returns how many of key's revisions in kv hold value: how many
// times a write of it landed.
func landed(t testing.TB, kv jetstream.KeyValue, key, value string) int {
	t.Helper()
	h, err := kv.History(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range h {
		if len(e.Value()) >= jsfence.HeaderSize && string(e.Value()[jsfence.HeaderSize:]) == value {
			n++
		}
	}
	return n
}
