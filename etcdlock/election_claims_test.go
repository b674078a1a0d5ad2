package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/netproxy"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// Tests of elections under faults, each pinning a claim of the package's
// documentation.

// A deposed term's Proclaim and Resign, delivered late after the same
// Client campaigned again on the same slot (so the new term's key has the
// same name), change neither the new term's key nor its value.
func TestLateProclaimAndResignOfOldTermOnReusedKey(t *testing.T) {
	direct := etcdClient(t)
	fcli, in := faulty(t, 301)
	c := newLocker(t, fcli, etcdlock.WithTTL(9*time.Second), etcdlock.WithCleanupTimeout(200*time.Millisecond))
	old := mustCampaign(t, c, "reuse", "old")
	key := old.Key()

	heldProclaim := in.Hold(puts(key))
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	if err := old.Proclaim(ctx, "old-late"); err == nil {
		t.Fatal("held Proclaim: got nil")
	}
	cancel()
	<-heldProclaim.Caught()

	heldResign := in.Hold(deletes(key))
	ctx, cancel = context.WithTimeout(t.Context(), 200*time.Millisecond)
	if err := old.Resign(ctx); err == nil {
		t.Fatal("held Resign: got nil")
	}
	cancel()
	<-heldResign.Caught()
	waitClosed(t, old.Done(), 5*time.Second, "old term's Done after its background Resign")
	if !errors.Is(old.Err(), etcdlock.ErrResigned) {
		t.Fatalf("old term's Err: got %v, want ErrResigned", old.Err())
	}
	time.Sleep(50 * time.Millisecond) // the slot is freed right after

	cur := mustCampaign(t, c, "reuse", "new")
	if cur.Key() != key {
		t.Fatalf("new term did not reuse the key: %s vs %s", cur.Key(), key)
	}
	if err := heldProclaim.Release(t.Context()); err != nil {
		t.Logf("late Proclaim: %v", err)
	}
	if err := heldResign.Release(t.Context()); err != nil {
		t.Logf("late Resign: %v", err)
	}
	e, err := c.Leader(t.Context(), "reuse")
	if err != nil || e.Token != cur.Token() || e.Data != "new" {
		t.Fatalf("leader after the old term's late requests: %+v, %v; want token %d value new", e, err, cur.Token())
	}
	time.Sleep(300 * time.Millisecond)
	if cur.Err() != nil {
		t.Fatalf("new term's Err: %v", cur.Err())
	}
	if err := cur.Proclaim(t.Context(), "new-2"); err != nil {
		t.Fatalf("new term's Proclaim: %v", err)
	}
	if err := cur.Resign(t.Context()); err != nil {
		t.Fatalf("new term's Resign: %v", err)
	}
	waitKeys(t, direct, keysOf(t).Elections(), 0)
}

// Campaigns whose create lands with its reply lost, or is delivered twice,
// leave no key that keeps another candidate waiting, and never two leaders.
func TestLostReplyAndTwiceCampaigns(t *testing.T) {
	t.Parallel()
	direct := etcdClient(t)
	fcli, in := faulty(t, 302)
	a := newLocker(t, fcli, etcdlock.WithTTL(9*time.Second), etcdlock.WithCleanupTimeout(300*time.Millisecond))
	b := newLocker(t, direct, etcdlock.WithTTL(9*time.Second))
	q := keysOf(t).Election("dup")
	for i, k := range []reqfault.Kind{reqfault.LostReply, reqfault.Twice, reqfault.LostReply, reqfault.Twice} {
		in.Next(creates(q), k)
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		ta, err := a.Campaign(ctx, "dup", "a")
		cancel()
		if err == nil {
			ta.Resign(t.Context())
		}
		t.Logf("round %d (%v): a's Campaign: %v", i, k, err)
		time.Sleep(350 * time.Millisecond) // a second copy arrives within 300 ms
		ctx, cancel = context.WithTimeout(t.Context(), 3*time.Second)
		tb, err := b.Campaign(ctx, "dup", "b")
		cancel()
		if err != nil {
			t.Fatalf("round %d (%v): b's Campaign after a's: %v; keys %v", i, k, err, keys(t, direct, q))
		}
		if ks := keys(t, direct, q); len(ks) != 1 {
			t.Fatalf("round %d (%v): keys while b leads: %v, want b's alone", i, k, ks)
		}
		tb.Resign(t.Context())
	}
}

