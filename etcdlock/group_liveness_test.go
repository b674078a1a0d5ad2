package etcdlock_test

// A group's liveness under one fault: a request of a worker that never
// returns (held by the request-fault injector until its caller gives up),
// or a watch stream that hangs, delays no partition's next owner past
// TTL + 1 s.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
)

// liveTTL is the TTL of the workers of the liveness tests, and
// liveBound what Join promises them: every partition owned again within
// TTL + 1 s of one fault.
const (
	liveTTL   = 2 * time.Second
	liveBound = liveTTL + time.Second
)

// TestGroupOwnedAgainAfterHungRequest holds one request of a worker until
// its caller gives up (then delivers it, late), or hangs its watch
// stream, and checks that every partition is owned by the member the
// share gives it to within TTL + 1 s, measured from the fault, or from
// the old owner's lease expiry for a takeover; and that the held request,
// delivered late, takes nothing. Before each request was bounded by half
// the TTL, the wait's round (the grace plus two TTLs, 6 s here) or the
// cleanup timeout (5 s) bounded them.
func TestGroupOwnedAgainAfterHungRequest(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, runs *groupRuns) (from time.Time, g *etcdlock.Group, workers int, after func())
	}{
		{"partition_create", hungPartitionCreate},
		{"member_create", hungMemberCreate},
		{"member_read", hungMemberRead},
		{"release", hungRelease},
		{"queue_read", hungQueueRead},
		{"takeover_create", hungTakeoverCreate},
		{"watch", hungWatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runs := newGroupRuns()
			from, g, workers, after := tc.run(t, runs)
			took := ownedAgain(t, g, runs, workers, from)
			t.Logf("every partition owned again %v after the fault (TTL %v)", took.Round(time.Millisecond), liveTTL)
			if after != nil {
				after()
			}
			if bad := runs.check(); len(bad) > 0 {
				t.Errorf("violations: %v", bad)
			}
		})
	}
}

