package etcdlock_test

// Adversarial review of the one watch engine (issue 24, branch break24).

import (
	"context"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

// Observe sends only leaders that led at some revision: when one revision
// deletes several candidates (a session's lease ends, deleting its leader
// and its candidate queued behind in one revision), Observe applies the
// revision whole and sends the candidate that leads after it, not a
// candidate that "led" between two events of one revision. A Client's
// session may queue several candidates in one election (a slot each).
func TestObserveSendsNoLeaderBetweenEventsOfOneRevision(t *testing.T) {
	cli := etcdClient(t)
	p := prefix(t)
	a := newLockerAt(t, cli, p, etcdlock.WithTTL(30*time.Second))
	b := newLockerAt(t, etcdClient(t), p)
	obs := newLockerAt(t, etcdClient(t), p)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	first, err := a.Campaign(ctx, "e", "a1")
	if err != nil {
		t.Fatal(err)
	}
	queued := func(n int) func() bool {
		return func() bool {
			q, err := obs.InspectElection(ctx, "e")
			return err == nil && len(q.Waiters) == n
		}
	}
	done := make(chan struct{}, 2)
	go func() { a.Campaign(ctx, "e", "a2"); done <- struct{}{} }() // A's second candidate, same lease
	poll.Until(t, "A's second candidate", queued(1))
	var third *etcdlock.Term
	go func() {
		var err error
		if third, err = b.Campaign(ctx, "e", "b"); err != nil {
			t.Errorf("B's Campaign: %v", err)
		}
		done <- struct{}{}
	}()
	poll.Until(t, "B's candidate", queued(2))
	q, err := obs.InspectElection(ctx, "e")
	if err != nil {
		t.Fatal(err)
	}
	phantom := q.Waiters[0].Token // A's second: it never leads

	o := observe(t, ctx, obs, "e")
	o.waitSeen(t, []fence.Token{first.Token()}, "A's leader")
	if _, err := cli.Revoke(ctx, first.Lease()); err != nil { // both of A's keys go in one revision
		t.Fatal(err)
	}
	<-done
	<-done
	o.waitSeen(t, []fence.Token{third.Token()}, "B's leader")
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen[phantom] {
		t.Errorf("Observe sent token %d, A's second candidate, deleted in the same revision as A's leader: it never led (Leader never returned it)", phantom)
	}
	cancel()
}
