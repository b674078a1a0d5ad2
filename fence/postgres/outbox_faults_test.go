package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/oteltest"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

// failTracer is a pgx tracer that records the statements and batches that
// ended in an error, and counts batches.
type failTracer struct {
	mu      sync.Mutex
	failed  []string
	batches int
}

type sqlKey struct{}

func (f *failTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, sqlKey{}, d.SQL)
}

func (f *failTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	if d.Err != nil {
		f.mu.Lock()
		defer f.mu.Unlock()
		sql, _ := ctx.Value(sqlKey{}).(string)
		f.failed = append(f.failed, sql+": "+d.Err.Error())
	}
}

func (f *failTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.batches++
	return ctx
}

func (f *failTracer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	if d.Err != nil {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.failed = append(f.failed, "batch "+d.SQL+": "+d.Err.Error())
	}
}

func (f *failTracer) TraceBatchEnd(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchEndData) {
	if d.Err != nil {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.failed = append(f.failed, "batch end: "+d.Err.Error())
	}
}

func (f *failTracer) take() (failed []string, batches int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	failed, batches = f.failed, f.batches
	f.failed, f.batches = nil, 0
	return failed, batches
}

// poolOn returns a second pool on base's database, its connections
// traced by tr when not nil and dialed through d when not nil.
func poolOn(t *testing.T, base *pgxpool.Pool, d *resetter, tr pgx.QueryTracer) *pgxpool.Pool {
	t.Helper()
	cfg := base.Config().Copy()
	if d != nil {
		d.dial = cfg.ConnConfig.DialFunc
		cfg.ConnConfig.DialFunc = d.Dial
	}
	cfg.ConnConfig.Tracer = tr
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// resetter dials as the pool would (TCP or a Unix socket alike) and can
// reset every connection it dialed, as a connection reset looks to pgx.
type resetter struct {
	dial  pgconn.DialFunc
	mu    sync.Mutex // guards conns and lose
	conns []net.Conn
	lose  chan struct{} // set: lose the next COMMIT's reply until closed
}

func (r *resetter) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := r.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c = &replyLoser{Conn: c, r: r}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.conns = append(r.conns, c)
	return c, nil
}

// loseCommitReply makes the next COMMIT reach the server while its reply
// never reaches pgx: reads on that connection wait for release, then
// fail, as after a connection lost with the reply in flight.
func (r *resetter) loseCommitReply() (release func()) {
	ch := make(chan struct{})
	r.mu.Lock()
	r.lose = ch
	r.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

// replyLoser is a connection whose reads stop once it has sent the COMMIT
// its resetter was told to lose the reply of.
type replyLoser struct {
	net.Conn
	r    *resetter
	lost atomic.Pointer[chan struct{}]
}

func (c *replyLoser) Write(b []byte) (int, error) {
	c.r.mu.Lock()
	if c.r.lose != nil && bytes.Contains(bytes.ToLower(b), []byte("commit")) {
		ch := c.r.lose
		c.lost.Store(&ch)
		c.r.lose = nil
	}
	c.r.mu.Unlock()
	return c.Conn.Write(b)
}

func (c *replyLoser) Read(b []byte) (int, error) {
	if ch := c.lost.Load(); ch != nil {
		<-*ch
		_ = c.Conn.Close()
		return 0, io.ErrUnexpectedEOF
	}
	return c.Conn.Read(b)
}

// Reset closes every connection dialed so far.
func (r *resetter) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		_ = c.Close()
	}
	r.conns = nil
}

// resettable returns a pool on base's database whose connections r resets.
func resettable(t *testing.T, base *pgxpool.Pool) (*pgxpool.Pool, *resetter) {
	t.Helper()
	r := &resetter{}
	return poolOn(t, base, r, nil), r
}

// wantIdlePool fails unless pool has no acquired connection (polling: a
// release may finish after RunInTx returned).
func wantIdlePool(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	poll.Until(t, "the pool's connections to be released", func() bool { return pool.Stat().AcquiredConns() == 0 })
}

// effectsAndCredit counts the effects and the acct balance, read directly.
func effectsAndCredit(t *testing.T, pool *pgxpool.Pool) (effects int, balance int64) {
	t.Helper()
	if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM fencelock_outbox").Scan(&effects); err != nil {
		t.Fatal(err)
	}
	balance, _, _ = account(t, pool, "acct")
	return effects, balance
}

