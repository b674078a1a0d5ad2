package etcdfence_test

import (
	"errors"
	"testing"

	"github.com/fencelock/fencelock/fence"
	etcdfence "github.com/fencelock/fencelock/fence/etcd"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
)

// Tests of the Outbox's recording and settling transactions when they
// lose their reply, arrive twice, or arrive late, with reqfault between
// the client and etcd.

// faultyOutbox returns a Store and its Outbox whose requests go through in.
func faultyOutbox(t *testing.T) (*etcdfence.Store, *etcdfence.Outbox, *reqfault.Injector) {
	t.Helper()
	fcli, in := faulty(t)
	s := mustNew(t, fcli, prefix(t))
	o, err := etcdfence.NewOutbox(s, s.Prefix()+"outbox/")
	if err != nil {
		t.Fatal(err)
	}
	return s, o, in
}

// countAndRecord is an Update of the counter "acct" with token 3 that
// records e.
func countAndRecord(t *testing.T, o *etcdfence.Outbox, e outbox.Effect) error {
	return o.Update(t.Context(), "acct", 3, func(old fence.Record) ([]byte, []outbox.Effect, error) {
		v, err := increment(old)
		return v, []outbox.Effect{e}, err
	})
}

// A recording write that loses its reply or is delivered twice lands once:
// the counter counts it once and its effect is pending once; the writer's
// retry of the same write is refused with ErrDuplicate and changes
// nothing. The control: a write with a new effect still lands.
func TestOutboxRecordFaults(t *testing.T) {
	for _, fault := range []reqfault.Kind{reqfault.LostReply, reqfault.Twice} {
		t.Run(fault.String(), func(t *testing.T) {
			s, o, in := faultyOutbox(t)
			mustPut(t, s, "acct", 3, "1")
			e := effect("acct", 3, 0)
			in.Next(putsKey(s.DataKey("acct")), fault)
			if err := countAndRecord(t, o, e); err != nil {
				fencewant.Unknown(t, err, 3, fence.ErrConflict, outbox.ErrDuplicate)
			}
			in.Close() // waits for a copy's delivery
			if n := in.Counts()[fault]; n != 1 {
				t.Fatalf("faults injected: got %d, want 1", n)
			}
			wantRecord(t, s, "acct", 3, "2")
			wantPending(t, o, e)
			if err := countAndRecord(t, o, e); !errors.Is(err, outbox.ErrDuplicate) {
				t.Fatalf("the writer's retry: got %v, want an error matching outbox.ErrDuplicate", err)
			}
			wantRecord(t, s, "acct", 3, "2")
			wantPending(t, o, e)
			next := effect("acct", 3, 1)
			if err := countAndRecord(t, o, next); err != nil {
				t.Fatalf("control, a new effect: got %v, want nil", err)
			}
			wantRecord(t, s, "acct", 3, "3")
			wantPending(t, o, e, next)
		})
	}
}

// A Settle that loses its reply or is delivered twice marks its effects
// once, and the dispatcher's retry is harmless.
func TestOutboxSettleFaults(t *testing.T) {
	for _, fault := range []reqfault.Kind{reqfault.LostReply, reqfault.Twice} {
		t.Run(fault.String(), func(t *testing.T) {
			_, o, in := faultyOutbox(t)
			delivered, parked := effect("acct", 3, 0), effect("acct", 3, 1)
			if err := record(o)(t.Context(), fence.Claim{Resource: "acct", Token: 3}, []outbox.Effect{delivered, parked}); err != nil {
				t.Fatal(err)
			}
			by := fence.Claim{Resource: "d", Token: 5}
			done := []outbox.Settled{{Effect: delivered, Attempts: 1}, {Effect: parked, Parked: "400", Attempts: 2}}
			in.Next(putsKey(o.FloorKey("d")), fault)
			if err := o.Settle(t.Context(), by, done); err != nil {
				fencewant.Unknown(t, err, 5)
			}
			in.Close()
			if n := in.Counts()[fault]; n != 1 {
				t.Fatalf("faults injected: got %d, want 1", n)
			}
			for range 2 { // as settled, then after the dispatcher's retry
				wantPending(t, o)
				wantParked(t, o, outbox.Parked{Effect: parked, Reason: "400", Attempts: 2})
				if err := o.Settle(t.Context(), by, done); err != nil {
					t.Fatalf("the dispatcher's retry: got %v, want nil", err)
				}
			}
		})
	}
}

// A copy of a Settle that parks an effect, delivered after an operator
// requeued the effect and a newer dispatcher took over, is refused by
// the newer dispatcher's floor: the effect stays pending. The control
// delivers the same copy without the takeover: it parks the effect again.
func TestOutboxLateSettle(t *testing.T) {
	for _, takeover := range []bool{true, false} {
		name := map[bool]string{true: "after a takeover", false: "control: no takeover"}[takeover]
		t.Run(name, func(t *testing.T) {
			_, o, in := faultyOutbox(t)
			direct := etcdClient(t)
			e := effect("acct", 3, 0)
			if err := record(o)(t.Context(), fence.Claim{Resource: "acct", Token: 3}, []outbox.Effect{e}); err != nil {
				t.Fatal(err)
			}
			sent := capture(in, o.FloorKey("d"))
			if err := o.Settle(t.Context(), fence.Claim{Resource: "d", Token: 5}, []outbox.Settled{{Effect: e, Parked: "410", Attempts: 1}}); err != nil {
				t.Fatal(err)
			}
			if err := o.Requeue(t.Context(), e); err != nil {
				t.Fatal(err)
			}
			if takeover {
				if err := o.Settle(t.Context(), fence.Claim{Resource: "d", Token: 6}, nil); err != nil {
					t.Fatal(err)
				}
			}
			resend(t, direct, <-sent)
			if takeover {
				wantPending(t, o, e)
				wantParked(t, o)
			} else {
				wantPending(t, o)
				wantParked(t, o, outbox.Parked{Effect: e, Reason: "410", Attempts: 1})
			}
		})
	}
}

func wantParked(t *testing.T, o *etcdfence.Outbox, want ...outbox.Parked) {
	t.Helper()
	got, err := o.Parked(t.Context(), outbox.All, 100)
	if err != nil {
		t.Fatalf("Parked: got %v, want nil", err)
	}
	if len(got) != len(want) {
		t.Fatalf("Parked: got %d effects, want %d", len(got), len(want))
	}
	for i, p := range got {
		if w := want[i]; p.Effect.Key() != w.Effect.Key() || p.Reason != w.Reason || p.Attempts != w.Attempts {
			t.Fatalf("Parked[%d]: got %s (%q, %d attempts), want %s (%q, %d attempts)", i, p.Effect.Key(), p.Reason, p.Attempts, w.Effect.Key(), w.Reason, w.Attempts)
		}
	}
}
