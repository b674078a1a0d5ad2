package postgres_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// lease is a lock held for the test's length.
type lease struct{ token fence.Token }

func (l lease) Token() fence.Token    { return l.token }
func (l lease) Done() <-chan struct{} { return nil }

// TestOutboxTakeoverEndsFrozenSettle: a dispatcher frozen inside its
// Settle transaction (the fence row of its resource locked) does not
// stall the next dispatcher: its takeover, fenced by RunInTx, ends the
// older token's transaction and the next dispatcher delivers within
// 2 s. The control: a transaction that is not fenced holds the row, which
// preemption never ends, and the takeover waits behind it.
func TestOutboxTakeoverEndsFrozenSettle(t *testing.T) {
	testenv.Long(t, "it waits out a takeover behind a frozen transaction")
	for _, fenced := range []bool{true, false} {
		name := map[bool]string{true: "frozen Settle", false: "unfenced transaction (control)"}[fenced]
		t.Run(name, func(t *testing.T) {
			pool, ob := newOutbox(t)
			ctx := t.Context()
			if err := recordOne(ctx, pool, ob, 1, nil); err != nil {
				t.Fatal(err)
			}
			sent := make(chan string, 4)
			d, err := outbox.NewDispatcher(ob, outbox.SenderFunc(func(_ context.Context, e outbox.Effect) error {
				sent <- e.Key()
				return nil
			}), outbox.WithPollInterval(50*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			res := d.Resource(outbox.All)
			inside, resume, ended := make(chan struct{}), make(chan struct{}), make(chan error, 1)
			var once sync.Once
			wake := func() { once.Do(func() { close(resume) }) } // the frozen one resumes
			defer wake()
			go func() {
				hold := func(tx pgx.Tx) error { close(inside); <-resume; return nil }
				if fenced { // the old dispatcher, token 5, frozen in Settle's transaction
					ended <- postgres.RunInTx(context.WithoutCancel(ctx), pool, res, 5, hold)
					return
				}
				if err := postgres.RunInTx(ctx, pool, res, 5, func(pgx.Tx) error { return nil }); err != nil {
					ended <- err
					return
				}
				ended <- pgx.BeginFunc(context.WithoutCancel(ctx), pool, func(tx pgx.Tx) error {
					if _, err := tx.Exec(ctx, "SELECT 1 FROM "+postgres.DefaultFenceTable+" WHERE resource = $1 FOR UPDATE", res); err != nil {
						return err
					}
					return hold(tx)
				})
			}()
			<-inside
			runCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			go d.Run(runCtx, lease{token: 9}, outbox.All)
			select {
			case <-sent:
				if !fenced {
					t.Fatal("control: the takeover went through a row lock that no preemption may end")
				}
			case <-time.After(2 * time.Second):
				if fenced {
					t.Fatal("the next dispatcher did not deliver within 2 s of a dispatcher frozen in its Settle")
				}
				return
			}
			wake()
			if err := <-ended; !errors.Is(err, postgres.ErrTerminated) {
				t.Errorf("the frozen Settle's transaction: got %v, want an error matching postgres.ErrTerminated", err)
			}
			poll.Until(t, "the effect settled by the next dispatcher", func() bool {
				p, err := ob.Pending(ctx, outbox.All, nil, 10)
				return err == nil && len(p) == 0
			})
		})
	}
}
