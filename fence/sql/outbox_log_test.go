package sqlfence_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
	"github.com/fencelock/fencelock/internal/testkit/mysqltest"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// TestOutboxPending: effects come in the order they were recorded, across
// writes and within one; a scope selects its partition, skip leaves out
// resources, and limit cuts the list.
func TestOutboxPending(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		db, f, o := newOutbox(t, srv)
		ctx := t.Context()
		var all []outbox.Effect
		for i, r := range []string{"b", "a", "c", "a", "d", "e"} {
			tok := fence.Token(i + 1)
			es := []outbox.Effect{effect(r, tok, 0), effect(r, tok, 1)}
			if err := record(ctx, srv, db, f, o, fence.Claim{Resource: r, Token: tok}, es...); err != nil {
				t.Fatal(err)
			}
			all = append(all, es...)
		}
		wantKeys(t, "all", pending(t, o), all...)
		skipped := slices.DeleteFunc(slices.Clone(all), func(e outbox.Effect) bool { return e.Resource == "a" || e.Resource == "d" })
		wantKeys(t, "skipping a and d", pending(t, o, "a", "d"), skipped...)
		es, err := o.Pending(ctx, outbox.All, nil, 3)
		wantKeys(t, "limit 3", keys(t, es, err, outbox.Effect.Key), all[:3]...)
		var n int
		for i := range 3 {
			scope := outbox.Scope{Index: i, Partitions: 3}
			in := slices.DeleteFunc(slices.Clone(all), func(e outbox.Effect) bool { return !scope.Has(e.Resource) })
			es, err := o.Pending(ctx, scope, nil, 100)
			wantKeys(t, "scope "+scope.String(), keys(t, es, err, outbox.Effect.Key), in...)
			n += len(in)
		}
		if n != len(all) {
			t.Fatalf("partitions: got %d effects in all, want %d", n, len(all))
		}
		if es, err := o.Pending(ctx, outbox.All, nil, 1); err != nil || len(es) != 1 || string(es[0].Payload) != "b!" || es[0].Destination != "mailer" {
			t.Fatalf("first effect: got %+v, %v, want b's payload and destination", es, err)
		}
	})
}

// TestOutboxSettleStale: a dispatcher whose token is below its fence
// (a newer one took over, with an empty Settle) marks nothing and gets
// ErrStale; the control, the newer dispatcher's Settle, marks.
func TestOutboxSettleStale(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		db, f, o := newOutbox(t, srv)
		ctx := t.Context()
		e := effect("r", 1, 0)
		if err := record(ctx, srv, db, f, o, fence.Claim{Resource: "r", Token: 1}, e); err != nil {
			t.Fatal(err)
		}
		old, newer := fence.Claim{Resource: "dispatch/0", Token: 4}, fence.Claim{Resource: "dispatch/0", Token: 5}
		if err := o.Settle(ctx, old, nil); err != nil {
			t.Fatalf("old dispatcher's takeover: got %v, want nil", err)
		}
		if err := o.Settle(ctx, newer, nil); err != nil {
			t.Fatalf("newer dispatcher's takeover: got %v, want nil", err)
		}
		err := o.Settle(ctx, old, []outbox.Settled{{Effect: e, Attempts: 1}})
		var se *fence.StaleError
		if !errors.As(err, &se) || se.Current != 5 {
			t.Fatalf("stale dispatcher's Settle: got %v, want a StaleError with Current 5", err)
		}
		wantKeys(t, "pending after the stale Settle", pending(t, o), e)
		if err := o.Settle(ctx, newer, []outbox.Settled{{Effect: e, Attempts: 1}}); err != nil {
			t.Fatalf("control, newer dispatcher's Settle: got %v, want nil", err)
		}
		wantKeys(t, "pending after the newer Settle", pending(t, o))
		wantFence(t, db, f, "dispatch/0", 5)
	})
}

// TestOutboxParkAndRequeue: a parked effect leaves the pending list, is
// listed with its reason and attempts, and Requeue puts it back at its
// place; requeuing one that is not parked is ErrNotFound.
func TestOutboxParkAndRequeue(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		db, f, o := newOutbox(t, srv)
		ctx := t.Context()
		e0, e1, e2 := effect("r", 1, 0), effect("r", 1, 1), effect("r", 1, 2)
		if err := record(ctx, srv, db, f, o, fence.Claim{Resource: "r", Token: 1}, e0, e1, e2); err != nil {
			t.Fatal(err)
		}
		by := fence.Claim{Resource: "dispatch", Token: 1}
		done := []outbox.Settled{{Effect: e0, Parked: "HTTP 400", Attempts: 3}, {Effect: e2, Attempts: 1}}
		if err := o.Settle(ctx, by, done); err != nil {
			t.Fatal(err)
		}
		wantKeys(t, "pending", pending(t, o), e1)
		parked, err := o.Parked(ctx, outbox.All, 10)
		if err != nil || len(parked) != 1 || parked[0].Effect.Key() != e0.Key() || parked[0].Reason != "HTTP 400" || parked[0].Attempts != 3 {
			t.Fatalf("Parked: got %+v, %v, want e0 with its reason and 3 attempts", parked, err)
		}
		if err := o.Requeue(ctx, e0); err != nil {
			t.Fatalf("Requeue: got %v, want nil", err)
		}
		wantKeys(t, "pending after Requeue", pending(t, o), e0, e1)
		for _, e := range []outbox.Effect{e0, e2, effect("r", 9, 0)} {
			if err := o.Requeue(ctx, e); !errors.Is(err, fence.ErrNotFound) {
				t.Fatalf("Requeue of %s, not parked: got %v, want ErrNotFound", e.Key(), err)
			}
		}
		// Settling again what is settled passes it over.
		if err := o.Settle(ctx, by, []outbox.Settled{{Effect: e2, Parked: "late"}}); err != nil {
			t.Fatal(err)
		}
		if parked, err := o.Parked(ctx, outbox.All, 10); err != nil || len(parked) != 0 {
			t.Fatalf("Parked after settling a delivered effect again: got %+v, %v, want none", parked, err)
		}
	})
}

