package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

// heldRun is a fencelock run whose child writes its environment's
// FENCELOCK_SLOT and FENCELOCK_TOKEN to started once it runs, and exits
// once release exists.
type heldRun struct {
	cmd              *exec.Cmd
	started, release string
}

func startHeld(t *testing.T, args ...string) *heldRun {
	t.Helper()
	dir := t.TempDir()
	r := &heldRun{started: filepath.Join(dir, "started"), release: filepath.Join(dir, "release")}
	args = append(args, "--", "sh", "-c",
		`echo "$FENCELOCK_SLOT $FENCELOCK_TOKEN" > `+r.started+`.tmp; mv `+r.started+`.tmp `+r.started+
			`; while [ ! -e `+r.release+` ]; do sleep 0.02; done`)
	r.cmd = fencelock(t, nil, append([]string{"run"}, args...)...)
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if r.cmd.ProcessState == nil {
			r.cmd.Process.Kill()
			r.cmd.Wait()
		}
	})
	return r
}

func (r *heldRun) running() bool { _, err := os.Stat(r.started); return err == nil }

// slotAndToken returns what the child was given; "" for no slot.
func (r *heldRun) slotAndToken(t *testing.T) (string, int64) {
	t.Helper()
	f := strings.Fields(waitFile(t, r.started, 10*time.Second))
	tok, err := strconv.ParseInt(f[len(f)-1], 10, 64)
	if err != nil {
		t.Fatalf("child's FENCELOCK_TOKEN: %q", f)
	}
	if len(f) == 1 {
		return "", tok
	}
	return f[0], tok
}

// end lets the child exit and checks that fencelock exits 0.
func (r *heldRun) end(t *testing.T) {
	t.Helper()
	os.WriteFile(r.release, []byte("x"), 0o644)
	if code := waitExit(t, r.cmd, 10*time.Second); code != 0 {
		t.Fatalf("run: exit %d, want 0", code)
	}
}

// count returns how many of runs run.
func count(runs []*heldRun) int {
	n := 0
	for _, r := range runs {
		if r.running() {
			n++
		}
	}
	return n
}

// TestRunPermitsEnvironment: a run --permits child gets its permit's slot
// as FENCELOCK_SLOT and the slot's token as FENCELOCK_TOKEN, as the
// library reads them, and the permit is released when it exits.
func TestRunPermitsEnvironment(t *testing.T) {
	t.Parallel()
	locks, _ := locker(t)
	r := startHeld(t, "--permits", "2", "--metadata", "batch", "pool")
	slot, tok := r.slotAndToken(t)
	sq, err := locks.InspectSemaphore(t.Context(), "pool")
	if err != nil || sq.Holder == nil || sq.Permits != 2 {
		t.Fatalf("InspectSemaphore while the child runs: %+v, %v", sq, err)
	}
	if h := sq.Holder; slot != strconv.Itoa(h.Slot) || tok != int64(h.Token) || h.Data != "batch" {
		t.Fatalf("child's FENCELOCK_SLOT, FENCELOCK_TOKEN: got %s, %d; want %d, %d (data %q)", slot, tok, h.Slot, h.Token, h.Data)
	}
	r.end(t)
	if sq, err := locks.InspectSemaphore(t.Context(), "pool"); err != nil || len(sq.Holders)+len(sq.Waiters) != 0 {
		t.Fatalf("after the run: %+v (%v), want no one", sq, err)
	}
}

// TestRunPermitsConcurrency: with --permits 2, two runs' children run at
// once and a third waits until one of them ends, then takes its slot; with
// --permits 1 (the control) the second already waits.
func TestRunPermitsConcurrency(t *testing.T) {
	t.Parallel()
	for _, permits := range []int{2, 1} {
		t.Run(fmt.Sprintf("permits %d", permits), func(t *testing.T) {
			locks, _ := locker(t)
			var runs []*heldRun
			for range permits + 1 {
				runs = append(runs, startHeld(t, "--permits", strconv.Itoa(permits), "pool"))
				// queue them in this order
				poll.Until(t, "the run queued", func() bool {
					sq, err := locks.InspectSemaphore(t.Context(), "pool")
					return err == nil && len(sq.Holders)+len(sq.Waiters) == len(runs)
				})
			}
			poll.Until(t, fmt.Sprintf("%d children running", permits), func() bool { return count(runs) == permits })
			last := runs[permits]
			sq, err := locks.InspectSemaphore(t.Context(), "pool")
			if err != nil || len(sq.Waiters) != 1 || last.running() {
				t.Fatalf("with %d running: semaphore %+v (%v), last child running %v; want it waiting", permits, sq, err, last.running())
			}
			slots := map[string]bool{}
			for _, r := range runs[:permits] {
				slot, _ := r.slotAndToken(t)
				slots[slot] = true
			}
			if len(slots) != permits {
				t.Fatalf("slots of the running children: got %v, want %d distinct", slots, permits)
			}
			freed, _ := runs[0].slotAndToken(t)
			runs[0].end(t)
			if slot, _ := last.slotAndToken(t); slot != freed {
				t.Fatalf("the waiting run's slot: got %s, want the freed %s", slot, freed)
			}
			for _, r := range runs[1:] {
				r.end(t)
			}
		})
	}
}