// TestOutboxRecordTracerAndPool: on the common path (no Record) and on the
// Record path, the pool's pgx tracer sees no failed statement, fencelock's
// metric counts the write accepted, connections go back to the pool idle
// and are reused, not dialed anew.
func TestOutboxRecordTracerAndPool(t *testing.T) {
	base, ob := newOutbox(t)
	tr := &failTracer{}
	pool := poolOn(t, base, nil, tr)
	sdk := oteltest.New(t)
	fences, err := postgres.NewFences(pgx.Identifier{postgres.DefaultFenceTable},
		postgres.WithMeterProvider(sdk.Meters), postgres.WithTracerProvider(sdk.Tracers))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, tt := range []struct {
		name    string
		record  bool
		batches int
	}{{"no Record", false, 0}, {"Record", true, 0}} {
		t.Run(tt.name, func(t *testing.T) {
			start := pool.Stat().NewConnsCount()
			for i := range 100 {
				err := fences.RunInTx(ctx, pool, "acct", 1, func(tx pgx.Tx) error {
					if err := credit(ctx, tx, "acct"); err != nil {
						return err
					}
					if !tt.record {
						return nil
					}
					return ob.Record(ctx, tx, effect("acct", 1, int64(i)))
				})
				if err != nil {
					t.Fatalf("RunInTx %d: got %v, want nil", i, err)
				}
				if n := pool.Stat().AcquiredConns(); n != 0 {
					t.Fatalf("after RunInTx %d: %d acquired connections, want 0", i, n)
				}
			}
			failed, batches := tr.take()
			if len(failed) != 0 {
				t.Errorf("the pgx tracer saw %d failed statements, want none; first: %s", len(failed), failed[0])
			}
			if batches != tt.batches {
				t.Errorf("batches: got %d, want %d", batches, tt.batches)
			}
			if n := pool.Stat().NewConnsCount() - start; n > 1 {
				t.Errorf("connections dialed over 100 transactions: got %d, want at most 1 (connections destroyed on release)", n)
			}
		})
	}
	got := sdk.Sum(t, "fencelock.writes", attribute.String("fencelock.operation", "tx"), attribute.String("fencelock.outcome", "accepted"))
	if got != 200 {
		t.Errorf("fencelock.writes tx accepted: got %d, want 200", got)
	}
	if n, bal := effectsAndCredit(t, pool); n != 100 || bal != 200 {
		t.Errorf("effects %d, balance %d: want 100, 200", n, bal)
	}
}

// TestOutboxRecordFnFails: fn returning an error, or panicking, after a
// Record sends nothing more (no COMMIT), commits nothing and leaves
// the pool usable.
func TestOutboxRecordFnFails(t *testing.T) {
	base, ob := newOutbox(t)
	tr := &failTracer{}
	pool := poolOn(t, base, nil, tr)
	ctx := t.Context()
	boom := errors.New("boom")
	fn := func(panics bool) func(pgx.Tx) error {
		return func(tx pgx.Tx) error {
			if err := credit(ctx, tx, "acct"); err != nil {
				return err
			}
			if err := ob.Record(ctx, tx, effect("acct", 1, 0)); err != nil {
				return err
			}
			if panics {
				panic(boom)
			}
			return boom
		}
	}
	if err := postgres.RunInTx(ctx, pool, "acct", 1, fn(false)); !errors.Is(err, boom) {
		t.Fatalf("fn's error: got %v, want boom", err)
	}
	func() {
		defer func() {
			if r := recover(); r != boom {
				t.Fatalf("panic: got %v, want boom", r)
			}
		}()
		_ = postgres.RunInTx(ctx, pool, "acct", 1, fn(true))
	}()
	if _, batches := tr.take(); batches != 0 {
		t.Errorf("batches sent: got %d, want 0", batches)
	}
	wantIdlePool(t, pool)
	if n, bal := effectsAndCredit(t, pool); n != 0 || bal != 0 {
		t.Fatalf("effects %d, balance %d: want 0, 0", n, bal)
	}
	if err := recordFenced(pool, ob)(ctx, fence.Claim{Resource: "acct", Token: 1}, nil); err != nil {
		t.Fatalf("the next RunInTx: %v", err)
	}
}