// TestOutboxCheck: SQLite, and a MariaDB user with the privileges a
// dispatcher needs (the control), pass; a MariaDB user that may only read
// gets ErrNotPermitted; a missing table is ErrSchema.
func TestOutboxCheck(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		_, _, o := newOutbox(t, srv)
		if err := o.Check(t.Context(), outbox.All); err != nil {
			t.Fatalf("Check: got %v, want nil", err)
		}
		db := srv.open(t)
		f, _ := sqlfence.NewFences(srv.d, sqlfence.Identifier{sqlfence.DefaultFenceTable})
		bare, err := sqlfence.NewOutbox(db, f)
		if err != nil {
			t.Fatal(err)
		}
		if err := bare.Check(t.Context(), outbox.All); !errors.Is(err, sqlfence.ErrSchema) {
			t.Fatalf("Check with no tables: got %v, want ErrSchema", err)
		}
	})
	t.Run("MariaDB grants", func(t *testing.T) {
		testenv.Long(t, "starts a MariaDB server of its own, with its grant tables in force")
		srv := mysqltest.NewWithGrants(t)
		cfg := srv.NewDatabase(t)
		admin := mysqltest.Open(t, cfg)
		if err := sqlfence.CreateOutboxSchema(t.Context(), admin, sqlfence.MySQL); err != nil {
			t.Fatal(err)
		}
		for i, c := range []struct {
			name, grant string
			want        error
		}{
			{"read only", "SELECT", outbox.ErrNotPermitted},
			{"no insert", "SELECT, UPDATE", outbox.ErrNotPermitted},
			{"control", "SELECT, INSERT, UPDATE", nil},
		} {
			user := fmt.Sprintf("outbox%d_%s", i, cfg.DBName[len(cfg.DBName)-6:])
			users := "'" + user + "'@'localhost', '" + user + "'@'%'"
			mustExec(t, admin, "CREATE USER '"+user+"'@'localhost' IDENTIFIED BY 'pw', '"+user+"'@'%' IDENTIFIED BY 'pw'")
			mustExec(t, admin, "GRANT "+c.grant+" ON `"+cfg.DBName+"`.* TO "+users)
			ucfg := cfg.Clone()
			ucfg.User, ucfg.Passwd = user, "pw"
			udb := mysqltest.Open(t, ucfg)
			f, _ := sqlfence.NewFences(sqlfence.MySQL, sqlfence.Identifier{sqlfence.DefaultFenceTable})
			o, err := sqlfence.NewOutbox(udb, f)
			if err != nil {
				t.Fatal(err)
			}
			err = o.Check(t.Context(), outbox.All)
			_ = udb.Close()
			mustExec(t, admin, "DROP USER "+users)
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("%s (%s): got %v, want %v", c.name, c.grant, err, c.want)
			}
			t.Logf("%s: %v", c.name, err)
		}
	})
}

// TestOutboxSettleMany: a Settle of more effects than one statement marks
// (250, delivered and parked with two reasons and counts), one given
// twice, marks each as the first time it is given says, in every group
// and chunk; none is left pending.
func TestOutboxSettleMany(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		db, f, o := newOutbox(t, srv)
		ctx := t.Context()
		var done []outbox.Settled
		wantParked := map[string]outbox.Settled{}
		for w := range 25 {
			var es []outbox.Effect
			for i := range 10 {
				d := outbox.Settled{Effect: effect("r", fence.Token(w+1), int64(i)), Attempts: 1}
				switch w*10 + i {
				case 3, 50, 151:
					d.Parked, d.Attempts = "HTTP 400", 2
				case 7, 160:
					d.Parked, d.Attempts = "HTTP 410", 5
				}
				if d.Parked != "" {
					wantParked[d.Effect.Key()] = d
				}
				es, done = append(es, d.Effect), append(done, d)
			}
			if err := record(ctx, srv, db, f, o, fence.Claim{Resource: "r", Token: fence.Token(w + 1)}, es...); err != nil {
				t.Fatal(err)
			}
		}
		done = append(done, outbox.Settled{Effect: done[0].Effect, Parked: "second", Attempts: 9})
		if err := o.Settle(ctx, fence.Claim{Resource: "dispatch", Token: 1}, done); err != nil {
			t.Fatalf("Settle of 250: got %v, want nil", err)
		}
		wantKeys(t, "pending after Settle", pending(t, o))
		parked, err := o.Parked(ctx, outbox.All, 100)
		if err != nil || len(parked) != len(wantParked) {
			t.Fatalf("Parked: got %d, %v; want %d", len(parked), err, len(wantParked))
		}
		for _, p := range parked {
			if w := wantParked[p.Effect.Key()]; p.Reason != w.Parked || p.Attempts != w.Attempts {
				t.Errorf("parked %s: got %q after %d attempts, want %q after %d", p.Effect.Key(), p.Reason, p.Attempts, w.Parked, w.Attempts)
			}
		}
	})
}