// TestRunReadShares: two run --read children run at once; a plain run (a
// writer) waits for them, and holds back a reader that comes after it;
// once the readers end the writer runs alone, then the last reader. The
// control: two plain runs do not run at once.
func TestRunReadShares(t *testing.T) {
	t.Parallel()
	locks, _ := locker(t)
	queued := func(n int) {
		t.Helper()
		poll.Until(t, fmt.Sprintf("%d in the queue", n), func() bool {
			q, err := locks.Inspect(t.Context(), "cfg")
			return err == nil && len(q.Holders)+len(q.Waiters) == n
		})
	}
	r1 := startHeld(t, "--read", "cfg")
	queued(1)
	r2 := startHeld(t, "--read", "cfg")
	poll.Until(t, "both readers running", func() bool { return r1.running() && r2.running() })
	w := startHeld(t, "cfg")
	queued(3)
	r3 := startHeld(t, "--read", "cfg")
	queued(4)
	q, err := locks.Inspect(t.Context(), "cfg")
	if err != nil || len(q.Holders) != 2 || !q.Holders[0].Shared || !q.Holders[1].Shared || len(q.Waiters) != 2 || q.Waiters[0].Shared {
		t.Fatalf("queue: %+v (%v), want 2 readers holding, the writer then a reader waiting", q, err)
	}
	if w.running() || r3.running() {
		t.Fatalf("writer running %v, late reader running %v; want both waiting", w.running(), r3.running())
	}
	_, t1 := r1.slotAndToken(t)
	r1.end(t)
	r2.end(t)
	_, tw := w.slotAndToken(t)
	if tw <= t1 || r3.running() {
		t.Fatalf("writer's token %d (reader's %d), late reader running %v; want a greater token and the reader waiting", tw, t1, r3.running())
	}
	w.end(t)
	r3.slotAndToken(t)
	r3.end(t)

	t.Run("control", func(t *testing.T) {
		locks, _ := locker(t)
		a := startHeld(t, "cfg")
		a.slotAndToken(t)
		b := startHeld(t, "cfg")
		poll.Until(t, "the second run queued", func() bool {
			q, err := locks.Inspect(t.Context(), "cfg")
			return err == nil && len(q.Waiters) == 1
		})
		if b.running() {
			t.Fatal("two plain runs at once")
		}
		a.end(t)
		b.slotAndToken(t)
		b.end(t)
	})
}

// TestRunPermitsNotAcquired: --try and --wait with every permit held exit
// 75 naming the holders; a run with another --permits than the
// semaphore's users exits 78 saying theirs.
func TestRunPermitsNotAcquired(t *testing.T) {
	t.Parallel()
	locks, _ := locker(t, etcdlock.WithOwner("host-7/4121"))
	sm, _ := locks.Semaphore("full", 1)
	l, err := sm.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(context.Background())
	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"try", []string{"--try", "--permits", "1"}, exitNotAcquired, []string{"every permit is held", "host-7/4121", l.Token().String()}},
		{"wait", []string{"--wait", "300ms", "--permits", "1"}, exitNotAcquired, []string{"not acquired within --wait 300ms", "host-7/4121"}},
		{"other permits", []string{"--permits", "2"}, exitPermits, []string{`semaphore "full" is in use with 1 permits, not --permits 2`}},
		{"other permits, try", []string{"--try", "--permits", "3"}, exitPermits, []string{"not --permits 3"}},
	}
	outer := t // the prefix is the test's
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append(append([]string{"run"}, tt.args...), "full", "--", "true")
			code, _, stderr := result(t, fencelock(outer, nil, args...))
			if code != tt.code || strings.Count(stderr, "\n") != 1 {
				t.Fatalf("exit %d, stderr %q; want %d and one line", code, stderr, tt.code)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q: want it to contain %q", stderr, w)
				}
			}
		})
	}
	if l.Err() != nil {
		t.Fatalf("the holder after refused runs: %v", l.Err())
	}
}

