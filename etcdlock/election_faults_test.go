package etcdlock_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// Tests of elections (Campaign, Term, Observe, Run) and owner records
// under faults and misuse; each comment says what went wrong without the
// rule the test pins. election_claims_test.go pins the documented claims.

// An election value (or lock metadata) that is not valid UTF-8 is refused
// up front; valid UTF-8, including NUL and quotes, goes through unchanged.
// The record is JSON, and encoding/json replaces each invalid byte with
// U+FFFD: accepted, such a value was silently changed, so Term.Value said
// one thing, Leader and Observe another.
func TestNonUTF8ValueRefused(t *testing.T) {
	c := newLocker(t, etcdClient(t))
	if _, err := c.Campaign(t.Context(), "utf8", "addr\xff\xfe\x00bin"); !errors.Is(err, etcdlock.ErrInvalidData) {
		t.Fatalf("Campaign with a non-UTF-8 value: got %v, want ErrInvalidData", err)
	}
	if _, err := c.Lock(t.Context(), "utf8", etcdlock.WithMetadata("\xff")); !errors.Is(err, etcdlock.ErrInvalidData) {
		t.Fatalf("Lock with non-UTF-8 metadata: got %v, want ErrInvalidData", err)
	}
	value := "addr \"q\" \x00 ü \u2028"
	term, err := c.Campaign(t.Context(), "utf8", value)
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	defer term.Resign(t.Context())
	if e := mustLeader(t, c, "utf8"); e.Data != value || term.Value() != value {
		t.Fatalf("Leader's Data %q, Term.Value %q; want %q", e.Data, term.Value(), value)
	}
}

// Run with WithErrorHandler and a lead that fails at once (its database is
// down, say) backs off between its terms, as it does between failed
// campaigns (100 ms to 5 s). Without that, it campaigned and resigned in a
// tight loop: two raft writes per round, hundreds of rounds a second.
func TestRunFailingLeadBacksOff(t *testing.T) {
	t.Parallel()
	fcli, in := faulty(t, 201)
	c := newLocker(t, fcli, etcdlock.WithTTL(9*time.Second))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var rounds int
	done := make(chan error, 1)
	go func() {
		done <- c.Run(ctx, "busy", "", func(context.Context, *etcdlock.Term) error {
			rounds++
			return errors.New("database down")
		}, etcdlock.WithErrorHandler(func(error) {}))
	}()
	time.Sleep(200 * time.Millisecond) // warm up: session created
	before, start := in.Calls("KV/Txn")+in.Calls("KV/Range"), time.Now()
	time.Sleep(time.Second) // a window to count requests in
	n := in.Calls("KV/Txn") + in.Calls("KV/Range") - before
	rate := float64(n) / time.Since(start).Seconds()
	cancel()
	<-done
	t.Logf("Run with a lead that fails at once: %d rounds, %d requests in the 1s window (%.0f/s)", rounds, n, rate)
	if rate > 30 {
		t.Fatalf("Run sent %.0f requests/s while lead kept failing at once, want at most 30 (a backoff as for failed campaigns)", rate)
	}
}

// A lead that exits its goroutine with runtime.Goexit (as t.FailNow and
// t.SkipNow do in a test) still resigns. recover() returns nil there, so a
// resignation that relied on it did not run: the term's key stayed, kept
// alive by the Client's session, and every other candidate waited behind a
// leader that no longer led, until the Client was closed.
func TestRunGoexitResigns(t *testing.T) {
	cli := etcdClient(t)
	a := newLocker(t, cli)
	b := newLocker(t, cli)
	started := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		a.Run(context.Background(), "goexit", "a", func(context.Context, *etcdlock.Term) error {
			close(started)
			runtime.Goexit()
			return nil
		})
	}()
	<-started
	<-exited
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	term, err := b.Campaign(ctx, "goexit", "b")
	if err != nil {
		t.Fatalf("b's Campaign 3s after a's Run goroutine exited: %v; keys: %v", err, keys(t, cli, keysOf(t).Elections()))
	}
	term.Resign(t.Context())
}