// recordOne is a fenced transaction on acct with token tok that credits
// it and records effect (acct, tok, 0); pause, when not nil, runs between
// Record and the end of fn.
func recordOne(ctx context.Context, pool *pgxpool.Pool, ob *postgres.Outbox, tok fence.Token, pause func()) error {
	return postgres.RunInTx(ctx, pool, "acct", tok, func(tx pgx.Tx) error {
		if err := credit(ctx, tx, "acct"); err != nil {
			return err
		}
		if err := ob.Record(ctx, tx, effect("acct", tok, 0)); err != nil {
			return err
		}
		if pause != nil {
			pause()
		}
		return nil
	})
}

// wantIff fails unless the effect landed iff the credit did; it returns
// whether they did.
func wantIff(t *testing.T, pool *pgxpool.Pool) bool {
	t.Helper()
	n, bal := effectsAndCredit(t, pool)
	if int64(n) != bal {
		t.Fatalf("effects %d, balance %d: want the effect iff the credit", n, bal)
	}
	return n > 0
}

// TestOutboxRecordCommitReplyLost: the COMMIT of a transaction that
// recorded an effect lands but its reply is lost: RunInTx says the outcome
// is unknown, and the caller's retry of the same write (same effect, same
// Seq) fails with outbox.ErrDuplicate, its credit not applied twice and
// the effect recorded once. The control: a new Seq records a second one.
func TestOutboxRecordCommitReplyLost(t *testing.T) {
	base, ob := newOutbox(t)
	pool, conns := resettable(t, base)
	ctx := t.Context()
	release := conns.loseCommitReply()
	defer release()
	done := make(chan error, 1)
	go func() { done <- recordOne(ctx, pool, ob, 1, nil) }()
	poll.Until(t, "the COMMIT whose reply is lost to land", func() bool {
		n, _ := effectsAndCredit(t, base)
		return n == 1
	})
	release()
	if err := <-done; !errors.Is(err, fence.ErrUnknownOutcome) {
		t.Fatalf("RunInTx whose COMMIT reply was lost: got %v, want an error matching fence.ErrUnknownOutcome", err)
	}
	if err := recordOne(ctx, pool, ob, 1, nil); !errors.Is(err, outbox.ErrDuplicate) {
		t.Fatalf("the retry: got %v, want an error matching outbox.ErrDuplicate (the first write landed)", err)
	}
	if n, bal := effectsAndCredit(t, base); n != 1 || bal != 1 {
		t.Fatalf("after the retry: %d effects, balance %d; want 1 and 1", n, bal)
	}
	err := postgres.RunInTx(ctx, pool, "acct", 1, func(tx pgx.Tx) error {
		return ob.Record(ctx, tx, effect("acct", 1, 1))
	})
	if err != nil {
		t.Fatalf("control, a new Seq: got %v, want nil", err)
	}
	if n, _ := effectsAndCredit(t, base); n != 2 {
		t.Fatalf("control: %d effects, want 2", n)
	}
}

// TestOutboxRecordCutBeforeCommit: the connection is reset while fn runs,
// after Record ran: an error, nothing committed, the
// connection not leaked, the pool usable.
func TestOutboxRecordCutBeforeCommit(t *testing.T) {
	base, ob := newOutbox(t)
	pool, conns := resettable(t, base)
	ctx := t.Context()
	err := recordOne(ctx, pool, ob, 1, conns.Reset)
	if err == nil {
		t.Fatal("RunInTx whose connection was reset: got nil, want an error")
	}
	t.Logf("error: %v (unknown outcome: %v)", err, errors.Is(err, fence.ErrUnknownOutcome))
	if wantIff(t, base) {
		t.Fatal("the reset transaction committed")
	}
	wantIdlePool(t, pool)
	if err := recordOne(ctx, pool, ob, 2, nil); err != nil {
		t.Fatalf("the next RunInTx on the pool: %v", err)
	}
	wantIdlePool(t, pool)
	if s := pool.Stat(); s.TotalConns() > 2 {
		t.Errorf("pool: %d connections, want at most 2", s.TotalConns())
	}
}
