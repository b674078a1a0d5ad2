package jsfence_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/fencelock/fencelock/fence"
	jsfence "github.com/fencelock/fencelock/fence/jetstream"
	"github.com/fencelock/fencelock/internal/testkit/natstest"
)

// noIO is a KeyValue that fails the test on any request: the calls given
// it must be refused before any I/O.
type noIO struct{ t *testing.T }

func (n noIO) Get(context.Context, string) (jetstream.KeyValueEntry, error) {
	n.t.Error("Get sent")
	return nil, errors.New("sent")
}

func (n noIO) Create(context.Context, string, []byte, ...jetstream.KVCreateOpt) (uint64, error) {
	n.t.Error("Create sent")
	return 0, errors.New("sent")
}

func (n noIO) Update(context.Context, string, []byte, uint64) (uint64, error) {
	n.t.Error("Update sent")
	return 0, errors.New("sent")
}

func second[T any](_ T, err error) error { return err }

// Bad input gets a clear error before any I/O, never a panic.
func TestBadInput(t *testing.T) {
	var nilKV jetstream.KeyValue
	var typedNil *noIO
	for _, tt := range []struct {
		name string
		err  error
		want error
	}{
		{"New nil KeyValue", second(jsfence.New(nil)), fence.ErrInvalidArgument},
		{"New nil jetstream.KeyValue", second(jsfence.New(nilKV)), jsfence.ErrInvalidArgument},
		{"New typed nil", second(jsfence.New(typedNil)), jsfence.ErrInvalidArgument},
		{"New nil option", second(jsfence.New(noIO{t}, nil)), jsfence.ErrInvalidOption},
		{"New zero timeout", second(jsfence.New(noIO{t}, jsfence.WithRequestTimeout(0))), jsfence.ErrInvalidOption},
		{"New negative timeout", second(jsfence.New(noIO{t}, jsfence.WithRequestTimeout(-time.Second))), jsfence.ErrInvalidOption},
		{"New nil meter provider", second(jsfence.New(noIO{t}, jsfence.WithMeterProvider(nil))), jsfence.ErrInvalidOption},
		{"New nil tracer provider", second(jsfence.New(noIO{t}, jsfence.WithTracerProvider(nil))), jsfence.ErrInvalidOption},
	} {
		if !errors.Is(tt.err, tt.want) {
			t.Errorf("%s: got %v, want an error matching %v", tt.name, tt.err, tt.want)
		}
	}
	s, err := jsfence.New(noIO{t})
	if err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	var nilCtx context.Context
	var zero jsfence.Store
	var nilStore *jsfence.Store
	add := func(fence.Record) ([]byte, error) { return nil, nil }
	for _, tt := range []struct {
		name string
		err  error
		want error
	}{
		{"Put empty key", s.Put(t.Context(), "", 1, nil), fence.ErrInvalidKey},
		{"Put key with a space", s.Put(t.Context(), "a b", 1, nil), fence.ErrInvalidKey},
		{"Put key with a leading dot", s.Put(t.Context(), ".a", 1, nil), fence.ErrInvalidKey},
		{"Put key with a double dot", s.Put(t.Context(), "a..b", 1, nil), fence.ErrInvalidKey},
		{"Put key with a wildcard", s.Put(t.Context(), "a.*", 1, nil), fence.ErrInvalidKey},
		{"Put token 0", s.Put(t.Context(), "k", 0, nil), fence.ErrInvalidToken},
		{"Put token -1", s.Put(t.Context(), "k", -1, nil), fence.ErrInvalidToken},
		{"Put nil ctx", s.Put(nilCtx, "k", 1, nil), jsfence.ErrInvalidArgument},
		{"Put cancelled", s.Put(cancelled, "k", 1, nil), context.Canceled},
		{"Put zero Store", zero.Put(t.Context(), "k", 1, nil), jsfence.ErrInvalidArgument},
		{"Put nil Store", nilStore.Put(t.Context(), "k", 1, nil), jsfence.ErrInvalidArgument},
		{"Delete token 0", s.Delete(t.Context(), "k", 0), fence.ErrInvalidToken},
		{"Delete empty key", s.Delete(t.Context(), "", 1), fence.ErrInvalidKey},
		{"Get empty key", second(s.Get(t.Context(), "")), fence.ErrInvalidKey},
		{"Get nil ctx", second(s.Get(nilCtx, "k")), jsfence.ErrInvalidArgument},
		{"Get cancelled", second(s.Get(cancelled, "k")), context.Canceled},
		{"GetForUpdate token 0", second(s.GetForUpdate(t.Context(), "k", 0)), fence.ErrInvalidToken},
		{"GetForUpdate empty key", second(s.GetForUpdate(t.Context(), "", 1)), fence.ErrInvalidKey},
		{"GetForUpdate cancelled", second(s.GetForUpdate(cancelled, "k", 1)), context.Canceled},
		{"Update nil fn", s.Update(t.Context(), "k", 1, nil), fence.ErrInvalidArgument},
		{"Update token 0", s.Update(t.Context(), "k", 0, add), fence.ErrInvalidToken},
		{"Update empty key", s.Update(t.Context(), "", 1, add), fence.ErrInvalidKey},
		{"Update nil ctx", s.Update(nilCtx, "k", 1, add), jsfence.ErrInvalidArgument},
		{"Update cancelled", s.Update(cancelled, "k", 1, add), context.Canceled},
		{"CheckRevisions cancelled", s.CheckRevisions(cancelled), context.Canceled},
		{"CheckRevisions nil Store", nilStore.CheckRevisions(t.Context()), jsfence.ErrInvalidArgument},
	} {
		if !errors.Is(tt.err, tt.want) {
			t.Errorf("%s: got %v, want an error matching %v", tt.name, tt.err, tt.want)
		}
	}
}

// An entry this package did not write is refused, and left as it is.
func TestForeignEntry(t *testing.T) {
	kv, _ := bucket(t)
	s := mustNew(t, kv)
	if _, err := kv.Put(t.Context(), "k", []byte("not ours")); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"Get": second(s.Get(t.Context(), "k")),
		"Put": s.Put(t.Context(), "k", 9, []byte("v")),
	} {
		if !errors.Is(err, jsfence.ErrCorrupt) {
			t.Errorf("%s: got %v, want an error matching ErrCorrupt", name, err)
		}
	}
	if e, err := kv.Get(t.Context(), "k"); err != nil || string(e.Value()) != "not ours" {
		t.Fatalf("the entry after: got %v, want \"not ours\"", err)
	}
}

// A bucket deleted under a Store: a write says so (ErrNoBucket), as a
// definite refusal, not an unknown outcome.
func TestNoBucket(t *testing.T) {
	t.Parallel() // waits out request timeouts
	kv, name := bucket(t)
	s := mustNew(t, kv)
	mustPut(t, s, "k", 1, "a")
	js := natstest.New(t).JetStream(t)
	if err := js.DeleteKeyValue(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	err := s.Put(t.Context(), "k", 2, []byte("b")) // on the cached revision: a write first
	if !errors.Is(err, jsfence.ErrNoBucket) || errors.Is(err, fence.ErrUnknownOutcome) {
		t.Fatalf("Put after the bucket's deletion: got %v, want an error matching ErrNoBucket alone", err)
	}
}
