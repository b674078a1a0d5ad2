package etcdlocktest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/etcdlock/etcdlocktest"
)

// slack is what the bounds allow for a loaded machine shared with other
// tests (a -race run at load 13 on two cores closed Done 690 ms late). The
// TTLs of the ExpireLease and DeleteKey tests are far longer, so that the
// validity deadline cannot pass for the fault.
const slack = time.Second

// A partitioned holder's Done closes at its validity deadline, not before;
// then another client gets the lock. A client that is not partitioned keeps
// its lock (the control: the fault targets one client).
func TestPartition(t *testing.T) {
	srv := etcdlocktest.New(t)
	cli, locks := locker(t, srv, time.Second)
	_, bystander := locker(t, srv, time.Second)
	l := mustLock(t, locks, "job")
	kept := mustLock(t, bystander, "other-job")

	srv.Partition(cli)
	until := l.ValidUntil()
	took := waitDone(t, l, time.Second+slack)
	if late := time.Since(until); late < 0 || late > slack {
		t.Fatalf("Done closed %v after the validity deadline, want within [0, %v]", late, slack)
	}
	if err := l.Err(); !errors.Is(err, etcdlock.ErrValidityExpired) {
		t.Fatalf("Err: got %v, want ErrValidityExpired", err)
	}
	t.Logf("Done closed %v after Partition, %v after the validity deadline", took, time.Since(until))

	_, next := locker(t, srv, time.Second)
	if n := mustLock(t, next, "job"); n.Token() <= l.Token() {
		t.Fatalf("next holder's token: got %d, want > %d", n.Token(), l.Token())
	}
	assertHeld(t, kept)

	srv.Heal(cli)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := locks.TryLock(ctx, "job"); !errors.Is(err, etcdlock.ErrLocked) {
		t.Fatalf("TryLock after Heal: got %v, want ErrLocked (the client works again)", err)
	}
}

// A revoked lease ends the holder's lock within ~150 ms, long before its
// validity deadline, and frees the lock for others at once.
func TestExpireLease(t *testing.T) {
	srv := etcdlocktest.New(t)
	_, locks := locker(t, srv, 10*time.Second)
	l := mustLock(t, locks, "job")
	time.Sleep(100 * time.Millisecond) // as when the lease ends mid-work

	if err := srv.ExpireLease(t.Context(), l.Lease()); err != nil {
		t.Fatal(err)
	}
	took := waitDone(t, l, 150*time.Millisecond+slack)
	if err := l.Err(); !errors.Is(err, etcdlock.ErrLeaseExpired) {
		t.Fatalf("Err: got %v, want ErrLeaseExpired", err)
	}
	t.Logf("Done closed %v after ExpireLease", took)

	_, other := locker(t, srv, time.Second)
	if _, err := other.TryLock(t.Context(), "job"); err != nil {
		t.Fatalf("TryLock by another client: got %v, want nil", err)
	}
	if err := srv.ExpireLease(t.Context(), l.Lease()); err == nil {
		t.Fatal("ExpireLease of a revoked lease: got nil, want an error")
	}
}

// A deleted key ends that lock within ~150 ms; the lease, and the other
// lock on it, live on.
func TestDeleteKey(t *testing.T) {
	srv := etcdlocktest.New(t)
	_, locks := locker(t, srv, 10*time.Second)
	l := mustLock(t, locks, "job")
	kept := mustLock(t, locks, "other-job")

	if err := srv.DeleteKey(t.Context(), l); err != nil {
		t.Fatal(err)
	}
	took := waitDone(t, l, 150*time.Millisecond+slack)
	if err := l.Err(); !errors.Is(err, etcdlock.ErrKeyDeleted) {
		t.Fatalf("Err: got %v, want ErrKeyDeleted", err)
	}
	t.Logf("Done closed %v after DeleteKey", took)
	assertHeld(t, kept)

	if err := srv.DeleteKey(t.Context(), l); err == nil {
		t.Fatal("DeleteKey of a deleted key: got nil, want an error")
	}
	_, other := locker(t, srv, time.Second)
	if _, err := other.TryLock(t.Context(), "job"); err != nil {
		t.Fatalf("TryLock by another client: got %v, want nil", err)
	}
}
