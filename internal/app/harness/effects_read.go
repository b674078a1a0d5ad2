package harness

import (
	"context"
	"errors"
	"fmt"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/fence/propagate"
	"github.com/fencelock/fencelock/internal/app/harness/check"
)

// drainTimeout bounds the final drain of an effects run's outbox.
const drainTimeout = time.Minute

// read returns what PostgreSQL committed and what the receivers applied.
// PostgreSQL's transfers are read first: an effect applied is of a
// transfer committed before it was recorded, so every applied effect read
// after them finds its transfer, if it landed.
func (fx *effectsRun) read(ctx context.Context, r *runner) (*check.Effects, error) {
	st := &check.Effects{Landed: map[string]bool{}}
	rows, err := r.pool.Query(ctx, "SELECT xfer FROM harness_fx_xfer WHERE src = ANY($1)", r.keys)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		st.Landed[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if err := fx.readHTTP(ctx, r, st); err != nil {
		return nil, err
	}
	return st, fx.readStream(ctx, st)
}

// readHTTP reads the effects the HTTP receiver's handler applied.
func (fx *effectsRun) readHTTP(ctx context.Context, r *runner, st *check.Effects) error {
	rows, err := r.pool.Query(ctx, "SELECT key, resource, tok, xfer, at FROM harness_fx_applied WHERE resource = ANY($1) ORDER BY id", r.keys)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		a := check.Applied{Receiver: check.ReceiverHTTP}
		var at time.Time
		if err := rows.Scan(&a.Key, &a.Resource, &a.Token, &a.Transfer, &at); err != nil {
			return err
		}
		a.Time = at.UnixNano()
		st.Applied = append(st.Applied, a)
	}
	return rows.Err()
}

// readStream reads every message the stream stored (after its
// deduplication on Nats-Msg-Id).
func (fx *effectsRun) readStream(ctx context.Context, st *check.Effects) error {
	info, err := fx.stream.Info(ctx)
	if err != nil {
		return err
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := fx.stream.GetMsg(ctx, seq)
		if errors.Is(err, natsjs.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		f, err := propagate.Parse(m.Header.Get(propagate.Header))
		if err != nil {
			return fmt.Errorf("harness: stream message %d: %w", seq, err)
		}
		st.Applied = append(st.Applied, check.Applied{Receiver: check.ReceiverJetStream, Key: m.Header.Get("Nats-Msg-Id"),
			Resource: f.Name, Token: int64(f.Token), Transfer: string(m.Data), Time: m.Time.UnixNano()})
	}
	return nil
}

// drain delivers what the workers' dispatchers left in the outbox: a
// dispatcher in the harness process, the only member left of the
// dispatchers' group, owns every partition until the outbox has nothing
// pending.
func (fx *effectsRun) drain(ctx context.Context, r *runner) error {
	ctx, cancel := context.WithTimeout(ctx, drainTimeout)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: r.etcd.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	locks, err := etcdlock.New(cli, etcdlock.WithTTL(r.cfg.TTL))
	if err != nil {
		return err
	}
	defer locks.Close(context.WithoutCancel(ctx))
	d, closeSender, err := newFxDispatcher(fx.cfg, fx.ob)
	if err != nil {
		return err
	}
	defer closeSender()
	jctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); runDispatchers(jctx, locks, d, fx.cfg) }()
	err = fx.awaitDrained(ctx)
	stop()
	<-done
	return err
}

// awaitDrained polls the outbox until it has nothing pending, or ctx ends.
func (fx *effectsRun) awaitDrained(ctx context.Context) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		p, err := fx.ob.Pending(ctx, outbox.All, nil, 1)
		if err == nil && len(p) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %v (last read: %v)", errNotDrained, ctx.Err(), err)
		case <-tick.C:
		}
	}
}
