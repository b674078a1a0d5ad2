package jsfence_test

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fencelock/fencelock/fence"
	jsfence "github.com/fencelock/fencelock/fence/jetstream"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/natstest"
)

// authConf has a user with every permission, and users denied part of
// what a Store needs: publishing to the bucket's keys (its writes), and
// the direct gets (its reads).
const authConf = `accounts { A { jetstream: enabled, users: [
  {user: admin, password: pw}
  {user: nowrite, password: pw, permissions: { publish: { deny: ["$KV.>"] } } }
  {user: noread, password: pw, permissions: { publish: { deny: ["$JS.API.DIRECT.GET.>"] } } }
] } }`

// A Store whose user may not write, or may not read, fails, changes
// nothing, and never reports success or a stale token. How clearly it
// fails is below: not clearly.
func TestPermissionDenied(t *testing.T) {
	t.Parallel() // waits out request timeouts
	srv := natstest.NewConfigured(t, authConf, nats.UserInfo("admin", "pw"))
	open := func(user string) jetstream.KeyValue {
		nc, err := nats.Connect(srv.URL(), nats.UserInfo(user, "pw"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		kv, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "b"})
		if err != nil {
			t.Fatal(err)
		}
		return kv
	}
	admin := mustNew(t, open("admin"))
	mustPut(t, admin, "k", 1, "a")
	errs := map[string]error{}
	for _, user := range []string{"nowrite", "noread"} {
		s, err := jsfence.New(open(user), jsfence.WithRequestTimeout(300*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		errs[user] = s.Put(t.Context(), "k", 2, []byte("b"))
		if err := errs[user]; err == nil || errors.Is(err, fence.ErrStale) {
			t.Errorf("Put as %s: got %v, want an error, not ErrStale", user, err)
		}
		fencewant.Record(t, admin, "k", 1, "a")
	}
	// How clearly: a request the server denies is not answered (nats-server
	// sends the client an -ERR, which nats.go hands to the connection's
	// error handler), so each Put waits out its request timeout, and the
	// Store, given a KeyValue and not the connection, cannot tell the
	// denial from a server that does not answer: the write's outcome is
	// unknown, the read's a deadline (docs/jetstream.md says so). This
	// pins it, so that a nats.go that reports the denial shows here.
	if err := errs["nowrite"]; !errors.Is(err, fence.ErrUnknownOutcome) && !errors.Is(err, nats.ErrPermissionViolation) {
		t.Errorf("Put as nowrite: got %v, want an unknown outcome (or, better, the permission violation)", err)
	}
}
