package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

// watchDeadline bounds the wait for a notification or a closed channel.
const watchDeadline = 10 * time.Second

func wantWake(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case _, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed, want a value")
		}
	case <-time.After(watchDeadline):
		t.Fatalf("no wake within %v", watchDeadline)
	}
}

func wantClosed(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	deadline := time.After(watchDeadline)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("watch channel still open after %v, want it closed", watchDeadline)
		}
	}
}

// TestOutboxWatch: a committed Record wakes a watcher of its scope; the
// channel closes when the context ends.
func TestOutboxWatch(t *testing.T) {
	pool, ob := newOutbox(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch, err := ob.Watch(ctx, outbox.All)
	if err != nil {
		t.Fatalf("Watch: got error %v, want nil", err)
	}
	part := outbox.Scope{Index: outbox.PartitionOf("acct", 4), Partitions: 4}
	scoped, err := ob.Watch(ctx, part)
	if err != nil {
		t.Fatalf("Watch(%v): got error %v, want nil", part, err)
	}
	if err := recordFenced(pool, ob)(ctx, fence.Claim{Resource: "acct", Token: 1}, []outbox.Effect{effect("acct", 1, 0)}); err != nil {
		t.Fatalf("recording: got error %v, want nil", err)
	}
	wantWake(t, ch)
	wantWake(t, scoped)
	cancel()
	wantClosed(t, ch)
	wantClosed(t, scoped)
}

// TestOutboxWatchBroken: the channel closes when the listening session
// ends.
func TestOutboxWatchBroken(t *testing.T) {
	pool, ob := newOutbox(t)
	ch, err := ob.Watch(t.Context(), outbox.All)
	if err != nil {
		t.Fatalf("Watch: got error %v, want nil", err)
	}
	poll.Until(t, "the listening session ended", func() bool {
		var n int
		err := pool.QueryRow(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE 'LISTEN%'`).Scan(&n)
		return err == nil && n > 0
	})
	wantClosed(t, ch)
}

// TestOutboxCheck: a role without grants gets ErrNotPermitted naming what
// it lacks. Control: once granted them, Check passes.
func TestOutboxCheck(t *testing.T) {
	pool, ob := newOutbox(t)
	ctx := t.Context()
	if err := ob.Check(ctx, outbox.All); err != nil {
		t.Fatalf("Check as the owner: got error %v, want nil", err)
	}
	role := fmt.Sprintf("outbox_check_%d", time.Now().UnixNano())
	mustExec(t, pool, "CREATE ROLE "+role+" LOGIN")
	t.Cleanup(func() {
		ctx := context.Background()
		_, _ = pool.Exec(ctx, "DROP OWNED BY "+role)
		_, _ = pool.Exec(ctx, "DROP ROLE "+role)
	})
	cfg := pool.Config().ConnConfig.Copy()
	cfg.User = role
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connecting as %s: %v", role, err)
	}
	defer conn.Close(context.Background())
	weak, err := postgres.NewOutbox(conn)
	if err != nil {
		t.Fatalf("NewOutbox: got error %v, want nil", err)
	}
	err = weak.Check(ctx, outbox.All)
	if !errors.Is(err, outbox.ErrNotPermitted) || !strings.Contains(err.Error(), `UPDATE on "fencelock_outbox"`) ||
		!strings.Contains(err.Error(), `INSERT on "fencelock_fences"`) {
		t.Fatalf("Check without grants: got error %v, want outbox.ErrNotPermitted naming UPDATE on the outbox and INSERT on the fences", err)
	}
	mustExec(t, pool, "GRANT SELECT, UPDATE ON fencelock_outbox TO "+role)
	mustExec(t, pool, "GRANT SELECT, INSERT, UPDATE ON fencelock_fences TO "+role)
	if err := weak.Check(ctx, outbox.All); err != nil {
		t.Fatalf("Check with the grants: got error %v, want nil", err)
	}
	// A missing table is no refusal of grants: ErrSchema.
	other, err := postgres.NewOutbox(pool, postgres.WithOutboxTable(pgx.Identifier{"no_such_outbox"}))
	if err != nil {
		t.Fatalf("NewOutbox: got error %v, want nil", err)
	}
	if err := other.Check(ctx, outbox.All); !errors.Is(err, postgres.ErrSchema) {
		t.Fatalf("Check of a missing table: got error %v, want ErrSchema", err)
	}
}

// noIOOutbox is noIO with Query, for NewOutbox.
type noIOOutbox struct{ noIO }

func (n noIOOutbox) Query(context.Context, string, ...any) (pgx.Rows, error) {
	n.t.Error("Query called: want the call refused before any I/O")
	return nil, errors.New("no I/O")
}

func TestOutboxInvalidArguments(t *testing.T) {
	db := noIOOutbox{noIO{t}}
	for _, tc := range []struct {
		name string
		db   postgres.OutboxDB
		opts []postgres.OutboxOption
	}{
		{"nil db", nil, nil},
		{"typed nil db", (*pgx.Conn)(nil), nil},
		{"nil option", db, []postgres.OutboxOption{nil}},
		{"empty table", db, []postgres.OutboxOption{postgres.WithOutboxTable(pgx.Identifier{})}},
		{"empty table part", db, []postgres.OutboxOption{postgres.WithOutboxTable(pgx.Identifier{""})}},
		{"empty channel", db, []postgres.OutboxOption{postgres.WithOutboxChannel("")}},
		{"long channel", db, []postgres.OutboxOption{postgres.WithOutboxChannel(strings.Repeat("c", 64))}},
		{"zero fences", db, []postgres.OutboxOption{postgres.WithOutboxFences(&postgres.Fences{})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := postgres.NewOutbox(tc.db, tc.opts...); !errors.Is(err, fence.ErrInvalidArgument) {
				t.Fatalf("NewOutbox: got error %v, want one matching fence.ErrInvalidArgument", err)
			}
		})
	}

	ob, err := postgres.NewOutbox(db)
	if err != nil {
		t.Fatalf("NewOutbox: got error %v, want nil", err)
	}
	ctx := t.Context()
	big := effect("acct", 1, 0)
	big.Payload = make([]byte, postgres.MaxOutboxPayload+1)
	var tx pgx.Tx = noIOTx{}
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"Record nil tx", ob.Record(ctx, nil, effect("acct", 1, 0)), fence.ErrInvalidArgument},
		{"Record no destination", ob.Record(ctx, tx, outbox.Effect{Resource: "acct", Token: 1}), outbox.ErrNoDestination},
		{"Record bad token", ob.Record(ctx, tx, effect("acct", 0, 0)), fence.ErrInvalidToken},
		{"Record twice in one call", ob.Record(ctx, tx, effect("acct", 1, 0), effect("acct", 1, 0)), outbox.ErrDuplicate},
		{"Record too large", ob.Record(ctx, tx, big), outbox.ErrTooLarge},
		{"Record cancelled", ob.Record(cancelled(t), tx, effect("acct", 1, 0)), context.Canceled},
		{"Pending limit 0", pendingErr(ob.Pending(ctx, outbox.All, nil, 0)), fence.ErrInvalidArgument},
		{"Pending bad scope", pendingErr(ob.Pending(ctx, outbox.Scope{Index: 2, Partitions: 2}, nil, 1)), fence.ErrInvalidArgument},
		{"Parked limit 0", parkedErr(ob.Parked(ctx, outbox.All, 0)), fence.ErrInvalidArgument},
		{"Settle bad by", ob.Settle(ctx, fence.Claim{Resource: "d", Token: 0}, nil), fence.ErrInvalidToken},
		{"Settle bad effect", ob.Settle(ctx, fence.Claim{Resource: "d", Token: 1}, []outbox.Settled{{}}), fence.ErrInvalidArgument},
		{"Requeue bad effect", ob.Requeue(ctx, outbox.Effect{}), fence.ErrInvalidArgument},
		{"Watch bad scope", watchErr(ob.Watch(ctx, outbox.Scope{Index: -1, Partitions: 1})), fence.ErrInvalidArgument},
		{"Watch on a handle it cannot dial", watchErr(ob.Watch(ctx, outbox.All)), fence.ErrInvalidArgument},
		{"zero Outbox", (&postgres.Outbox{}).Record(ctx, tx, effect("acct", 1, 0)), fence.ErrInvalidArgument},
		{"nil Outbox", (*postgres.Outbox)(nil).Check(ctx, outbox.All), fence.ErrInvalidArgument},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: got error %v, want one matching %v", tc.name, tc.err, tc.want)
		}
	}
	if err := ob.Record(ctx, tx); err != nil {
		t.Errorf("Record of no effects: got error %v, want nil", err)
	}
}

func pendingErr(_ []outbox.Effect, err error) error { return err }
func parkedErr(_ []outbox.Parked, err error) error  { return err }
func watchErr(_ <-chan struct{}, err error) error   { return err }

// noIOTx is a pgx.Tx that panics if used: the calls given it must be
// refused before any I/O.
type noIOTx struct{ pgx.Tx }
