package jsfence_test

import (
	"context"
	"os/exec"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	jsfence "github.com/fencelock/fencelock/fence/jetstream"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
	"github.com/fencelock/fencelock/internal/testkit/trypage"
)

// docs/jetstream.md's "Try it on your machine" works as the page says:
// its shell line starts nats-server with JetStream (on a free port, its
// store in a scratch directory), and the page's client, newBucket, gives
// a Store that writes with token 34 and refuses 33.
func TestPageTryIt(t *testing.T) {
	if _, err := exec.LookPath("nats-server"); err != nil {
		testenv.Unavailable(t, err.Error(), "install nats-server (bash .ci/setup.sh, or apt-get install -y nats-server)")
	}
	var kv jetstream.KeyValue
	trypage.Start(t, trypage.Run{
		Line: trypage.Line(t, "docs/jetstream.md", "nats-server"),
		Port: "4222",
		Dir:  "/tmp/nats",
		Ready: func(ctx context.Context, port int) error {
			b, nc, err := newBucket(ctx, "nats://localhost:"+strconv.Itoa(port), "fences")
			if err != nil {
				return err
			}
			kv = b
			t.Cleanup(nc.Close)
			return nil
		},
	})
	store, err := jsfence.New(kv)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.CheckRevisions(t.Context()); err != nil {
		t.Fatalf("CheckRevisions: got %v, want nil", err)
	}
	if err := store.Put(t.Context(), "k", 34, []byte("B")); err != nil {
		t.Fatalf("Put with token 34: got %v, want nil", err)
	}
	fencewant.Stale(t, store.Put(t.Context(), "k", 33, []byte("A")), 33, 34)
	if rec, err := store.Get(t.Context(), "k"); err != nil || rec.Token != 34 || string(rec.Value) != "B" {
		t.Fatalf("Get: got token %d %q %v, want token 34 \"B\"", rec.Token, rec.Value, err)
	}
}
