package etcdlock_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

func mustCampaign(t testing.TB, c *etcdlock.Client, name, value string) *etcdlock.Term {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	term, err := c.Campaign(ctx, name, value)
	if err != nil {
		t.Fatalf("Campaign(%q): got %v, want nil", name, err)
	}
	return term
}

func mustLeader(t testing.TB, c *etcdlock.Client, name string) etcdlock.Entry {
	t.Helper()
	e, err := c.Leader(t.Context(), name)
	if err != nil {
		t.Fatalf("Leader(%q): got %v, want nil", name, err)
	}
	return e
}

func TestCampaignProclaimResign(t *testing.T) {
	cli := etcdClient(t)
	a := newLocker(t, cli, etcdlock.WithOwner("svc-a"))
	b := newLocker(t, cli, etcdlock.WithOwner("svc-b"))
	if _, err := a.Leader(t.Context(), "sched"); !errors.Is(err, etcdlock.ErrNoLeader) {
		t.Fatalf("Leader before any campaign: got %v, want ErrNoLeader", err)
	}
	ta := mustCampaign(t, a, "sched", "a:1")
	if !ta.Token().Valid() || ta.Value() != "a:1" || ta.Err() != nil {
		t.Fatalf("term: token %d, value %q, err %v; want a token, a:1, nil", ta.Token(), ta.Value(), ta.Err())
	}
	if _, err := fence.NewGuard(ta); err != nil {
		t.Fatalf("NewGuard(term): got %v, want nil", err)
	}

	won := make(chan *etcdlock.Term, 1)
	go func() {
		tb, err := b.Campaign(context.Background(), "sched", "b:1")
		if err != nil {
			t.Errorf("Campaign b: %v", err)
		}
		won <- tb
	}()
	poll.Until(t, "b queued behind a", func() bool {
		q, err := a.InspectElection(t.Context(), "sched")
		return err == nil && len(q.Waiters) == 1
	})

	e := mustLeader(t, b, "sched")
	if e.Token != ta.Token() || e.Data != "a:1" || e.Owner != "svc-a" || e.TTL < 0 {
		t.Fatalf("Leader: got %#v, want a's token %d, value a:1, owner svc-a, a TTL", e, ta.Token())
	}
	if err := ta.Proclaim(t.Context(), "a:2"); err != nil {
		t.Fatalf("Proclaim: got %v, want nil", err)
	}
	if e := mustLeader(t, b, "sched"); e.Data != "a:2" || e.Token != ta.Token() || ta.Value() != "a:2" {
		t.Fatalf("after Proclaim: leader %+v, Value %q; want a:2 with token %d", e, ta.Value(), ta.Token())
	}
	select {
	case <-won:
		t.Fatal("b won while a leads")
	default:
	}

	if err := ta.Resign(t.Context()); err != nil {
		t.Fatalf("Resign: got %v, want nil", err)
	}
	if err := ta.Resign(t.Context()); err != nil {
		t.Fatalf("second Resign: got %v, want nil", err)
	}
	waitClosed(t, ta.Done(), time.Second, "Done after Resign")
	if !errors.Is(ta.Err(), etcdlock.ErrResigned) {
		t.Fatalf("Err after Resign: got %v, want ErrResigned", ta.Err())
	}
	tb := <-won
	if tb.Token() <= ta.Token() {
		t.Fatalf("b's token %d, want > a's %d", tb.Token(), ta.Token())
	}
	if err := ta.Proclaim(t.Context(), "a:3"); !errors.Is(err, etcdlock.ErrResigned) {
		t.Fatalf("Proclaim after Resign: got %v, want ErrResigned", err)
	}
	if e := mustLeader(t, a, "sched"); e.Token != tb.Token() || e.Data != "b:1" || e.Owner != "svc-b" {
		t.Fatalf("Leader after handoff: got %+v, want b's", e)
	}
	tb.Resign(t.Context())
}

// A deposed leader (its key deleted, a newer leader elected) can neither
// proclaim nor resign the newer leader away.
func TestDeposedLeaderChangesNothing(t *testing.T) {
	cli := etcdClient(t)
	a, b := newLocker(t, cli), newLocker(t, cli)
	ta := mustCampaign(t, a, "dep", "old")
	if _, err := cli.Delete(t.Context(), ta.Key()); err != nil {
		t.Fatal(err)
	}
	tb := mustCampaign(t, b, "dep", "new")
	if err := ta.Proclaim(t.Context(), "old-2"); !errors.Is(err, etcdlock.ErrLost) {
		t.Fatalf("deposed Proclaim: got %v, want ErrLost", err)
	}
	if err := ta.Resign(t.Context()); !errors.Is(err, etcdlock.ErrLost) {
		t.Fatalf("deposed Resign: got %v, want ErrLost", err)
	}
	if e := mustLeader(t, b, "dep"); e.Token != tb.Token() || e.Data != "new" {
		t.Fatalf("leader: got %+v, want b's term %d with value new", e, tb.Token())
	}
	waitClosed(t, ta.Done(), 2*time.Second, "deposed term's Done")
	if tb.Err() != nil {
		t.Fatalf("new leader's Err: got %v, want nil", tb.Err())
	}
}

