package etcdlock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
)

// Tests of the edges of a Client's life: Close called twice, Close racing
// the first session's grant, a Lock just after the lease was revoked, a
// candidate that gave up, and prefixes that nest.

// gate blocks the requests matched by m, from the first, until opened (or,
// if untilCtx, until the request's context ends); it reports when the first
// one reached it.
type gate struct {
	reached, open chan struct{}
	once          sync.Once
}

func newGate(in *reqfault.Injector, m reqfault.Match, untilCtx bool) *gate {
	g := &gate{reached: make(chan struct{}), open: make(chan struct{})}
	in.BeforeContext(m, func(ctx context.Context, _ any) {
		g.once.Do(func() { close(g.reached) })
		if !untilCtx {
			ctx = context.Background()
		}
		select {
		case <-g.open:
		case <-ctx.Done():
		}
	})
	return g
}

func waitErr(t *testing.T, ch <-chan error, d time.Duration, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(d):
		t.Fatalf("%s: no answer after %v", what, d)
		return nil
	}
}

// Two concurrent Closes (a signal handler and a defer): each returns only
// once the Client is closed, with the same result. The second used to
// return nil at once while the first was still revoking, its locks still
// in etcd, and the first's revoke error hidden from it.
func TestCloseTwiceWaitsForTheFirst(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cleanup time.Duration
		wantErr bool
	}{
		{"revoked", 5 * time.Second, false},
		{"revoke failed", time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			direct := etcdClient(t)
			fcli, in := faulty(t, 1)
			c := newLocker(t, fcli, etcdlock.WithTTL(30*time.Second), etcdlock.WithCleanupTimeout(tc.cleanup))
			l := mustLock(t, c, "x")
			g := newGate(in, reqfault.Method("Lease/LeaseRevoke"), false)
			first, second := make(chan error, 1), make(chan error, 1)
			go func() { first <- c.Close(context.Background()) }()
			<-g.reached
			go func() { second <- c.Close(context.Background()) }()
			select {
			case err := <-second:
				t.Errorf("second Close returned %v while the first was still revoking; keys still in etcd: %v", err, keys(t, direct, l.Key()))
			case <-time.After(300 * time.Millisecond):
			}
			close(g.open)
			e1 := waitErr(t, first, 10*time.Second, "first Close")
			e2 := waitErr(t, second, 10*time.Second, "second Close")
			if (e1 != nil) != tc.wantErr {
				t.Fatalf("first Close: got %v, want error %v", e1, tc.wantErr)
			}
			if e1 != e2 && (e1 == nil || e2 == nil || e1.Error() != e2.Error()) {
				t.Errorf("second Close: got %v, want the first's %v", e2, e1)
			}
			if !tc.wantErr {
				if ks := keys(t, direct, l.Key()); len(ks) != 0 {
					t.Errorf("after both Closes: keys %v still in etcd", ks)
				}
			}
			if e3 := c.Close(context.Background()); e3 != e1 && (e1 == nil || e3 == nil || e1.Error() != e3.Error()) {
				t.Errorf("third Close: got %v, want the first's %v", e3, e1)
			}
		})
	}
}

