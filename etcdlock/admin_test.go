package etcdlock_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
)

func TestBreak(t *testing.T) {
	cli := etcdClient(t)
	a := newLocker(t, cli, etcdlock.WithOwner("stuck"))
	op := newLocker(t, cli)
	l := mustLock(t, a, "stuck-job")
	if _, err := op.Break(t.Context(), "stuck-job", l.Token()+1); !errors.Is(err, etcdlock.ErrNotHolder) {
		t.Fatalf("Break with a wrong token: got %v, want ErrNotHolder", err)
	}
	if _, err := op.Break(t.Context(), "stuck-job", 0); err == nil {
		t.Fatal("Break with token 0: got nil error")
	}
	if l.Err() != nil {
		t.Fatalf("after refused Breaks: lock Err %v, want nil (held)", l.Err())
	}
	e, err := op.Break(t.Context(), "stuck-job", l.Token())
	if err != nil || e.Token != l.Token() || e.Owner != "stuck" {
		t.Fatalf("Break: got %#v, %v; want the holder's entry", e, err)
	}
	waitClosed(t, l.Done(), 2*time.Second, "broken lock's Done")
	if !errors.Is(l.Err(), etcdlock.ErrKeyDeleted) {
		t.Fatalf("broken lock's Err: got %v, want ErrKeyDeleted", l.Err())
	}
	if _, err := op.Break(t.Context(), "stuck-job", l.Token()); !errors.Is(err, etcdlock.ErrNotHolder) {
		t.Fatalf("second Break: got %v, want ErrNotHolder", err)
	}
	next := mustLock(t, op, "stuck-job")
	defer next.Unlock(t.Context())
	if next.Token() <= l.Token() {
		t.Fatalf("next token %d, want > %d", next.Token(), l.Token())
	}
}

func TestListLocksAndElections(t *testing.T) {
	c := newLocker(t, etcdClient(t))
	for _, n := range []string{"b", "a"} {
		l := mustLock(t, c, n)
		defer l.Unlock(t.Context())
	}
	term := mustCampaign(t, c, "leader", "")
	defer term.Resign(t.Context())
	locks, err := c.ListLocks(t.Context())
	if err != nil || !slices.Equal(locks, []string{"a", "b"}) {
		t.Fatalf("ListLocks: got %v, %v; want [a b]", locks, err)
	}
	elections, err := c.ListElections(t.Context())
	if err != nil || !slices.Equal(elections, []string{"leader"}) {
		t.Fatalf("ListElections: got %v, %v; want [leader]", elections, err)
	}
}