// TestStatusReadersAndSemaphores: status shows every reader holding a lock
// and a semaphore's holders with their slots and permit tokens, in the
// table and in --json, whose earlier fields stay as they were.
func TestStatusReadersAndSemaphores(t *testing.T) {
	t.Parallel()
	var readers, permits []*etcdlock.Lock
	for _, owner := range []string{"r1", "r2"} {
		c, _ := locker(t, etcdlock.WithOwner(owner))
		r, err := c.RLock(t.Context(), "cfg")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Unlock(context.Background())
		readers = append(readers, r)
		sm, _ := c.Semaphore("pool", 2)
		p, err := sm.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer p.Unlock(context.Background())
		permits = append(permits, p)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w, _ := locker(t, etcdlock.WithOwner("w"))
	done := make(chan struct{}, 2)
	go func() { w.Lock(ctx, "cfg"); done <- struct{}{} }()
	go func() { sm, _ := w.Semaphore("pool", 2); sm.Acquire(ctx); done <- struct{}{} }()
	defer func() { cancel(); <-done; <-done }()
	poll.Until(t, "w waiting for both", func() bool {
		q, err := w.Inspect(t.Context(), "cfg")
		sq, serr := w.InspectSemaphore(t.Context(), "pool")
		return err == nil && serr == nil && len(q.Waiters) == 1 && len(sq.Waiters) == 1
	})

	code, out, stderr := result(t, fencelock(t, nil, "status", "--json"))
	if code != 0 {
		t.Fatalf("status --json: exit %d: %s", code, stderr)
	}
	var st statusJSON
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json does not parse: %v\n%s", err, out)
	}
	if len(st.Locks) != 1 || len(st.Semaphores) != 1 || len(st.Elections) != 0 {
		t.Fatalf("status --json: got %d locks, %d semaphores, %d elections; want 1, 1, 0:\n%s", len(st.Locks), len(st.Semaphores), len(st.Elections), out)
	}
	lq, sq := st.Locks[0], st.Semaphores[0]
	if lq.Holder == nil || len(lq.Holders) != 2 || *lq.Holder != lq.Holders[0] || len(lq.Waiters) != 1 || lq.Waiters[0].Shared || lq.Waiters[0].Owner != "w" {
		t.Fatalf("lock cfg: got %+v, want 2 readers holding, w waiting", lq)
	}
	for i, r := range readers {
		if h := lq.Holders[i]; !h.Shared || h.Token != int64(r.Token()) || h.Slot != -1 {
			t.Errorf("reader %d: got %+v, want shared, token %d, slot -1", i, h, r.Token())
		}
	}
	if sq.Name != "pool" || sq.Permits != 2 || len(sq.Holders) != 2 || len(sq.Waiters) != 1 || sq.Waiters[0].Slot != -1 {
		t.Fatalf("semaphore pool: got %+v, want 2 permits, 2 holders, 1 waiter", sq)
	}
	for i, p := range permits {
		if h := sq.Holders[i]; h.Token != int64(p.Token()) || h.Slot != p.Slot() || h.Shared {
			t.Errorf("permit %d: got %+v, want token %d, slot %d", i, h, p.Token(), p.Slot())
		}
	}
	var raw map[string][]map[string]any
	json.Unmarshal([]byte(out), &raw)
	for _, k := range []string{"key", "token", "rev", "lease", "ttl_seconds", "owner", "acquired", "data", "shared", "slot"} {
		if _, ok := raw["locks"][0]["holder"].(map[string]any)[k]; !ok {
			t.Errorf("a lock's holder in --json has no %q", k)
		}
	}

	code, out, stderr = result(t, fencelock(t, nil, "status"))
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, stderr)
	}
	var rows []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		f := strings.Fields(line)
		rows = append(rows, strings.Join(f[:4], " "))
	}
	want := []string{"lock cfg reader " + readers[0].Token().String(), "lock cfg reader " + readers[1].Token().String(),
		"lock cfg waiter " + strconv.FormatInt(lq.Waiters[0].Token, 10)}
	for _, p := range permits {
		want = append(want, fmt.Sprintf("semaphore pool slot-%d %d", p.Slot(), p.Token()))
	}
	want = append(want, "semaphore pool waiter "+strconv.FormatInt(sq.Waiters[0].Token, 10))
	if !slices.Equal(rows, want) {
		t.Fatalf("status rows (KIND NAME ROLE TOKEN):\ngot  %q\nwant %q\n%s", rows, want, out)
	}
	t.Logf("status output:\n%s", out)
}

