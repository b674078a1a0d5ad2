package redisfence_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	redisfence "github.com/fencelock/fencelock/fence/redis"
)

// held is a lock held for the test's length.
type held struct{ token fence.Token }

func (h held) Token() fence.Token    { return h.token }
func (h held) Done() <-chan struct{} { return nil }

// aclOutbox returns an Outbox under a fresh hash tag, used through a
// client of a fresh ACL user with rules (after aclClient's "~*", "&*").
func aclOutbox(t *testing.T, rules ...any) *redisfence.Outbox {
	t.Helper()
	tag := "{" + prefix(t) + "}:"
	o, err := redisfence.NewOutbox(mustNew(t, aclClient(t, rules...), tag+"rec:"), tag+"outbox:")
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// runFor runs a dispatcher on o for at most d and returns Run's error.
func runFor(t *testing.T, o outbox.Log, d time.Duration) error {
	t.Helper()
	disp, err := outbox.NewDispatcher(o, outbox.SenderFunc(func(context.Context, outbox.Effect) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	return disp.Run(ctx, held{token: 1}, outbox.All)
}

// TestOutboxNotPermitted: a user whose ACL lacks the scripts, the keys,
// write access to them, or a command the Settle script runs fails Check
// with an error matching outbox.ErrNotPermitted, and a dispatcher run as
// it ends at start with it instead of retrying. The control, a user with
// every command and key, passes Check and its dispatcher runs until its
// context ends.
func TestOutboxNotPermitted(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rules []any
	}{
		{"no scripts", []any{"+@all", "-evalsha", "-eval"}},
		{"no keys", []any{"+@all", "resetkeys", "~elsewhere:*"}},
		{"read-only keys", []any{"+@all", "resetkeys", "%R~*"}},
		{"no ZREM", []any{"+@all", "-zrem"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := aclOutbox(t, tc.rules...)
			err := o.Check(t.Context(), outbox.All)
			t.Logf("Check: %v", err)
			if !errors.Is(err, outbox.ErrNotPermitted) {
				t.Fatalf("Check: got %v, want an error matching outbox.ErrNotPermitted", err)
			}
			start := time.Now()
			if err := runFor(t, o, 30*time.Second); !errors.Is(err, outbox.ErrNotPermitted) {
				t.Fatalf("Run: got %v, want an error matching outbox.ErrNotPermitted", err)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Fatalf("Run took %v to give up, want at once", took)
			}
		})
	}
	t.Run("control", func(t *testing.T) {
		o := aclOutbox(t, "+@all")
		if err := o.Check(t.Context(), outbox.All); err != nil {
			t.Fatalf("Check: got %v, want nil", err)
		}
		if err := runFor(t, o, 500*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Run: got %v, want the context's end", err)
		}
	})
}

// TestOutboxCallsNotPermitted: without the scripts, Settle and Requeue
// fail with an error matching outbox.ErrNotPermitted and Redis's words;
// without the keys, Pending and Parked do; without HSET, which the Settle
// script runs, Settle does.
func TestOutboxCallsNotPermitted(t *testing.T) {
	ctx := t.Context()
	noScripts := aclOutbox(t, "+@all", "-evalsha", "-eval")
	noKeys := aclOutbox(t, "+@all", "resetkeys", "~elsewhere:*")
	noHSET := aclOutbox(t, "+@all", "-hset")
	_, pendErr := noKeys.Pending(ctx, outbox.All, nil, 1)
	_, parkErr := noKeys.Parked(ctx, outbox.All, 1)
	for what, err := range map[string]error{
		"Settle":              noScripts.Settle(ctx, fence.Claim{Resource: "d", Token: 1}, nil),
		"Requeue":             noScripts.Requeue(ctx, outbox.Effect{Resource: "acct", Token: 1, Destination: "dst"}),
		"Settle without HSET": noHSET.Settle(ctx, fence.Claim{Resource: "d", Token: 1}, nil),
		"Pending":             pendErr,
		"Parked":              parkErr,
	} {
		if !errors.Is(err, outbox.ErrNotPermitted) {
			t.Errorf("%s: got %v, want an error matching outbox.ErrNotPermitted", what, err)
		} else {
			t.Logf("%s: %v", what, err)
		}
	}
}