// Close racing the first session's grant: the grant is applied, and its
// reply is lost because Close cancelled the request. The lease must not be
// left alive for its whole TTL (it used to be: nothing revoked a lease
// whose ID was never learned).
func TestCloseRacingGrantLeavesNoLease(t *testing.T) {
	direct := etcdClient(t)
	fcli, in := faulty(t, 1)
	c := newLocker(t, fcli, etcdlock.WithTTL(60*time.Second))
	var (
		once    sync.Once
		granted = make(chan clientv3.LeaseID, 1)
	)
	in.BeforeContext(reqfault.Method("Lease/LeaseGrant"), func(ctx context.Context, req any) {
		once.Do(func() {
			// The request lands (applied here, on a connection of its own)...
			r := proto.Clone(req.(*pb.LeaseGrantRequest)).(*pb.LeaseGrantRequest)
			resp, err := pb.NewLeaseClient(direct.ActiveConnection()).LeaseGrant(context.Background(), r)
			if err != nil {
				t.Errorf("granting: %v", err)
				granted <- 0
				return
			}
			granted <- clientv3.LeaseID(resp.ID)
			// ...and its caller stops waiting for the reply: Close ends it.
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
				t.Errorf("the grant's context did not end after Close")
			}
		})
	})
	locked := make(chan error, 1)
	go func() {
		_, err := c.Lock(context.Background(), "x")
		locked <- err
	}()
	id := <-granted
	if err := c.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := waitErr(t, locked, 10*time.Second, "Lock"); !errors.Is(err, etcdlock.ErrClosed) {
		t.Errorf("Lock: got %v, want ErrClosed", err)
	}
	ttl, err := direct.TimeToLive(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if ttl.TTL > placeholderTTL {
		direct.Revoke(context.Background(), id)
		t.Errorf("lease %x granted while Close ran: still alive with %d s left, want revoked", int64(id), ttl.TTL)
	}
}

// A Lock that starts just after the session's lease was revoked must not
// fail with ErrLost for a lock it never held: when a sibling call hears
// "lease not found" first and ends the session, which cancels this call's
// create, the call retries on a new session, as it does when it hears it
// itself.
func TestLockAfterRevokeRetriesWhenSiblingEndsSession(t *testing.T) {
	direct := etcdClient(t)
	fcli, in := faulty(t, 1)
	c := newLocker(t, fcli, etcdlock.WithTTL(30*time.Second))
	held := mustLock(t, c, "held")
	if _, err := direct.Revoke(context.Background(), held.Lease()); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	reached := make(chan struct{})
	q := keysOf(t).Lock("c")
	in.BeforeContext(creates(q), func(ctx context.Context, _ any) {
		once.Do(func() {
			close(reached)
			// Hold the create until the sibling's "lease not found" ends
			// the session, which cancels this request.
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
			}
		})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		l, err := c.Lock(ctx, "c")
		if err == nil {
			err = l.Unlock(ctx)
		}
		got <- err
	}()
	<-reached
	sib, err := c.Lock(ctx, "b")
	if err != nil {
		t.Fatalf("sibling Lock: %v", err)
	}
	defer sib.Unlock(ctx)
	if sib.Lease() == held.Lease() {
		t.Fatalf("sibling locked on the revoked lease %x", int64(held.Lease()))
	}
	if err := waitErr(t, got, 20*time.Second, "Lock"); err != nil {
		t.Errorf("Lock started after the revoke: got %v, want the lock (a retry on a new session)", err)
	}
}

// A candidate whose Campaign gave up just as its turn came is reported as
// leader by Leader and Observe until its cleanup delete lands, as their
// docs say: this test pins that window down (it closes when the delete
// lands) so a change to it is noticed.
func TestGaveUpCandidateReportedUntilItsDeleteLands(t *testing.T) {
	direct := etcdClient(t)
	fcli, in := faulty(t, 1)
	leader := newLocker(t, direct)
	cand := newLocker(t, fcli, etcdlock.WithCleanupTimeout(200*time.Millisecond))
	watcher := newLocker(t, direct)
	term, err := leader.Campaign(context.Background(), "e", "first")
	if err != nil {
		t.Fatal(err)
	}
	g := newGate(in, deletes(""), true)
	ctx, cancel := context.WithCancel(context.Background())
	campaigned := make(chan error, 1)
	go func() {
		_, err := cand.Campaign(ctx, "e", "second")
		campaigned <- err
	}()
	poll.Until(t, "the candidate queued", func() bool {
		return len(keys(t, direct, keysOf(t).Election("e"))) == 2
	})
	cancel()
	<-g.reached // its cleanup delete is out, held
	if err := waitErr(t, campaigned, 10*time.Second, "Campaign"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Campaign: got %v, want context.Canceled", err)
	}
	if err := term.Resign(context.Background()); err != nil {
		t.Fatal(err)
	}
	e, err := watcher.Leader(context.Background(), "e")
	if err != nil || e.Data != "second" {
		t.Fatalf("Leader while the gave-up candidate's delete is held: got %+v, %v; want the candidate (as documented)", e, err)
	}
	close(g.open)
	poll.Until(t, "the gave-up candidate no longer reported", func() bool {
		_, err := watcher.Leader(context.Background(), "e")
		return errors.Is(err, etcdlock.ErrNoLeader)
	})
}

