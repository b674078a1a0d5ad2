package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/fence/propagate"
	"github.com/fencelock/fencelock/internal/app/harness/check"
	"github.com/fencelock/fencelock/internal/testkit/natstest"
)

// fxPartitions is how many partitions the effects run's dispatchers share
// the outbox in: each an etcdlock Group partition, owned by one worker at
// a time.
const fxPartitions = 2

// fxConfig tells a worker of an effects run (KindEffects) where its
// outbox and receivers are.
type fxConfig struct {
	Outbox  string // the outbox's table
	Channel string // its NOTIFY channel
	Name    string // the dispatchers' name (outbox.WithName), and their group's
	HTTP    string // the HTTP receiver's URL
	NATS    string // the nats-server's URL
	Subject string // the JetStream stream's subject
}

// The effects workload's tables: the accounts, and the log of transfers
// PostgreSQL committed, written in each transfer's transaction. The HTTP
// receiver's handler logs each effect it applies in harness_fx_applied.
//
// A fenced run and its control share the database, and their workers have
// the same names, so their transfers' ids ("w0.0/x3") do too: the log's
// key is the pair of the source account, a key of one run, and the id.
// Keyed by the id alone, the second run to commit an id had its transfer
// fail with a unique violation, an error that stood in the liveness
// check's way as a holder's lost write (the stalls of seeds 971519,
// 678389 and 20879).
var fxSchema = []string{
	`CREATE TABLE IF NOT EXISTS harness_fx_acct (key text PRIMARY KEY, balance bigint NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS harness_fx_xfer (xfer text NOT NULL, src text NOT NULL, dst text NOT NULL, amount bigint NOT NULL,
		PRIMARY KEY (src, xfer))`,
	`CREATE TABLE IF NOT EXISTS harness_fx_applied (id bigserial PRIMARY KEY, key text NOT NULL, resource text NOT NULL,
		tok bigint NOT NULL, xfer text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`,
}

// effectsRun is an effects run's own servers: its nats-server and stream,
// and its HTTP receiver, in the harness process, which the nemesis never
// touches.
type effectsRun struct {
	cfg    fxConfig
	ob     *postgres.Outbox
	nats   *natstest.Server
	nc     *nats.Conn
	stream natsjs.Stream
	srv    *http.Server
	// applied is what the final check read, for the report.
	applied []check.Applied
}

// setUpEffects creates the effects workload's tables, the run's outbox,
// its stream and its HTTP receiver, and opens the accounts.
func setUpEffects(ctx context.Context, r *runner) error {
	for _, stmt := range fxSchema {
		if _, err := r.pool.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("harness: effects schema: %w", err)
		}
	}
	for _, k := range r.keys {
		if _, err := r.pool.Exec(ctx, "INSERT INTO harness_fx_acct (key, balance) VALUES ($1, $2)", k, check.BankStart); err != nil {
			return err
		}
	}
	id := strings.ReplaceAll(r.id, "-", "_")
	fx := &effectsRun{cfg: fxConfig{Outbox: "harness_outbox_" + id, Channel: "harness_outbox_" + id, Name: r.id, Subject: "fx." + r.id}}
	r.fx = fx
	var err error
	if fx.ob, err = postgres.NewOutbox(r.pool, postgres.WithOutboxTable(pgx.Identifier{fx.cfg.Outbox}),
		postgres.WithOutboxChannel(fx.cfg.Channel)); err != nil {
		return err
	}
	if err := fx.ob.CreateTable(ctx); err != nil {
		return err
	}
	if err := fx.startStream(ctx, id); err != nil {
		return err
	}
	return fx.startReceiver(r)
}

// startStream starts the run's nats-server and creates its stream, which
// deduplicates on Nats-Msg-Id over a window longer than any run.
func (fx *effectsRun) startStream(ctx context.Context, id string) error {
	var err error
	if fx.nats, err = natstest.Start(ctx); err != nil {
		return fmt.Errorf("harness: starting nats-server: %w", err)
	}
	fx.cfg.NATS = fx.nats.URL()
	if fx.nc, err = nats.Connect(fx.cfg.NATS, nats.Timeout(5*time.Second)); err != nil {
		return err
	}
	js, err := natsjs.New(fx.nc)
	if err != nil {
		return err
	}
	fx.stream, err = js.CreateStream(ctx, natsjs.StreamConfig{Name: "FX_" + id, Subjects: []string{fx.cfg.Subject},
		Duplicates: time.Hour, Storage: natsjs.FileStorage})
	return err
}

// startReceiver serves the HTTP receiver: outbox.NewReceiver, its
// receipts and floors in fence/postgres's Store, over a handler that logs
// each effect it applies. Requests without an idempotency key or a token
// (none come) would reach the handler unchecked.
func (fx *effectsRun) startReceiver(r *runner) error {
	store, err := postgres.NewStore(r.pool, pgx.Identifier{postgres.DefaultStoreTable})
	if err != nil {
		return err
	}
	pool := r.pool
	apply := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		f, _ := propagate.FromContext(req.Context())
		body, err := io.ReadAll(io.LimitReader(req.Body, 1<<10))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		// The request's context is outbox.NewReceiver's, which the
		// sender cannot cancel (a deposed dispatcher's end must not turn
		// a write that landed into a 503, releasing the key for the next
		// delivery to apply again) and which ends with the key's
		// WithPendingTimeout.
		_, err = pool.Exec(req.Context(), "INSERT INTO harness_fx_applied (key, resource, tok, xfer) VALUES ($1, $2, $3, $4)",
			req.Header.Get(outbox.IdempotencyHeader), f.Name, int64(f.Token), string(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	})
	h, err := outbox.NewReceiver(store, apply, outbox.WithKeyPrefix("fx-receipts/"+r.id+"/"))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fx.cfg.HTTP = "http://" + ln.Addr().String() + "/apply"
	fx.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = fx.srv.Serve(ln) }()
	return nil
}

func (fx *effectsRun) close() {
	if fx.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = fx.srv.Shutdown(ctx)
		cancel()
	}
	if fx.nc != nil {
		fx.nc.Close()
	}
	if fx.nats != nil {
		_ = fx.nats.Close()
	}
}

// errNotDrained is a drain that did not empty the outbox in time.
var errNotDrained = errors.New("harness: the outbox still had pending effects after the drain")
