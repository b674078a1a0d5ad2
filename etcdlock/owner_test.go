package etcdlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

func TestInspectTwoOwners(t *testing.T) {
	cli := etcdClient(t)
	a := newLocker(t, cli, etcdlock.WithOwner("report-job/host-7"))
	b := newLocker(t, cli, etcdlock.WithOwner("report-job/host-9"))
	before := time.Now().Add(-time.Second)
	l, err := a.Lock(t.Context(), "report", etcdlock.WithMetadata("run 42"))
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error, 1)
	go func() {
		l, err := b.Lock(context.Background(), "report", etcdlock.WithMetadata("run 43"))
		if err == nil {
			err = l.Unlock(context.Background())
		}
		waiting <- err
	}()
	var q etcdlock.Queue
	poll.Until(t, "b queued", func() bool {
		q, err = a.Inspect(t.Context(), "report")
		return err == nil && len(q.Waiters) == 1
	})
	h := q.Holder
	if h == nil || h.Owner != "report-job/host-7" || h.Data != "run 42" || h.Token != l.Token() ||
		h.Lease != l.Lease() || h.Key != l.Key() || h.TTL < 0 || h.Acquired.Before(before) || h.Acquired.After(time.Now().Add(time.Second)) {
		t.Fatalf("holder: got %#v, want a's lock (token %d), owner report-job/host-7, data run 42, acquired now", h, l.Token())
	}
	if w := q.Waiters[0]; w.Owner != "report-job/host-9" || w.Data != "run 43" || w.Token <= h.Token {
		t.Fatalf("waiter: got %#v, want b's", w)
	}
	if s := h.String(); !strings.HasPrefix(s, "report-job/host-7 (token ") {
		t.Fatalf("String: got %q", s)
	}
	l.Unlock(t.Context())
	if err := <-waiting; err != nil {
		t.Fatal(err)
	}
	if q, err := a.Inspect(t.Context(), "report"); err != nil || q.Holder != nil || len(q.Waiters) != 0 {
		t.Fatalf("Inspect of a free lock: got %#v, %v; want no holder", q, err)
	}
}

func TestTryLockErrorNamesHolder(t *testing.T) {
	cli := etcdClient(t)
	a := newLocker(t, cli, etcdlock.WithOwner("host-7/4121"))
	b := newLocker(t, cli)
	l, err := a.Lock(t.Context(), "report-job", etcdlock.WithMetadata("nightly"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(t.Context())
	_, err = b.TryLock(t.Context(), "report-job")
	var locked *etcdlock.LockedError
	if !errors.Is(err, etcdlock.ErrLocked) || !errors.As(err, &locked) {
		t.Fatalf("TryLock: got %v, want a *LockedError matching ErrLocked", err)
	}
	if locked.Name != "report-job" || locked.Holder.Owner != "host-7/4121" || locked.Holder.Token != l.Token() || locked.Holder.Data != "nightly" {
		t.Fatalf("LockedError: got %#v, want holder host-7/4121 with token %d", locked, l.Token())
	}
	if !strings.Contains(err.Error(), `"report-job" locked by host-7/4121 (token `) {
		t.Fatalf("error text: got %q", err)
	}
}

// A key in the queue that this package did not write reads as an unknown
// owner and takes its turn like any other.
func TestForeignKeyInQueue(t *testing.T) {
	cli := etcdClient(t)
	c := newLocker(t, cli)
	foreign := keysOf(t).Lock("mixed") + "by-hand"
	if _, err := cli.Put(t.Context(), foreign, "not a record"); err != nil {
		t.Fatal(err)
	}
	q, err := c.Inspect(t.Context(), "mixed")
	if err != nil {
		t.Fatal(err)
	}
	if q.Holder == nil || q.Holder.Owner != "" || q.Holder.OwnerOrUnknown() != "unknown owner" || q.Holder.TTL != -1 {
		t.Fatalf("foreign holder: got %#v, want an unknown owner without a lease", q.Holder)
	}
	_, err = c.TryLock(t.Context(), "mixed")
	var locked *etcdlock.LockedError
	if !errors.As(err, &locked) || !strings.Contains(err.Error(), "unknown owner") {
		t.Fatalf("TryLock behind a foreign key: got %v, want a LockedError naming an unknown owner", err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := c.Lock(context.Background(), "mixed")
		if err == nil {
			err = l.Unlock(context.Background())
		}
		got <- err
	}()
	poll.Until(t, "Lock queued behind the foreign key", func() bool {
		q, err := c.Inspect(t.Context(), "mixed")
		return err == nil && len(q.Waiters) == 1
	})
	if _, err := cli.Delete(t.Context(), foreign); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("Lock after the foreign key went: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Lock not granted 10s after the foreign key went")
	}
}

func TestOversizedMetadataSendsNothing(t *testing.T) {
	fcli, in := faulty(t, 4)
	c := newLocker(t, fcli)
	big := strings.Repeat("m", etcdlock.MaxDataLen+1)
	sent := in.Sent("")
	if _, err := c.Lock(t.Context(), "big", etcdlock.WithMetadata(big)); !errors.Is(err, etcdlock.ErrInvalidData) {
		t.Fatalf("Lock with oversized metadata: got %v, want ErrInvalidData", err)
	}
	if _, err := c.TryLock(t.Context(), "big", etcdlock.WithMetadata(big)); !errors.Is(err, etcdlock.ErrInvalidData) {
		t.Fatalf("TryLock with oversized metadata: got %v, want ErrInvalidData", err)
	}
	if _, err := c.Lock(t.Context(), "big", nil); !errors.Is(err, etcdlock.ErrInvalidOption) {
		t.Fatalf("Lock with a nil option: got %v, want ErrInvalidOption", err)
	}
	if n := in.Sent(""); n != sent {
		t.Fatalf("requests sent: got %d, want none", n-sent)
	}
	l, err := c.Lock(t.Context(), "big", etcdlock.WithMetadata(big[1:]))
	if err != nil {
		t.Fatalf("Lock with MaxDataLen bytes of metadata: %v", err)
	}
	l.Unlock(t.Context())
}

func TestWithOwnerRejects(t *testing.T) {
	cli := etcdClient(t)
	for _, owner := range []string{"", strings.Repeat("o", etcdlock.MaxOwnerLen+1), "\xff"} {
		if _, err := etcdlock.New(cli, etcdlock.WithOwner(owner)); !errors.Is(err, etcdlock.ErrInvalidOption) {
			t.Errorf("New(WithOwner(%q)): got %v, want ErrInvalidOption", owner, err)
		}
	}
}