// A prefix that would nest inside another Client's key space (another
// prefix followed by one of the layout's own segments: lock/, elect/,
// slot/) is refused: its keys would sit in the other's queues. It used to
// be accepted, and its lane marker held the other's lock "jobs".
func TestNestedPrefixRefused(t *testing.T) {
	cli := etcdClient(t)
	p := prefix(t)
	outer := newLocker(t, cli, etcdlock.WithPrefix(p))
	for _, nested := range []string{p + "lock/jobs/", p + "lock/", p + "elect/x", p + "slot/y/", "/a/lock/b/"} {
		c, err := etcdlock.New(cli, etcdlock.WithPrefix(nested))
		if err == nil {
			// Show what it does before failing.
			l, lerr := c.Lock(context.Background(), "z")
			if lerr == nil {
				defer l.Unlock(context.Background())
			}
			defer c.Close(context.Background())
			_, terr := outer.TryLock(context.Background(), "jobs")
			t.Errorf("New(WithPrefix(%q)): accepted; the outer Client's TryLock(jobs) then says %v", nested, terr)
			continue
		}
		if !errors.Is(err, etcdlock.ErrInvalidOption) || !strings.Contains(err.Error(), "nest") {
			t.Errorf("New(WithPrefix(%q)): got %v, want ErrInvalidOption saying it nests", nested, err)
		}
	}
	for _, ok := range []string{p + "locks/", p + "jobs/lockx/", "/app/election/"} {
		c, err := etcdlock.New(cli, etcdlock.WithPrefix(ok))
		if err != nil {
			t.Errorf("New(WithPrefix(%q)): %v, want accepted", ok, err)
			continue
		}
		c.Close(context.Background())
	}
}

// A lease grant that lands but loses its reply is retried by clientv3; the
// retry must not grant a second lease and leave the first alive, unknown,
// for its TTL. With the lease's ID chosen by the Client, the retry is
// refused as "lease already exists", and the session uses the lease the
// first delivery granted. A grant delivered twice likewise grants one.
func TestGrantFaultsLeaveOneLease(t *testing.T) {
	for _, k := range []reqfault.Kind{reqfault.LostReply, reqfault.Twice} {
		t.Run(k.String(), func(t *testing.T) {
			direct := etcdClient(t)
			fcli, in := faulty(t, 1)
			before := leaseIDs(t, direct)
			c := newLocker(t, fcli, etcdlock.WithTTL(30*time.Second))
			in.Next(reqfault.Method("Lease/LeaseGrant"), k)
			l := mustLock(t, c, "x")
			var grants int
			poll.Until(t, "the grant sent", func() bool {
				grants = in.Calls("Lease/LeaseGrant")
				return grants >= 1
			})
			var extra []clientv3.LeaseID
			for id := range leaseIDs(t, direct) {
				if !before[id] && id != l.Lease() {
					extra = append(extra, id)
				}
			}
			if len(extra) > 0 {
				for _, id := range extra {
					direct.Revoke(context.Background(), id)
				}
				t.Errorf("after a grant with fault %v: leases %x alive beside the session's %x", k, extra, int64(l.Lease()))
			}
			if err := l.Unlock(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// leaseIDs returns the leases etcd has.
func leaseIDs(t *testing.T, cli *clientv3.Client) map[clientv3.LeaseID]bool {
	t.Helper()
	resp, err := cli.Leases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ids := map[clientv3.LeaseID]bool{}
	for _, l := range resp.Leases {
		ids[l.ID] = true
	}
	return ids
}
