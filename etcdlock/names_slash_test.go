package etcdlock_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/fencelock/fencelock/etcdlock"
)

// Names may hold '/' (tenant/42/report) and '%': each is its own lock, a
// name is never inside another's queue (without the escape, "t/42"'s keys
// would lie in "t"'s and Lock of "t" would wait for it), and the name
// reads back as given from ListLocks, Inspect and a LockedError.
func TestNamesWithSlash(t *testing.T) {
	t.Parallel()
	cli := etcdClient(t)
	a, b := newLocker(t, cli), newLocker(t, cli)
	names := []string{"t", "t/42", "t/42/report", "t%2F42", "%", "/", "t/"}
	var held []*etcdlock.Lock
	for _, n := range names {
		l, err := a.TryLock(t.Context(), n)
		if err != nil {
			t.Fatalf("TryLock(%q) with the others held: %v", n, err)
		}
		held = append(held, l)
	}
	for i, n := range names {
		_, err := b.TryLock(t.Context(), n)
		var le *etcdlock.LockedError
		if !errors.As(err, &le) || le.Name != n || le.Holder.Token != held[i].Token() {
			t.Errorf("TryLock(%q) while held: %v, want a LockedError naming it and its holder (token %d)", n, err, held[i].Token())
		}
		q, err := b.Inspect(t.Context(), n)
		if err != nil || q.Name != n || len(q.Holders) != 1 || q.Holders[0].Token != held[i].Token() || len(q.Waiters) != 0 {
			t.Errorf("Inspect(%q): %+v, %v; want its one holder", n, q, err)
		}
	}
	got, err := b.ListLocks(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Sorted(slices.Values(names))
	if !slices.Equal(got, want) {
		t.Errorf("ListLocks: %q, want %q", got, want)
	}
	for _, k := range keys(t, cli, keysOf(t).Locks()) {
		if seg := strings.TrimPrefix(k, keysOf(t).Locks()); strings.Count(seg, "/") != 1 {
			t.Errorf("key %q: the name's segment holds a '/'", k)
		}
	}
	for _, l := range held {
		if err := l.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	// A semaphore and an election of such a name too.
	sm := semaphore(t, a, "pool/eu", 2)
	p, err := sm.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if sq, err := b.InspectSemaphore(t.Context(), "pool/eu"); err != nil || sq.Holder == nil || sq.Holder.Token != p.Token() {
		t.Errorf("InspectSemaphore(pool/eu): %+v, %v", sq, err)
	}
	if ns, err := b.ListSemaphores(t.Context()); err != nil || !slices.Equal(ns, []string{"pool/eu"}) {
		t.Errorf("ListSemaphores: %q, %v", ns, err)
	}
	p.Unlock(t.Context())
	term, err := a.Campaign(t.Context(), "leader/eu", "v")
	if err != nil {
		t.Fatal(err)
	}
	if e, err := b.Leader(t.Context(), "leader/eu"); err != nil || e.Token != term.Token() {
		t.Errorf("Leader(leader/eu): %+v, %v", e, err)
	}
	if ns, err := b.ListElections(t.Context()); err != nil || !slices.Equal(ns, []string{"leader/eu"}) {
		t.Errorf("ListElections: %q, %v", ns, err)
	}
	term.Resign(t.Context())
}