// Run's term context is cancelled by the validity deadline when the
// leader's network is cut, and before a candidate on the other side of the
// cut starts leading.
func TestRunTermEndsOnCutBeforeNextLeader(t *testing.T) {
	t.Parallel()
	direct := etcdClient(t)
	pcli, proxy := proxied(t)
	a := newLocker(t, pcli, etcdlock.WithTTL(2*time.Second))
	b := newLocker(t, direct, etcdlock.WithTTL(2*time.Second))
	type start struct {
		at    time.Time
		until time.Time
		ctx   context.Context
	}
	aStarts, bStarts := make(chan start, 4), make(chan start, 4)
	var mu sync.Mutex
	var aEnded time.Time
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer func() { cancel(); proxy.Heal(); wg.Wait() }()
	wg.Add(1)
	go func() {
		defer wg.Done()
		a.Run(ctx, "cut", "", func(tctx context.Context, term *etcdlock.Term) error {
			aStarts <- start{time.Now(), term.ValidUntil(), tctx}
			<-tctx.Done()
			mu.Lock()
			if aEnded.IsZero() {
				aEnded = time.Now()
			}
			mu.Unlock()
			return nil
		})
	}()
	first := nextTerm2(t, aStarts)
	wg.Add(1)
	go func() {
		defer wg.Done()
		b.Run(ctx, "cut", "", func(tctx context.Context, term *etcdlock.Term) error {
			bStarts <- start{time.Now(), term.ValidUntil(), tctx}
			<-tctx.Done()
			return nil
		})
	}()
	time.Sleep(200 * time.Millisecond)
	proxy.Cut()
	second := nextTerm2(t, bStarts)
	waitClosed(t, first.ctx.Done(), 5*time.Second, "a's term context")
	mu.Lock()
	ended := aEnded
	mu.Unlock()
	cause := context.Cause(first.ctx)
	t.Logf("a's term ended %v after a's last ValidUntil; b leads %v after that; cause %v",
		ended.Sub(first.until).Round(time.Millisecond), second.at.Sub(ended).Round(time.Millisecond), cause)
	if !errors.Is(cause, etcdlock.ErrValidityExpired) && !errors.Is(cause, etcdlock.ErrLost) {
		t.Fatalf("a's term context's cause: %v, want ErrLost", cause)
	}
	if !second.at.After(ended) {
		t.Fatalf("b started leading %v before a's term context was cancelled", ended.Sub(second.at))
	}
	cancel()
}

func nextTerm2[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(15 * time.Second):
		t.Fatal("no term after 15s")
		var zero T
		return zero
	}
}

// An observer whose watches etcd keeps refusing backs off (no busy loop),
// and once they work again sends the current leader.
func TestObserveRefusedWatchesBackOff(t *testing.T) {
	testenv.Long(t, "it waits out the backoff of refused watches")
	t.Parallel()
	fcli, in := faulty(t, 303)
	watcher := newLocker(t, fcli)
	c := newLocker(t, etcdClient(t))
	in.RefuseWatches(reqfault.Method("Watch/Watch"))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	o := observe(t, ctx, watcher, "refused")
	time.Sleep(1500 * time.Millisecond) // let the backoff grow
	before, start := waiterRequests(in), time.Now()
	time.Sleep(2 * time.Second)
	n := waiterRequests(in) - before
	rate := float64(n) / time.Since(start).Seconds()
	t.Logf("observer with refused watches: %d requests in %v (%.1f/s)", n, time.Since(start).Round(time.Millisecond), rate)
	if rate > 10 {
		t.Fatalf("observer sent %.1f requests/s while its watches were refused", rate)
	}
	in.RefuseWatches(nil)
	term := mustCampaign(t, c, "refused", "x")
	defer term.Resign(t.Context())
	o.waitSeen(t, []fence.Token{term.Token()}, "leader after watches work again")
}

