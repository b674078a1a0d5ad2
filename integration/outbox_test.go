package integration_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/etcdlock/etcdlocktest"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// TestOutboxPausedDispatcher is issue 49's "done means", with real
// processes and servers: etcd for the dispatcher's lock (2 s lease),
// PostgreSQL for the outbox (fence/postgres), an HTTP receiver in this
// process that notes every request, which dispatcher sent it and when.
//
// Dispatcher A, a separate process, delivers the first effects through an
// outbox.HTTPSender; the receiver holds A's sixth request until A is
// frozen with SIGSTOP, so that A is paused with one send under way, past
// its lease. Dispatcher B, in this process, takes the lock over and
// delivers the rest, within TTL + 1 s of A's lease's expiry; more effects
// are recorded and B delivers them too. Then A is resumed (SIGCONT): it
// must send nothing new after the pause (the one request under way aside)
// and mark nothing (delivered_by never gets A's token after the
// takeover), and every effect must be delivered and settled, those A had
// not marked by B's token. The control, A as a loop that sends and marks
// with a plain UPDATE (no lock check, no fenced settle), sends and marks
// after its resumption.
func TestOutboxPausedDispatcher(t *testing.T) {
	testenv.Long(t, "each case waits out a 2 s lease")
	t.Parallel()
	etcd := etcdlocktest.New(t)
	pg := pgtest.New(t)
	for _, unfenced := range []bool{false, true} {
		name := "Dispatcher"
		if unfenced {
			name = "control: unfenced loop"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pausedDispatcher(t, etcd, pg.NewDatabase(t), unfenced)
		})
	}
}

// pausedDispatcher runs one case of TestOutboxPausedDispatcher.
func pausedDispatcher(t *testing.T, etcd *etcdlocktest.Server, dsn string, unfenced bool) {
	pool, ob := outboxPool(t, dsn)
	rcv := newOutboxReceiver(6)
	srv := httptest.NewServer(rcv)
	t.Cleanup(srv.Close)
	t.Cleanup(rcv.open) // before srv.Close, which waits for the held request
	var keys []string
	for seq := range int64(6) {
		keys = append(keys, recordEffect(t, pool, ob, "acct-1", seq, srv.URL), recordEffect(t, pool, ob, "acct-2", seq, srv.URL))
	}

	cfg := outboxWorkerConfig{Etcd: etcd.Endpoints(), DSN: dsn, Lock: "outbox-dispatcher-" + strconv.FormatBool(unfenced), TTL: livenessTTL, Unfenced: unfenced}
	a := startWorker(t, outboxWorkerEnv, cfg)
	tokA := ready(t, a)
	var underWay string
	select {
	case underWay = <-rcv.gated:
	case <-time.After(30 * time.Second):
		t.Fatalf("A's sixth request never came; A's output: %s", a.Output())
	}
	pause(t, a)
	pausedAt := time.Now()
	rcv.open() // answered; A reads it once it runs again
	markedByA := markedBy(t, pool, tokA)
	t.Logf("A (token %d) paused with %s under way, %d effects marked", tokA, underWay, len(markedByA))

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	tokB, stopB := startDispatcherB(t, ctx, etcd.Endpoints(), cfg.Lock, ob)
	defer stopB()
	lockedAt := time.Now()
	if tokB <= tokA {
		t.Fatalf("B's token %d is not above A's %d", tokB, tokA)
	}
	poll.Until(t, "B to settle every effect", func() bool { return pendingCount(t, pool) == 0 })
	done, bound := time.Now(), pausedAt.Add(2*livenessTTL+time.Second)
	t.Logf("B (token %d) locked %v after A's pause, settled the rest %v after that",
		tokB, lockedAt.Sub(pausedAt).Round(time.Millisecond), done.Sub(lockedAt).Round(time.Millisecond))
	if done.After(bound) {
		t.Fatalf("B settled the rest %v after A's pause, want within TTL + 1 s of its lease's expiry (%v)", done.Sub(pausedAt), bound.Sub(pausedAt))
	}
	for seq := int64(6); seq < 8; seq++ {
		keys = append(keys, recordEffect(t, pool, ob, "acct-1", seq, srv.URL), recordEffect(t, pool, ob, "acct-2", seq, srv.URL))
	}
	poll.Until(t, "B to settle the later effects", func() bool { return pendingCount(t, pool) == 0 })

	resumedAt := time.Now()
	if err := a.Resume(); err != nil {
		t.Fatal(err)
	}
	if unfenced {
		poll.Until(t, "the unfenced A to mark an effect after the takeover", func() bool {
			return len(markedBy(t, pool, tokA)) > len(markedByA)
		})
	} else if got := next(t, a, "RESULT"); !strings.Contains(got, fence.ErrLockLost.Error()) {
		t.Fatalf("A's run once resumed: got %q, want an error saying %q", got, fence.ErrLockLost)
	} else {
		t.Logf("A's run once resumed: %s", got)
	}
	problems := outboxProblems(t, pool, rcv, keys, tokA, tokB, markedByA, underWay, pausedAt, resumedAt)
	if unfenced {
		joined := strings.Join(problems, "\n")
		if !strings.Contains(joined, "after its resumption") || !strings.Contains(joined, "A's token marks") {
			t.Fatalf("control: got problems %q, want A's new sends after its resumption and its marks after the takeover", problems)
		}
		t.Logf("control: %s", strings.Join(problems, "; "))
		return
	}
	if len(problems) > 0 {
		t.Fatalf("paused dispatcher:\n%s", strings.Join(problems, "\n"))
	}
}