// ownedAgain polls g until it has settled with workers members and each
// partition's owner runs its work (its key is first in the queue, and it
// knows), and returns how long after from that was; it fails the test
// when that is past liveBound, and keeps polling 10 s more to say how
// long it took.
func ownedAgain(t *testing.T, g *etcdlock.Group, runs *groupRuns, workers int, from time.Time) time.Duration {
	t.Helper()
	for {
		st, err := g.Inspect(t.Context())
		took := time.Since(from)
		if err == nil && balanced(st, workers) && runs.working(st) {
			if took > liveBound {
				t.Errorf("owned again %v after the fault, want at most %v", took.Round(time.Millisecond), liveBound)
			}
			return took
		}
		if took > liveBound+10*time.Second {
			t.Fatalf("not owned again %v after the fault (want at most %v): %v; %d members, %d moves, owned %v",
				took.Round(time.Millisecond), liveBound, err, len(st.Members), st.Moves, st.Owned())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// working reports whether the owner of each partition of st runs its
// work.
func (r *groupRuns) working(st etcdlock.GroupStatus) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range st.Owners {
		if p.Owner == nil || !slices.ContainsFunc(slices.Collect(maps.Keys(r.running[p.Partition])), func(w *etcdlock.Partition) bool {
			return w.Token() == p.Owner.Token
		}) {
			return false
		}
	}
	return true
}

// caught waits for held's request to be caught, and returns when.
func caught(t *testing.T, held *reqfault.Held, what string) time.Time {
	t.Helper()
	select {
	case <-held.Caught():
		return time.Now()
	case <-time.After(10 * time.Second):
		t.Fatalf("%s was not sent", what)
		return time.Time{}
	}
}

// deliverLate delivers held's request, which must not fail.
func deliverLate(t *testing.T, held *reqfault.Held) {
	t.Helper()
	if err := held.Release(t.Context()); err != nil {
		t.Errorf("the held request, delivered late: %v", err)
	}
}

// liveWorker returns a worker's Client with the liveness tests' TTL and
// the default cleanup timeout (5 s), on cli.
func liveWorker(t *testing.T, cli *clientv3.Client, opts ...etcdlock.Option) *etcdlock.Client {
	return newLocker(t, cli, append([]etcdlock.Option{etcdlock.WithTTL(liveTTL)}, opts...)...)
}

// A partition's create: its one worker owns it once the create is sent
// again, and tells the error handler why; the first, delivered late,
// leaves no key (no waiter).
func hungPartitionCreate(t *testing.T, runs *groupRuns) (time.Time, *etcdlock.Group, int, func()) {
	fcli, in := faulty(t, 41)
	held := in.Hold(creates(prefix(t) + "group/g/p/0/"))
	reported := make(chan error, 16)
	joinGroup(t, group(t, liveWorker(t, fcli), "g", 2), runs.work(0), etcdlock.WithPartitionErrorHandler(func(k int, err error) {
		select {
		case reported <- err:
		default:
		}
	}))
	from := caught(t, held, "the partition's create")
	g := group(t, newLocker(t, etcdClient(t)), "g", 2)
	return from, g, 1, func() {
		deliverLate(t, held)
		st := groupSettled(t, g, 1, time.Second)
		if n := len(st.Owners[0].Waiters); n != 0 {
			t.Errorf("partition 0 has %d waiters after the held create landed: %v", n, st.Owners[0].Waiters)
		}
		select {
		case err := <-reported:
			if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "did not return within 1s") {
				t.Errorf("the error handler got %v, want a request that did not return within 1s (half the TTL, 1 s at least)", err)
			}
		default:
			t.Error("the error handler was not told of the request that did not return")
		}
	}
}

// A member's create: the worker joins once it is sent again.
func hungMemberCreate(t *testing.T, runs *groupRuns) (time.Time, *etcdlock.Group, int, func()) {
	fcli, in := faulty(t, 42)
	held := in.Hold(creates(prefix(t) + "group/g/m/"))
	joinGroup(t, group(t, liveWorker(t, fcli), "g", 2), runs.work(0))
	from := caught(t, held, "the member's create")
	g := group(t, newLocker(t, etcdClient(t)), "g", 2)
	return from, g, 1, func() {
		deliverLate(t, held)
		groupSettled(t, g, 1, time.Second) // one member: the late create left none
	}
}

// The read of the members of a worker that joins: the partition the old
// worker hands it waits for it to read the members again.
func hungMemberRead(t *testing.T, runs *groupRuns) (time.Time, *etcdlock.Group, int, func()) {
	direct := etcdClient(t)
	joinGroup(t, group(t, liveWorker(t, direct), "g", 2), runs.work(0))
	g := group(t, newLocker(t, direct), "g", 2)
	groupSettled(t, g, 1, 10*time.Second)
	fcli, in := faulty(t, 43)
	held := in.Hold(rangeUnder(prefix(t) + "group/g/m/"))
	joinGroup(t, group(t, liveWorker(t, fcli), "g", 2), runs.work(0))
	return caught(t, held, "the read of the members"), g, 2, func() { deliverLate(t, held) }
}

// The release of the partition an old worker hands over when a worker
// joins: it is released again, and the first, delivered late, deletes
// nothing of the new owner's.
func hungRelease(t *testing.T, runs *groupRuns) (time.Time, *etcdlock.Group, int, func()) {
	direct := etcdClient(t)
	fcli, in := faulty(t, 44)
	joinGroup(t, group(t, liveWorker(t, fcli), "g", 2), runs.work(0))
	g := group(t, newLocker(t, direct), "g", 2)
	groupSettled(t, g, 1, 10*time.Second)
	held := in.Hold(deletes(""))
	joinGroup(t, group(t, liveWorker(t, direct), "g", 2), runs.work(0))
	return caught(t, held, "the handoff's release"), g, 2, func() {
		deliverLate(t, held)
		groupSettled(t, g, 2, time.Second)
	}
}

// A takeover: a worker cut off from etcd whose lease expires (revoked, at
// a known instant), while the create of one of its partitions by the
// worker taking it over never returns. Measured from the expiry. When
// the create is not sent, the test says what the taker was doing: the
// group as etcd has it (is the taker a member, is it queued for the
// partition already) and the taker's own warnings (memberships ended,
// partition errors).
func hungTakeoverCreate(t *testing.T, runs *groupRuns) (time.Time, *etcdlock.Group, int, func()) {
	direct := etcdClient(t)
	pcli, proxy := proxied(t)
	victim := liveWorker(t, pcli)
	joinGroup(t, group(t, victim, "g", 2), runs.work(0))
	fcli, in := faulty(t, 45)
	logs := &syncBuffer{}
	taker := liveWorker(t, fcli, etcdlock.WithLogger(slog.New(slog.NewJSONHandler(logs, nil))))
	joinGroup(t, group(t, taker, "g", 2), runs.work(0), etcdlock.WithPartitionErrorHandler(func(k int, err error) {
		fmt.Fprintf(logs, "{\"time\":%q,\"msg\":\"partition error\",\"partition\":%d,\"err\":%q}\n", time.Now().Format(time.RFC3339Nano), k, err)
	}))
	g := group(t, newLocker(t, direct), "g", 2)
	// Settled counts owners only. The taker must also not be queued for
	// the victim's partition already, or its create went out before the
	// hold: it is, for as long as it has not seen the victim join. Its
	// watch of the members starts at the revision after its read, which
	// etcd serves from its history (a catch-up every 100 ms) when writes
	// came in between, so the victim's join can reach it late, or in one
	// response with the victim's end.
	var st etcdlock.GroupStatus
	poll.Until(t, "the group settled, with no worker waiting for a partition", func() bool {
		st = groupSettled(t, g, 2, 10*time.Second)
		return !slices.ContainsFunc(st.Owners, func(p etcdlock.PartitionStatus) bool { return len(p.Waiters) > 0 })
	})
	lease := victimLeaseOf(t, victim)
	k := -1
	for _, p := range st.Owners {
		if p.Owner.Lease == lease {
			k = p.Partition
		}
	}
	if k < 0 {
		t.Fatalf("the victim owns no partition: %+v", st.Owners)
	}
	held := in.Hold(creates(prefix(t) + fmt.Sprintf("group/g/p/%d/", k)))
	txns, ranges := in.Calls("KV/Txn"), in.Calls("KV/Range")
	proxy.Cut()
	runs.revoke(lease)
	if _, err := direct.Revoke(t.Context(), lease); err != nil {
		t.Fatal(err)
	}
	from := time.Now()
	select {
	case <-held.Caught():
	case <-time.After(10 * time.Second):
		t.Fatalf("the takeover's create was not sent within 10s of the victim's lease revoked (partition %d, settled as %s)\n"+
			"now: %s\nthe taker sent %d transactions and %d reads since the cut; its log:\n%s",
			k, groupState(st, lease), groupState(statusNow(g), lease), in.Calls("KV/Txn")-txns, in.Calls("KV/Range")-ranges, logs.text())
	}
	return from, g, 1, func() {
		proxy.Heal() // the victim joins again, on a new session, and may take a partition back
		deliverLate(t, held)
	}
}

// statusNow returns g's status, or an empty one (its error in Name).
func statusNow(g *etcdlock.Group) etcdlock.GroupStatus {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := g.Inspect(ctx)
	if err != nil {
		return etcdlock.GroupStatus{Name: "Inspect: " + err.Error()}
	}
	return st
}

// groupState spells st for a failure: each member's and each
// partition's owner's and waiters' lease, the victim's called so.
func groupState(st etcdlock.GroupStatus, victim clientv3.LeaseID) string {
	who := func(e etcdlock.Entry) string {
		if e.Lease == victim {
			return "victim"
		}
		return fmt.Sprintf("%x", int64(e.Lease))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s rev %d, members [", st.Name, st.Rev)
	for _, m := range st.Members {
		fmt.Fprintf(&b, " %s", who(m))
	}
	fmt.Fprintf(&b, " ], moves %d", st.Moves)
	for _, p := range st.Owners {
		fmt.Fprintf(&b, "; p%d owner ", p.Partition)
		if p.Owner == nil {
			b.WriteString("none")
		} else {
			b.WriteString(who(*p.Owner))
		}
		for _, w := range p.Waiters {
			fmt.Fprintf(&b, ", waiter %s", who(w))
		}
	}
	return b.String()
}

// slowHandoff joins a worker whose works return only once letGo is
// closed, then a worker on a faulty client, and returns once the latter
// waits for the partition the share moves to it.
func slowHandoff(t *testing.T, runs *groupRuns, seed uint64) (g *etcdlock.Group, in *reqfault.Injector, letGo chan struct{}) {
	direct := etcdClient(t)
	letGo = make(chan struct{})
	slow := func(ctx context.Context, p *etcdlock.Partition) error {
		runs.start(p)
		<-ctx.Done()
		<-letGo
		runs.end(p, context.Cause(ctx))
		return nil
	}
	joinGroup(t, group(t, liveWorker(t, direct), "g", 2), slow, etcdlock.WithHandoffGrace(time.Minute))
	g = group(t, newLocker(t, direct), "g", 2)
	groupSettled(t, g, 1, 10*time.Second)
	fcli, in := faulty(t, seed)
	joinGroup(t, group(t, liveWorker(t, fcli), "g", 2), runs.work(0))
	poll.Until(t, "the new worker waiting for the partition it is given", func() bool {
		st, err := g.Inspect(t.Context())
		return err == nil && len(st.Members) == 2 && (len(st.Owners[0].Waiters) > 0 || len(st.Owners[1].Waiters) > 0)
	})
	return g, in, letGo
}

// The read of a partition's queue by the worker waiting for it, once the
// old owner's key is gone: it waits again, on a new create.
func hungQueueRead(t *testing.T, runs *groupRuns) (time.Time, *etcdlock.Group, int, func()) {
	g, in, letGo := slowHandoff(t, runs, 47)
	held := in.Hold(readsUnder(prefix(t) + "group/g/p/"))
	close(letGo)
	return caught(t, held, "the read of the partition's queue"), g, 2, func() { deliverLate(t, held) }
}

// readsUnder matches transactions that read a range under q and write
// nothing.
func readsUnder(q string) reqfault.Match {
	return func(method string, req any) bool {
		txn, ok := req.(*pb.TxnRequest)
		if !ok || len(txn.Success) == 0 {
			return false
		}
		for _, op := range txn.Success {
			if r := op.GetRequestRange(); r == nil || !strings.HasPrefix(string(r.Key), q) {
				return false
			}
		}
		return true
	}
}

// The watch stream of the worker waiting for a partition its old owner
// is still working on hangs (it delivers nothing more, from its next
// message on), and then the old owner releases the partition: the
// deletion is never delivered on that stream, which its probe finds hung
// and replaces. This held before requests were bounded too.
func hungWatch(t *testing.T, runs *groupRuns) (time.Time, *etcdlock.Group, int, func()) {
	g, in, letGo := slowHandoff(t, runs, 46)
	in.HangStreams(reqfault.Method("Watch/Watch"))
	poll.Until(t, "the watch stream hung", func() bool { return in.Hung() > 0 })
	in.Heal() // one fault: the stream that replaces it works
	close(letGo)
	return time.Now(), g, 2, nil
}