// An observer on an etcd with auth on and 1 s tokens keeps seeing every
// leader across connection resets after its token expired.
func TestObserveAuthShortTokenAcrossResets(t *testing.T) {
	testenv.Long(t, "waits out auth tokens' expiry (about 8 s)")
	t.Parallel()
	p := prefix(t)
	sec := secureEtcd(t, time.Second, false, p)
	proxy, err := netproxy.Start(strings.TrimPrefix(sec.eps[0], "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	pcli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + proxy.Addr()}, Username: "locker", Password: lockerPassword,
		DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer pcli.Close()
	watcher := newLockerAt(t, pcli, p)
	c := newLockerAt(t, sec.locker(t, nil), p, etcdlock.WithTTL(3*time.Second))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	o := observe(t, ctx, watcher, "auth")
	var tokens []fence.Token
	for round := range 3 {
		term := mustCampaign(t, c, "auth", "v")
		tokens = append(tokens, term.Token())
		o.waitSeen(t, tokens[len(tokens)-1:], "leader before the reset")
		time.Sleep(2500 * time.Millisecond) // the watcher's token expires unused
		proxy.Reset()
		term.Resign(t.Context())
		term = mustCampaign(t, c, "auth", "w")
		tokens = append(tokens, term.Token())
		o.waitSeen(t, tokens[len(tokens)-1:], "leader after the reset")
		term.Resign(t.Context())
		t.Logf("round %d ok", round)
	}
	o.check(t, "observer")
	cancel()
}

// Foreign, garbage, future-version and huge values in a queue read as
// unknown owners (or as the fields they share), never crash or block
// Inspect, Leader, Observe or TryLock; and TryLock's LockedError names the
// holder, not a waiter.
func TestGarbageValuesInQueue(t *testing.T) {
	cli := etcdClient(t)
	c := newLocker(t, cli, etcdlock.WithOwner("me"))
	huge := `{"v":1,"owner":"` + strings.Repeat("o", 1<<20) + `"}`
	values := []string{
		"", "null", "[]", "{", `{"v":"1"}`, `{"v":1,"owner":{}}`, `{"v":1e999}`,
		`{"v":1,"acquired":"not a time","owner":"x"}`,
		`{"v":2,"owner":"future","data":"d","new":{"x":[1,2]}}`,
		"\xff\xfe\x00", huge,
	}
	for _, kind := range []string{"lock", "elect"} {
		q := prefix(t) + kind + "/g/"
		for i, v := range values {
			if _, err := cli.Put(t.Context(), q+"foreign-"+string(rune('a'+i)), v); err != nil {
				t.Fatal(err)
			}
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	qu, err := c.Inspect(ctx, "g")
	if err != nil || qu.Holder == nil || len(qu.Waiters) != len(values)-1 {
		t.Fatalf("Inspect: %v (holder %v, %d waiters)", err, qu.Holder, len(qu.Waiters))
	}
	for _, w := range qu.Waiters {
		if strings.Contains(w.Key, "foreign-i") && (w.Owner != "future" || w.Data != "d") {
			t.Errorf("future-version record: got owner %q data %q, want future, d", w.Owner, w.Data)
		}
	}
	if _, err := c.InspectElection(ctx, "g"); err != nil {
		t.Fatalf("InspectElection: %v", err)
	}
	e, err := c.Leader(ctx, "g")
	if err != nil || e.Owner != "" {
		t.Fatalf("Leader: %+v, %v; want the first foreign key, unknown owner", e, err)
	}
	_, err = c.TryLock(ctx, "g")
	var locked *etcdlock.LockedError
	if !errors.As(err, &locked) || !strings.HasSuffix(locked.Holder.Key, "foreign-a") {
		t.Fatalf("TryLock: %v, want a LockedError naming foreign-a", err)
	}
	ch, err := c.Observe(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-ch:
		if !strings.HasSuffix(e.Key, "foreign-a") {
			t.Fatalf("Observe: first leader %s, want foreign-a", e.Key)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Observe sent nothing in 5s")
	}
	cancel()
	for range ch {
	}

	// The holder, not a waiter, is named; also when the holder is ours.
	a := newLocker(t, cli, etcdlock.WithOwner("holder"))
	b := newLocker(t, cli, etcdlock.WithOwner("waiter"))
	la := mustLock(t, a, "h")
	got := make(chan error, 1)
	go func() {
		l, err := b.Lock(context.Background(), "h")
		if err == nil {
			err = l.Unlock(context.Background())
		}
		got <- err
	}()
	waitQueued(t, cli, la, 2)
	for _, tc := range []*etcdlock.Client{c, a, b} {
		_, err = tc.TryLock(t.Context(), "h")
		if !errors.As(err, &locked) || locked.Holder.Owner != "holder" || locked.Holder.Token != la.Token() {
			t.Fatalf("TryLock behind holder and waiter: %v, want a LockedError naming holder", err)
		}
	}
	la.Unlock(t.Context())
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// Bad input gives clear errors, never panics.
func TestElectionBadInput(t *testing.T) {
	c := newLocker(t, etcdClient(t))
	lead := func(context.Context, *etcdlock.Term) error { return nil }
	var nilCtx context.Context // testing the nil checks
	checks := map[string]error{
		"Run(nil ctx)":           c.Run(nilCtx, "x", "", lead),
		"Run(nil option)":        c.Run(t.Context(), "x", "", lead, nil),
		"Run(bad name)":          c.Run(t.Context(), "a\nb", "", lead),
		"Run(control char)":      c.Run(t.Context(), "a\nb", "", lead),
		"Run(too long name)":     c.Run(t.Context(), strings.Repeat("n", etcdlock.MaxNameLen+1), "", lead),
		"Run(oversized value)":   c.Run(t.Context(), "x", strings.Repeat("v", etcdlock.MaxDataLen+1), lead),
		"Run(non-UTF-8 name)":    c.Run(t.Context(), "\xff", "", lead),
		"Run(nil error handler)": nil,
	}
	_, checks["Inspect(nil ctx)"] = c.Inspect(nilCtx, "x")
	_, checks["InspectElection(nil ctx)"] = c.InspectElection(nilCtx, "x")
	_, checks["Leader(nil ctx)"] = c.Leader(nilCtx, "x")
	_, checks["Leader(bad name)"] = c.Leader(t.Context(), "a\nb")
	_, checks["Inspect(bad name)"] = c.Inspect(t.Context(), "")
	_, checks["Observe(bad name)"] = c.Observe(t.Context(), "a\nb")
	for what, err := range checks {
		if what == "Run(nil error handler)" {
			continue
		}
		if err == nil {
			t.Errorf("%s: got nil error", what)
		}
	}
	term := mustCampaign(t, c, "x", "")
	//lint:ignore SA1012 testing the nil check
	if err := term.Resign(nil); err == nil { //nolint:staticcheck
		t.Error("Resign(nil ctx): got nil")
	}
	// A nil handler is no handler: lead's error is returned.
	boom := errors.New("boom")
	term.Resign(t.Context())
	if err := c.Run(t.Context(), "x", "", func(context.Context, *etcdlock.Term) error { return boom }, etcdlock.WithErrorHandler(nil)); !errors.Is(err, boom) {
		t.Errorf("Run with WithErrorHandler(nil): got %v, want lead's error", err)
	}
}

// Observe ends, and leaks no goroutine, when its ctx ends or its Client is
// closed while it waits to send to a reader that stopped reading.
func TestObserveEndsWithUnreadEntries(t *testing.T) {
	cli := etcdClient(t)
	c := newLocker(t, cli)
	w, err := etcdlock.New(cli, etcdlock.WithPrefix(prefix(t)))
	if err != nil {
		t.Fatal(err)
	}
	term := mustCampaign(t, c, "unread", "x")
	defer term.Resign(t.Context())
	ctx, cancel := context.WithCancel(t.Context())
	ch1, _ := w.Observe(ctx, "unread")
	ch2, _ := w.Observe(t.Context(), "unread")
	time.Sleep(200 * time.Millisecond) // both block sending the leader
	cancel()
	drained := func(ch <-chan etcdlock.Entry, what string) {
		deadline := time.After(5 * time.Second)
		for {
			select {
			case _, ok := <-ch:
				if !ok {
					return
				}
			case <-deadline:
				t.Fatalf("%s: channel still open after 5s", what)
			}
		}
	}
	drained(ch1, "Observe after ctx cancel")
	closed := make(chan error, 1)
	go func() { closed <- w.Close(t.Context()) }()
	drained(ch2, "Observe after Close")
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close blocked by an observer with an unread entry")
	}
}

// An observer whose role may not read the election keeps retrying slowly
// and closes its channel when its ctx ends.
func TestObserveWithoutPermission(t *testing.T) {
	testenv.Long(t, "it waits out refused watches and their backoff")
	t.Parallel()
	p := prefix(t)
	sec := secureEtcd(t, time.Minute, false, "/elsewhere/")
	cli, in := sec.faultyLocker(t, 304)
	w := newLockerAt(t, cli, p)
	ctx, cancel := context.WithCancel(t.Context())
	ch, err := w.Observe(ctx, "denied")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	before := waiterRequests(in)
	time.Sleep(2 * time.Second)
	n := waiterRequests(in) - before
	t.Logf("observer without permission: %d requests in 2s", n)
	if n > 10 {
		t.Fatalf("observer without permission sent %d requests in 2s", n)
	}
	cancel()
	select {
	case _, ok := <-ch:
		if ok {
			t.Fatal("observer without permission sent an entry")
		}
	case <-time.After(3 * time.Second):
		t.Fatal("observer channel open 3s after cancel")
	}
}

// Observers that are cut off and reset repeatedly while terms churn never
// send an older leader after a newer one, and end up at the last leader.
func TestObserveMonotoneAcrossResets(t *testing.T) {
	cli := etcdClient(t)
	pcli, proxy := proxied(t)
	watcher := newLocker(t, pcli)
	c := newLocker(t, cli)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := observe(t, ctx, watcher, "resets")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(20+i%50) * time.Millisecond):
			}
			if i%3 == 0 {
				proxy.Cut()
				time.Sleep(10 * time.Millisecond)
				proxy.Heal()
			}
			proxy.Reset()
		}
	}()
	var last *etcdlock.Term
	for i := range 150 {
		term := mustCampaign(t, c, "resets", "v")
		if i%4 == 0 {
			term.Proclaim(t.Context(), "p")
		}
		if i == 149 {
			last = term
			break
		}
		term.Resign(t.Context())
	}
	close(stop)
	wg.Wait()
	proxy.Heal()
	o.waitSeen(t, []fence.Token{last.Token()}, "last leader")
	o.check(t, "observer across resets")
	last.Resign(t.Context())
	cancel()
}

// A reader that falls behind loses no term: Observe sends one Entry at a
// time and the terms that came and went meanwhile follow, in order.
func TestObserveSlowReaderLosesNone(t *testing.T) {
	cli := etcdClient(t)
	c := newLocker(t, cli)
	w := newLocker(t, etcdClient(t))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch, err := w.Observe(ctx, "slow")
	if err != nil {
		t.Fatal(err)
	}
	// Every term is promised from Observe's first send on: wait for it, so
	// that the watch is established before the terms below.
	ready := mustCampaign(t, c, "slow", "ready")
	select {
	case e := <-ch:
		if e.Token != ready.Token() {
			t.Fatalf("first leader: got token %d, want %d", e.Token, ready.Token())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("first leader not observed in 10s")
	}
	if err := ready.Resign(t.Context()); err != nil {
		t.Fatal(err)
	}
	var want []fence.Token
	for i := range 60 {
		term := mustCampaign(t, c, "slow", "v")
		if i%5 == 0 {
			term.Proclaim(t.Context(), "p")
		}
		want = append(want, term.Token())
		term.Resign(t.Context())
	}
	last := mustCampaign(t, c, "slow", "last")
	defer last.Resign(t.Context())
	want = append(want, last.Token())
	var got []fence.Token
	deadline := time.After(10 * time.Second)
	for len(got) == 0 || got[len(got)-1] != last.Token() {
		select {
		case e := <-ch:
			if len(got) == 0 || got[len(got)-1] != e.Token {
				got = append(got, e.Token)
			}
		case <-deadline:
			t.Fatalf("last leader not observed; got %d terms", len(got))
		}
	}
	if len(got) != len(want) {
		t.Fatalf("slow reader: got %d terms, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("term %d: got token %d, want %d", i, got[i], want[i])
		}
	}
}

// Closing the Client while lead runs cancels lead's context with ErrClosed
// as its cause, and Run returns ErrClosed, leaving no key.
func TestRunCloseWhileLeading(t *testing.T) {
	cli := etcdClient(t)
	c, err := etcdlock.New(cli, etcdlock.WithPrefix(prefix(t)), etcdlock.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan context.Context, 1)
	done := make(chan error, 1)
	go func() {
		done <- c.Run(context.Background(), "close", "", func(ctx context.Context, _ *etcdlock.Term) error {
			started <- ctx
			<-ctx.Done()
			return ctx.Err()
		})
	}()
	tctx := nextTerm2(t, started)
	c.Close(t.Context())
	waitClosed(t, tctx.Done(), 2*time.Second, "lead's context after Close")
	if cause := context.Cause(tctx); !errors.Is(cause, etcdlock.ErrClosed) {
		t.Fatalf("lead's context's cause: %v, want ErrClosed", cause)
	}
	select {
	case err := <-done:
		if !errors.Is(err, etcdlock.ErrClosed) {
			t.Fatalf("Run after Close: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run still running 5s after Close")
	}
	waitKeys(t, cli, prefix(t), 0)
}

// Under random request faults on every candidate's transactions (late,
// lost reply, twice): no two candidates lead at once; a Proclaim that
// succeeded is what Leader reads until the next one, whatever earlier,
// failed Proclaims land late; and observers never go back.
func TestElectionUnderRandomFaults(t *testing.T) {
	testenv.Long(t, "a fault storm on an election")
	eps := propServer(t)
	direct := etcdClient(t, eps...)
	fcli, in := faulty(t, 305, eps...)
	const candidates = 4
	cs := make([]*etcdlock.Client, candidates)
	for i := range cs {
		cs[i] = newLocker(t, fcli, etcdlock.WithTTL(9*time.Second), etcdlock.WithCleanupTimeout(300*time.Millisecond))
	}
	octx, ocancel := context.WithCancel(context.Background())
	defer ocancel()
	w := newLocker(t, etcdClient(t, eps...))
	o := observe(t, octx, w, "prop")
	in.Random(0.25, 300*time.Millisecond, reqfault.Method("KV/Txn"))
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Second)
	defer cancel()
	var mu sync.Mutex
	var active *etcdlock.Term
	var violations []string
	var terms, proclaims, failedProclaims int
	var won []fence.Token
	var wg sync.WaitGroup
	for i := range candidates {
		c := cs[i]
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
				term, err := c.Campaign(cctx, "prop", "c")
				ccancel()
				if err != nil {
					continue
				}
				mu.Lock()
				if active != nil {
					violations = append(violations, fmt.Sprintf("term %d won while term %d is active", term.Token(), active.Token()))
				}
				active = term
				terms++
				won = append(won, term.Token())
				mu.Unlock()
				for k := range 3 {
					v := fmt.Sprintf("c%d-%d-%d", i, n, k)
					pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
					err := term.Proclaim(pctx, v)
					pcancel()
					mu.Lock()
					proclaims++
					mu.Unlock()
					if err != nil {
						mu.Lock()
						failedProclaims++
						mu.Unlock()
						continue
					}
					time.Sleep(20 * time.Millisecond) // earlier failed Proclaims may land meanwhile
					e, err := direct.Get(context.Background(), term.Key())
					if err == nil && len(e.Kvs) == 1 && e.Kvs[0].CreateRevision == int64(term.Token()) &&
						!strings.Contains(string(e.Kvs[0].Value), `"data":"`+v+`"`) {
						mu.Lock()
						violations = append(violations, fmt.Sprintf("term %d: after Proclaim(%s) succeeded the key reads %s", term.Token(), v, e.Kvs[0].Value))
						mu.Unlock()
					}
				}
				mu.Lock()
				active = nil
				mu.Unlock()
				rctx, rcancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
				term.Resign(rctx)
				rcancel()
			}
		})
	}
	wg.Wait()
	in.Heal()
	t.Logf("%d terms, %d proclaims (%d failed), faults %v", terms, proclaims, failedProclaims, in.Counts())
	if len(violations) > 0 {
		t.Fatalf("%d violations, e.g. %s", len(violations), violations[0])
	}
	if terms < 10 {
		t.Fatalf("only %d terms: the test proved little", terms)
	}
	waitKeys(t, direct, keysOf(t).Elections(), 0)
	o.check(t, "observer under faults")
	ocancel()
}