// outboxProblems lists what broke the outbox's promise: A's sends after
// its pause other than the one under way (and any A began after its
// resumption), A's marks after the takeover, effects never delivered, and
// effects not settled by B that A had not marked.
func outboxProblems(t *testing.T, pool *pgxpool.Pool, rcv *outboxReceiver, keys []string, tokA, tokB fence.Token,
	markedByA []string, underWay string, pausedAt, resumedAt time.Time) []string {
	t.Helper()
	var problems []string
	late := 0
	for _, d := range rcv.deliveries() {
		if d.from == os.Getpid() || d.at.Before(pausedAt) {
			continue
		}
		if late++; late > 1 || d.key != underWay {
			problems = append(problems, fmt.Sprintf("A sent %s %v after its pause (%v after its resumption), beside %s under way",
				d.key, d.at.Sub(pausedAt).Round(time.Millisecond), d.at.Sub(resumedAt).Round(time.Millisecond), underWay))
		}
	}
	if now := markedBy(t, pool, tokA); !slices.Equal(now, markedByA) {
		problems = append(problems, fmt.Sprintf("A's token marks %v after the takeover, %v before", now, markedByA))
	}
	got := rcv.keys()
	settled := settledBy(t, pool)
	for _, k := range keys {
		switch {
		case !got[k]:
			problems = append(problems, "never delivered: "+k)
		case slices.Contains(markedByA, k):
		case settled[k] != tokB:
			problems = append(problems, fmt.Sprintf("%s settled by token %d, want B's %d", k, settled[k], tokB))
		}
	}
	return problems
}

// startDispatcherB takes the lock (once A's lease has expired) and runs
// dispatcher B over ob until stop, which checks how its run ended.
func startDispatcherB(t *testing.T, ctx context.Context, endpoints []string, lockName string, ob *postgres.Outbox) (fence.Token, func()) {
	t.Helper()
	locks, stopLocks, err := workerLocksTTL(ctx, endpoints, livenessTTL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stopLocks)
	lock, err := locks.Lock(ctx, lockName)
	if err != nil {
		t.Fatalf("B's Lock: got %v, want nil", err)
	}
	t.Cleanup(func() { lock.Unlock(context.WithoutCancel(ctx)) })
	sender, closeSender, err := pidSender()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeSender)
	d, err := newTestDispatcher(ob, sender)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	ended := make(chan error, 1)
	go func() { ended <- d.Run(ctx, lock, outbox.All) }()
	return lock.Token(), func() {
		cancel()
		if err := <-ended; !errors.Is(err, context.Canceled) {
			t.Errorf("B's run: got %v, want context.Canceled", err)
		}
	}
}

// outboxPool connects to dsn and creates the outbox and fence tables.
func outboxPool(t *testing.T, dsn string) (*pgxpool.Pool, *postgres.Outbox) {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	ob, err := postgres.NewOutbox(pool)
	if err != nil {
		t.Fatal(err)
	}
	if err := ob.CreateTable(t.Context()); err != nil {
		t.Fatal(err)
	}
	return pool, ob
}

// recordEffect records effect seq of resource, to url, in a fenced
// transaction of its own with token 1, and returns its key.
func recordEffect(t *testing.T, pool *pgxpool.Pool, ob *postgres.Outbox, resource string, seq int64, url string) string {
	t.Helper()
	e := outbox.Effect{Resource: resource, Token: 1, Seq: seq, Destination: url, Payload: []byte(resource)}
	err := postgres.RunInTx(t.Context(), pool, resource, e.Token, func(tx pgx.Tx) error {
		return ob.Record(t.Context(), tx, e)
	})
	if err != nil {
		t.Fatalf("recording %s: %v", e.Key(), err)
	}
	return e.Key()
}

// markedBy returns the keys of the effects settled by token tok, sorted.
func markedBy(t *testing.T, pool *pgxpool.Pool, tok fence.Token) []string {
	t.Helper()
	var keys []string
	for k, by := range settledBy(t, pool) {
		if by == tok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// settledBy returns the token in each settled effect's delivered_by, by
// key.
func settledBy(t *testing.T, pool *pgxpool.Pool) map[string]fence.Token {
	t.Helper()
	rows, _ := pool.Query(t.Context(), "SELECT resource, token, seq, delivered_by FROM fencelock_outbox WHERE settled_at IS NOT NULL")
	out := map[string]fence.Token{}
	var res string
	var tok, seq, by int64
	_, err := pgx.ForEachRow(rows, []any{&res, &tok, &seq, &by}, func() error {
		out[outbox.Key(res, fence.Token(tok), seq)] = fence.Token(by)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func pendingCount(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM fencelock_outbox WHERE settled_at IS NULL").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
