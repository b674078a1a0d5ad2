package harness

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/fence/outbox/jetstream"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/app/harness/check"
)

// fxStores are what an effects worker writes and sends with: its
// PostgreSQL accounts and outbox (on a pool of its own, which the
// dispatchers' watches and rounds share) and the senders.
type fxStores struct {
	cfg     fxConfig
	fenced  bool
	pool    *pgxpool.Pool
	ob      *postgres.Outbox
	send    outbox.Sender
	closeNC func()
	hold    func()
}

func openFxStores(ctx context.Context, cfg workerConfig, hold func()) (*fxStores, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, err
	}
	pcfg.MaxConns = 2 + 2*fxPartitions // transfers; each partition's watch and rounds
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, err
	}
	s := &fxStores{cfg: *cfg.Fx, fenced: cfg.Fenced, pool: pool, hold: hold}
	if s.ob, err = postgres.NewOutbox(pool, postgres.WithOutboxTable(pgx.Identifier{s.cfg.Outbox}),
		postgres.WithOutboxChannel(s.cfg.Channel)); err != nil {
		pool.Close()
		return nil, err
	}
	if s.send, s.closeNC, err = newFxSender(s.cfg); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

func (s *fxStores) close() {
	s.closeNC()
	s.pool.Close()
}

// newFxSender returns the sender of an effects run's effects: an effect
// whose Destination is a URL goes to the HTTP receiver
// (outbox.HTTPSender), any other to the JetStream stream (fence/outbox/
// jetstream's Sender); and a function closing its NATS connection.
func newFxSender(cfg fxConfig) (outbox.Sender, func(), error) {
	hs, err := outbox.NewHTTPSender()
	if err != nil {
		return nil, nil, err
	}
	nc, err := nats.Connect(cfg.NATS, nats.Timeout(5*time.Second), nats.MaxReconnects(-1))
	if err != nil {
		return nil, nil, err
	}
	js, err := natsjs.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	jss, err := jetstream.NewSender(js)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	route := outbox.SenderFunc(func(ctx context.Context, e outbox.Effect) error {
		if strings.HasPrefix(e.Destination, "http") {
			return hs.Send(ctx, e)
		}
		return jss.Send(ctx, e)
	})
	return route, nc.Close, nil
}

// newFxDispatcher returns a dispatcher of ob through an effects run's
// senders, and a function closing its NATS connection.
func newFxDispatcher(cfg fxConfig, ob *postgres.Outbox) (*outbox.Dispatcher, func(), error) {
	send, closeNC, err := newFxSender(cfg)
	if err != nil {
		return nil, nil, err
	}
	d, err := outbox.NewDispatcher(ob, send, outbox.WithName(cfg.Name), outbox.WithPollInterval(250*time.Millisecond),
		outbox.WithBackoff(50*time.Millisecond, time.Second), outbox.WithSendTimeout(5*time.Second), outbox.WithMaxAttempts(1000))
	if err != nil {
		closeNC()
		return nil, nil, err
	}
	return d, closeNC, nil
}

// runDispatchers makes d deliver the outbox as a member of the
// dispatchers' group, one Run per partition it owns, until ctx ends.
func runDispatchers(ctx context.Context, locks *etcdlock.Client, d *outbox.Dispatcher, cfg fxConfig) {
	g, err := locks.Group(cfg.Name+"-outbox", fxPartitions)
	if err != nil {
		return
	}
	work := func(pctx context.Context, p *etcdlock.Partition) error {
		scope := outbox.Scope{Index: p.Index(), Partitions: fxPartitions}
		for pctx.Err() == nil {
			_ = d.Run(pctx, p, scope) // the lock lost, or deposed: pctx ends soon
			pause(pctx, 100*time.Millisecond)
		}
		return nil
	}
	for ctx.Err() == nil {
		_ = g.Join(ctx, work, etcdlock.WithPartitionErrorHandler(func(int, error) {}))
		pause(ctx, 100*time.Millisecond)
	}
}

// pause waits for d or until ctx ends: a retry's pause, not a
// synchronisation.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// transfer makes t in one PostgreSQL transaction fenced on both accounts
// (postgres.RunInTxAll): it moves the money, logs the transfer in
// harness_fx_xfer and, fenced, records its two effects in the outbox
// (Seq seq and seq+1), the HTTP one on From, the JetStream one on To. The
// control sends them straight from the transaction instead, before its
// commit: the code a user writes without an outbox. The nemesis's hold is
// before the transaction (holdIn false: a newer holder may claim an
// account meanwhile, and the transaction is then refused) or inside it,
// before its commit (a newer holder ends it: fence/postgres's
// preemption).
func (s *fxStores) transfer(ctx context.Context, t check.Transfer, tf, tt fence.Token, seq int64, holdIn bool) error {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	claims := []fence.Claim{{Resource: t.From, Token: tf}, {Resource: t.To, Token: tt}}
	effs := []outbox.Effect{
		{Resource: t.From, Token: tf, Seq: seq, Destination: s.cfg.HTTP, Payload: []byte(t.ID)},
		{Resource: t.To, Token: tt, Seq: seq + 1, Destination: s.cfg.Subject, Payload: []byte(t.ID)},
	}
	if !holdIn {
		s.hold()
	}
	return postgres.RunInTxAll(ctx, s.pool, claims, func(tx pgx.Tx) error {
		if err := moveFx(ctx, tx, t); err != nil {
			return err
		}
		if s.fenced {
			if err := s.ob.Record(ctx, tx, effs...); err != nil {
				return err
			}
		} else {
			for _, e := range effs {
				_ = s.send.Send(ctx, e) // a failed send is the user's to log
			}
		}
		if holdIn {
			s.hold()
		}
		return nil
	})
}

// moveFx moves t's amount and logs t, in tx.
func moveFx(ctx context.Context, tx pgx.Tx, t check.Transfer) error {
	if _, err := tx.Exec(ctx, "UPDATE harness_fx_acct SET balance = balance - $2 WHERE key = $1", t.From, t.Amount); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "UPDATE harness_fx_acct SET balance = balance + $2 WHERE key = $1", t.To, t.Amount); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, "INSERT INTO harness_fx_xfer (xfer, src, dst, amount) VALUES ($1, $2, $3, $4)", t.ID, t.From, t.To, t.Amount)
	return err
}
