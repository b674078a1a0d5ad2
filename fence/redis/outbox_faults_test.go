package redisfence_test

import (
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	redisfence "github.com/fencelock/fencelock/fence/redis"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// lossyOutbox returns a Store and its Outbox on one connection through f,
// with go-redis's default retries, its scripts loaded on the server.
func lossyOutbox(t *testing.T, f *rfaults) (*redisfence.Store, *redisfence.Outbox) {
	t.Helper()
	tag := "{" + prefix(t) + "}:"
	s := mustNew(t, client(t, func(o *redis.Options) { o.Dialer = f.dial; o.PoolSize = 1 }), tag+"rec:")
	o, err := redisfence.NewOutbox(s, tag+"outbox:")
	if err != nil {
		t.Fatal(err)
	}
	w := effect("warm-up", 1, 0) // loads the scripts: EVALSHA from now on
	if err := record(o)(t.Context(), fence.Claim{Resource: "warm-up", Token: 1}, []outbox.Effect{w}); err != nil {
		t.Fatal(err)
	}
	if err := o.Settle(t.Context(), fence.Claim{Resource: "d", Token: 5}, []outbox.Settled{{Effect: w}}); err != nil {
		t.Fatal(err)
	}
	return s, o
}

// appendAndRecord is an Update of "acct" with token 3 that appends "+"
// and records e.
func appendAndRecord(t *testing.T, o *redisfence.Outbox, e outbox.Effect) error {
	return o.Update(t.Context(), "acct", 3, func(old fence.Record) ([]byte, []outbox.Effect, error) {
		return append(old.Value, '+'), []outbox.Effect{e}, nil
	})
}

// The recording script and the Settle script, their replies lost: each
// was sent once and its caller gets ErrUnknownOutcome; the write landed
// once, and the caller's retry is refused with ErrDuplicate (a recording)
// or harmless (a Settle). The control, with go-redis allowed to resend,
// shows that the harness would see a second copy.
func TestOutboxReplyLost(t *testing.T) {
	t.Run("record", func(t *testing.T) {
		f := &rfaults{}
		s, o := lossyOutbox(t, f)
		mustPut(t, s, "acct", 3, "v")
		e := effect("acct", 3, 0)
		f.loseReply(2, nil) // the claim, then the recording script
		before := f.sent()
		fencewant.Unknown(t, appendAndRecord(t, o, e), 3, fence.ErrConflict, outbox.ErrDuplicate)
		if n := f.sent() - before; n != 2 {
			t.Fatalf("scripts sent: got %d, want 2 (the recording one once)", n)
		}
		fencewant.Record(t, s, "acct", 3, "v+")
		wantPending(t, o, e)
		if err := appendAndRecord(t, o, e); !errors.Is(err, outbox.ErrDuplicate) {
			t.Fatalf("the writer's retry: got %v, want an error matching outbox.ErrDuplicate", err)
		}
		fencewant.Record(t, s, "acct", 3, "v+")
		wantPending(t, o, e)
	})
	t.Run("settle", func(t *testing.T) {
		f := &rfaults{}
		_, o := lossyOutbox(t, f)
		delivered, parked := effect("acct", 3, 0), effect("acct", 3, 1)
		if err := record(o)(t.Context(), fence.Claim{Resource: "acct", Token: 3}, []outbox.Effect{delivered, parked}); err != nil {
			t.Fatal(err)
		}
		by := fence.Claim{Resource: "d", Token: 5}
		done := []outbox.Settled{{Effect: delivered, Attempts: 1}, {Effect: parked, Parked: "400", Attempts: 2}}
		f.loseReply(1, nil)
		before := f.sent()
		fencewant.Unknown(t, o.Settle(t.Context(), by, done), 5)
		if n := f.sent() - before; n != 1 {
			t.Fatalf("scripts sent: got %d, want 1", n)
		}
		for range 2 { // as settled, then after the dispatcher's retry
			wantPending(t, o)
			if p, err := o.Parked(t.Context(), outbox.All, 10); err != nil || len(p) != 1 || p[0].Effect.Key() != parked.Key() || p[0].Reason != "400" || p[0].Attempts != 2 {
				t.Fatalf("Parked: got %+v, %v, want %s parked for 400 after 2 attempts", p, err, parked.Key())
			}
			if err := o.Settle(t.Context(), by, done); err != nil {
				t.Fatalf("the dispatcher's retry: got %v, want nil", err)
			}
		}
	})
	t.Run("control: resent", func(t *testing.T) {
		defer redisfence.ResendForTest()()
		f := &rfaults{}
		s, o := lossyOutbox(t, f)
		mustPut(t, s, "acct", 3, "v")
		f.loseReply(2, nil)
		before := f.sent()
		err := appendAndRecord(t, o, effect("acct", 3, 0))
		if n := f.sent() - before; n <= 2 {
			t.Fatalf("control: scripts sent: got %d (%v), want the recording one resent", n, err)
		}
	})
}