// TestBreakSemaphoreAndReader: break --semaphore frees a stuck run's
// permit by the token its child was given (the run exits 79 and the next
// run gets the slot); a wrong token, or the permit's token without
// --semaphore, deletes nothing and says so; break frees one reader of
// several.
func TestBreakSemaphoreAndReader(t *testing.T) {
	t.Parallel()
	locks, _ := locker(t)
	stuck := startHeld(t, "--permits", "1", "one")
	slot, tok := stuck.slotAndToken(t)
	token := strconv.FormatInt(tok, 10)
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"wrong token", []string{"break", "--semaphore", "one", "--token", strconv.FormatInt(tok+100, 10)}, "nothing was deleted"},
		{"no --semaphore", []string{"break", "one", "--token", token}, fmt.Sprintf(`a semaphore "one" has a permit's holder with token %d: use --semaphore`, tok)},
	} {
		code, _, stderr := result(t, fencelock(t, nil, tt.args...))
		if code != exitNotAcquired || !strings.Contains(stderr, tt.want) {
			t.Errorf("%s: exit %d, stderr %q; want %d and %q", tt.name, code, stderr, exitNotAcquired, tt.want)
		}
	}
	if !stuck.running() || stuck.cmd.ProcessState != nil {
		t.Fatal("the run ended after refused breaks")
	}
	code, out, stderr := result(t, fencelock(t, nil, "break", "--semaphore", "one", "--token", token))
	if code != 0 || !strings.Contains(out, "slot "+slot) || !strings.Contains(out, "token "+token) {
		t.Fatalf("break --semaphore: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	if code := waitExit(t, stuck.cmd, 10*time.Second); code != exitLost {
		t.Fatalf("the broken run: exit %d, want %d", code, exitLost)
	}
	next := startHeld(t, "--try", "--permits", "1", "one")
	if s, nt := next.slotAndToken(t); s != slot || nt <= tok {
		t.Fatalf("next run: slot %s token %d, want slot %s and a token above %d", s, nt, slot, tok)
	}
	next.end(t)

	r1, r2 := startHeld(t, "--read", "cfg"), startHeld(t, "--read", "cfg")
	_, t1 := r1.slotAndToken(t)
	r2.slotAndToken(t)
	if code, _, stderr := result(t, fencelock(t, nil, "break", "cfg", "--token", strconv.FormatInt(t1, 10))); code != 0 {
		t.Fatalf("break of a reader: exit %d, %s", code, stderr)
	}
	if code := waitExit(t, r1.cmd, 10*time.Second); code != exitLost {
		t.Fatalf("the broken reader: exit %d, want %d", code, exitLost)
	}
	if q, err := locks.Inspect(t.Context(), "cfg"); err != nil || len(q.Holders) != 1 || r2.cmd.ProcessState != nil {
		t.Fatalf("after breaking one reader: %+v (%v); want the other still reading", q, err)
	}
	r2.end(t)
}

// TestStatusGroup checks that status shows a group: its share, members,
// and each partition's owner with the partition's token.
func TestStatusGroup(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	tokens := sync.Map{} // partition -> token, of the works running now
	for _, owner := range []string{"w1", "w2"} {
		c, _ := locker(t, etcdlock.WithOwner(owner))
		g, err := c.Group("orders", 4)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			g.Join(ctx, func(ctx context.Context, p *etcdlock.Partition) error {
				tokens.Store(p.Index(), p.Token())
				<-ctx.Done()
				return nil
			})
		})
	}
	admin, _ := locker(t)
	poll.Until(t, "the group settled", func() bool {
		st, err := admin.InspectGroup(t.Context(), "orders")
		return err == nil && len(st.Members) == 2 && st.Moves == 0
	})
	code, out, stderr := result(t, fencelock(t, nil, "status", "--json", "orders"))
	if code != 0 {
		t.Fatalf("status --json orders: exit %d: %s", code, stderr)
	}
	var st statusJSON
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json does not parse: %v\n%s", err, out)
	}
	if len(st.Groups) != 1 || len(st.Locks) != 0 {
		t.Fatalf("status --json orders: got %d groups, %d locks; want 1, 0:\n%s", len(st.Groups), len(st.Locks), out)
	}
	gj := st.Groups[0]
	if gj.Name != "orders" || gj.Partitions != 4 || gj.Moves != 0 || len(gj.Members) != 2 || len(gj.Owners) != 4 {
		t.Fatalf("group: got %+v", gj)
	}
	owners := map[string]int{}
	for _, p := range gj.Owners {
		tok, _ := tokens.Load(p.Partition)
		if p.Owner == nil || tok == nil || p.Owner.Token != int64(tok.(fence.Token)) {
			t.Errorf("partition %d: owner %+v, want the token its work has (%v)", p.Partition, p.Owner, tok)
			continue
		}
		owners[p.Owner.Owner]++
	}
	if owners["w1"] != 2 || owners["w2"] != 2 {
		t.Errorf("partitions per owner: %v, want 2 each", owners)
	}
	code, out, stderr = result(t, fencelock(t, nil, "status", "orders"))
	if code != 0 {
		t.Fatalf("status orders: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"group  orders  share", "4 partitions, 2 members, 0 moves pending", "member", "p-0", "p-3"} {
		if !strings.Contains(out, want) {
			t.Errorf("status orders: no %q in\n%s", want, out)
		}
	}
}