// Run (and Campaign) waiting for a session grant are ended by Client.Close,
// as Run documents ("[ErrClosed] when the Client is closed"). With the
// grant request under Run's ctx alone and etcd unreachable, Run stayed
// blocked after Close returned, until the network healed or ctx ended.
func TestRunClosedWhileGranting(t *testing.T) {
	testenv.Long(t, "it waits out a held grant")
	t.Parallel()
	pcli, proxy := proxied(t)
	c, err := etcdlock.New(pcli, etcdlock.WithPrefix(prefix(t)), etcdlock.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// Let the connection come up, then cut it.
	if _, err := pcli.Get(t.Context(), "warm"); err != nil {
		t.Fatal(err)
	}
	proxy.Cut()
	defer proxy.Heal()
	done := make(chan error, 1)
	go func() {
		done <- c.Run(context.Background(), "closing", "", func(ctx context.Context, _ *etcdlock.Term) error {
			<-ctx.Done()
			return nil
		})
	}()
	time.Sleep(300 * time.Millisecond) // Run is in the grant
	cctx, ccancel := context.WithTimeout(t.Context(), time.Second)
	defer ccancel()
	c.Close(cctx)
	select {
	case err := <-done:
		if !errors.Is(err, etcdlock.ErrClosed) {
			t.Fatalf("Run after Close: got %v, want ErrClosed", err)
		}
	case <-time.After(3 * time.Second):
		proxy.Heal()
		err := <-done
		t.Fatalf("Run still running 3s after Client.Close returned (it returned %v only once the network healed)", err)
	}
}

// Term.Value does not block while a Proclaim is in flight, and a Proclaim
// whose request hangs (etcd unreachable) ends with its term. With one mutex
// serialising Proclaim and guarding the value, and the Proclaim bounded by
// the caller's ctx alone, it outlived Done and the validity deadline, and
// a status handler reading Value hung with it.
func TestProclaimEndsWithTermValueNotBlocked(t *testing.T) {
	t.Parallel()
	pcli, proxy := proxied(t)
	c := newLocker(t, pcli, etcdlock.WithTTL(2*time.Second))
	term := mustCampaign(t, c, "hang", "v0")
	proxy.Cut()
	defer proxy.Heal()
	proclaimed := make(chan error, 1)
	go func() { proclaimed <- term.Proclaim(context.Background(), "v1") }()
	time.Sleep(100 * time.Millisecond) // Proclaim holds the Term's mutex

	got := make(chan string, 1)
	go func() { got <- term.Value() }()
	var valueBlocked bool
	select {
	case <-got:
	case <-time.After(time.Second):
		valueBlocked = true
	}

	waitClosed(t, term.Done(), 5*time.Second, "term's Done on a cut network")
	var proclaimHung bool
	select {
	case <-proclaimed:
	case <-time.After(2 * time.Second):
		proclaimHung = true
	}
	proxy.Heal()
	if proclaimHung {
		t.Logf("Proclaim after heal: %v", <-proclaimed)
	}
	if valueBlocked {
		t.Logf("Value after heal: %q", <-got)
	}
	if valueBlocked || proclaimHung {
		t.Fatalf("Value blocked behind an in-flight Proclaim: %v; Proclaim still running 2s after the term ended (%v): %v",
			valueBlocked, term.Err(), proclaimHung)
	}
}

// A Campaign waiting behind another leader, whose Client is closed,
// returns ErrClosed (not its ctx's error: its ctx was not cancelled).
func TestCampaignClosedWhileWaiting(t *testing.T) {
	cli := etcdClient(t)
	leader := newLocker(t, cli)
	lt := mustCampaign(t, leader, "closing", "")
	defer lt.Resign(t.Context())
	var canceled int
	for range 5 {
		c, err := etcdlock.New(cli, etcdlock.WithPrefix(prefix(t)), etcdlock.WithTTL(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() { _, err := c.Campaign(context.Background(), "closing", ""); got <- err }()
		poll.Until(t, "candidate queued", func() bool {
			q, err := leader.InspectElection(t.Context(), "closing")
			return err == nil && len(q.Waiters) == 1
		})
		c.Close(t.Context())
		err = <-got
		if !errors.Is(err, etcdlock.ErrClosed) {
			t.Logf("Campaign when its Client was closed: got %v, want ErrClosed", err)
			if errors.Is(err, context.Canceled) {
				canceled++
			}
		}
	}
	if canceled > 0 {
		t.Fatalf("%d of 5 Campaigns whose Client was closed returned an error matching context.Canceled (their ctx was not cancelled), want ErrClosed", canceled)
	}
}