// A Proclaim whose request arrives after a later Proclaim landed must not
// overwrite the later value.
func TestLateProclaimDoesNotOverwrite(t *testing.T) {
	fcli, in := faulty(t, 3)
	c := newLocker(t, fcli)
	term := mustCampaign(t, c, "late", "v0")
	held := in.Hold(puts(term.Key()))
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	err := term.Proclaim(ctx, "v1")
	cancel()
	if err == nil {
		t.Fatal("held Proclaim: got nil, want an error")
	}
	<-held.Caught()
	if err := term.Proclaim(t.Context(), "v2"); err != nil {
		t.Fatalf("Proclaim v2: got %v, want nil", err)
	}
	if err := held.Release(t.Context()); err != nil {
		t.Fatalf("releasing the held Proclaim: %v", err)
	}
	if e := mustLeader(t, c, "late"); e.Data != "v2" {
		t.Fatalf("value after the late Proclaim v1 arrived: got %q, want v2", e.Data)
	}
}

// puts matches transactions that put one of keys.
func puts(keys ...string) func(string, any) bool {
	return func(method string, req any) bool {
		txn, ok := req.(*pb.TxnRequest)
		if !ok {
			return false
		}
		for _, op := range txn.Success {
			if p := op.GetRequestPut(); p != nil && slices.Contains(keys, string(p.Key)) {
				return true
			}
		}
		return false
	}
}

func TestCampaignBadInput(t *testing.T) {
	c := newLocker(t, etcdClient(t))
	//lint:ignore SA1012 testing the nil check
	if _, err := c.Campaign(nil, "x", ""); err == nil { //nolint:staticcheck
		t.Error("Campaign(nil ctx): got nil error")
	}
	if _, err := c.Campaign(t.Context(), "", ""); !errors.Is(err, etcdlock.ErrInvalidName) {
		t.Errorf("Campaign(empty name): got %v, want ErrInvalidName", err)
	}
	if _, err := c.Campaign(t.Context(), "a\nb", ""); !errors.Is(err, etcdlock.ErrInvalidName) {
		t.Errorf("Campaign(a newline b): got %v, want ErrInvalidName", err)
	}
	big := strings.Repeat("x", etcdlock.MaxDataLen+1)
	if _, err := c.Campaign(t.Context(), "x", big); !errors.Is(err, etcdlock.ErrInvalidData) {
		t.Errorf("Campaign(oversized value): got %v, want ErrInvalidData", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := c.Campaign(ctx, "x", ""); !errors.Is(err, context.Canceled) {
		t.Errorf("Campaign(cancelled ctx): got %v, want context.Canceled", err)
	}
	//lint:ignore SA1012 testing the nil check
	if _, err := c.Observe(nil, "x"); err == nil { //nolint:staticcheck
		t.Error("Observe(nil ctx): got nil error")
	}
	if _, err := c.Observe(t.Context(), ""); !errors.Is(err, etcdlock.ErrInvalidName) {
		t.Errorf("Observe(empty name): got %v, want ErrInvalidName", err)
	}
	if err := c.Run(t.Context(), "x", "", nil); err == nil {
		t.Error("Run(nil lead): got nil error")
	}
	if _, err := c.Leader(t.Context(), ""); !errors.Is(err, etcdlock.ErrInvalidName) {
		t.Errorf("Leader(empty name): got %v, want ErrInvalidName", err)
	}
	term := mustCampaign(t, c, "x", "")
	defer term.Resign(t.Context())
	if err := term.Proclaim(t.Context(), big); !errors.Is(err, etcdlock.ErrInvalidData) {
		t.Errorf("Proclaim(oversized): got %v, want ErrInvalidData", err)
	}
	//lint:ignore SA1012 testing the nil check
	if err := term.Proclaim(nil, "v"); err == nil { //nolint:staticcheck
		t.Error("Proclaim(nil ctx): got nil error")
	}
}

// A lock and an election of one name are unrelated.
func TestElectionApartFromLock(t *testing.T) {
	c := newLocker(t, etcdClient(t))
	l := mustLock(t, c, "same")
	defer l.Unlock(t.Context())
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	term, err := c.Campaign(ctx, "same", "")
	if err != nil {
		t.Fatalf("Campaign while the lock of the same name is held: got %v, want nil", err)
	}
	term.Resign(t.Context())
}
