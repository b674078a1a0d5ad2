// Command effects is the runnable example of docs/effects.md: an order is
// paid under a lock, and the confirmation email leaves through a fenced
// outbox, sent by a dispatcher to an HTTP mail service that applies each
// email once. A holder whose token is stale pays nothing and sends
// nothing.
//
// It reads the etcd endpoints from ETCDCTL_ENDPOINTS (default
// localhost:2379) and the database from DATABASE_URL (empty: the PG*
// variables libpq reads). The orders table is in schema.sql; the outbox's
// own table is created by the program. The mail service runs in the
// program, on a loopback port.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/fence/propagate"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if _, err := run(ctx); err != nil {
		log.Fatal(err)
	}
}

// run pays order-42, dispatches its email, and returns what the mail
// service applied.
func run(ctx context.Context) ([]string, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(cmp.Or(os.Getenv("ETCDCTL_ENDPOINTS"), "localhost:2379"), ","),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	locks, err := etcdlock.New(cli, etcdlock.WithTTL(10*time.Second))
	if err != nil {
		return nil, err
	}
	defer locks.Close(context.Background())
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	ob, err := postgres.NewOutbox(pool)
	if err != nil {
		return nil, err
	}
	if err := ob.CreateTable(ctx); err != nil {
		return nil, err
	}
	mail, err := startMailService(ctx)
	if err != nil {
		return nil, err
	}
	defer mail.Close()
	if err := payAndStale(ctx, locks, pool, ob, mail.url); err != nil {
		return nil, err
	}
	if err := dispatch(ctx, locks, ob, mail, 1); err != nil {
		return nil, err
	}
	return mail.sent(), nil
}

// payAndStale pays order-42 under its lock, then shows what a holder
// whose token is older gets: ErrStale, and no email recorded.
func payAndStale(ctx context.Context, locks *etcdlock.Client, pool *pgxpool.Pool, ob *postgres.Outbox, mailURL string) error {
	lock, err := locks.Lock(ctx, "order-42")
	if err != nil {
		return err
	}
	if err := payOrder(ctx, pool, ob, lock.Token(), "order-42", mailURL); err != nil {
		return err
	}
	fmt.Printf("order-42 paid with token %d; its email is in the outbox\n", lock.Token())
	err = payOrder(ctx, pool, ob, lock.Token()-1, "order-42", mailURL) // a paused older holder, late
	if !errors.Is(err, fence.ErrStale) {
		return fmt.Errorf("a stale payment: got %v, want fence.ErrStale", err)
	}
	fmt.Println("a stale holder's payment was refused, and its email with it")
	return lock.Unlock(ctx)
}

// payOrder marks the order paid and records its confirmation email, in one
// fenced transaction: the email exists if and only if the payment landed.
func payOrder(ctx context.Context, pool *pgxpool.Pool, ob *postgres.Outbox, token fence.Token, order, mailURL string) error {
	return postgres.RunInTx(ctx, pool, order, token, func(tx pgx.Tx) error {
		var amount int64
		err := tx.QueryRow(ctx, "UPDATE orders SET status = 'paid' WHERE id = $1 RETURNING amount", order).Scan(&amount)
		if err != nil {
			return err
		}
		email, _ := json.Marshal(map[string]any{"to": "ada@example.com", "subject": "Payment received", "order": order, "amount": amount})
		return ob.Record(ctx, tx, outbox.Effect{
			Resource: order, Token: token, Seq: 0, // Seq: this holder's first effect on the order
			Destination: mailURL, Payload: email,
		})
	})
}

// dispatch runs a dispatcher while it holds the lock "mail-dispatcher",
// until the mail service has applied want emails and none is pending.
func dispatch(ctx context.Context, locks *etcdlock.Client, ob *postgres.Outbox, mail *mailService, want int) error {
	lock, err := locks.Lock(ctx, "mail-dispatcher")
	if err != nil {
		return err
	}
	defer lock.Unlock(context.WithoutCancel(ctx))
	sender, err := outbox.NewHTTPSender(outbox.WithContentType("application/json"))
	if err != nil {
		return err
	}
	d, err := outbox.NewDispatcher(ob, sender, outbox.WithName("mail"))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ended := make(chan error, 1)
	go func() { ended <- d.Run(ctx, lock, outbox.All) }() // as long as the lock is held
	for !done(ctx, ob, mail, want) {                      // applied and marked delivered
		select {
		case <-mail.got:
		case <-time.After(20 * time.Millisecond):
		case err := <-ended:
			return err
		}
	}
	cancel()
	if err := <-ended; !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

func done(ctx context.Context, ob *postgres.Outbox, mail *mailService, want int) bool {
	pending, err := ob.Pending(ctx, outbox.All, nil, 1)
	return err == nil && len(pending) == 0 && len(mail.sent()) >= want
}

// mailService is the receiving side: an HTTP mail service that applies
// each email once, whatever the dispatchers resend, and refuses an email
// whose token is older than one it has applied for the same order.
type mailService struct {
	srv *http.Server
	url string
	got chan struct{} // a value after each email applied
	mu  sync.Mutex    // guards out
	out []string
}

func startMailService(ctx context.Context) (*mailService, error) {
	m := &mailService{got: make(chan struct{}, 1)}
	h, err := outbox.NewReceiver(fence.NewMemoryStore(), http.HandlerFunc(m.send)) // in production: a fenced store of its own
	if err != nil {
		return nil, err
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	m.srv, m.url = &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}, "http://"+ln.Addr().String()+"/send"
	go m.srv.Serve(ln)
	return m, nil
}

func (m *mailService) send(w http.ResponseWriter, r *http.Request) {
	var email struct{ To, Subject, Order string }
	if err := json.NewDecoder(r.Body).Decode(&email); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest) // parked by the dispatcher, not retried
		return
	}
	f, _ := propagate.FromContext(r.Context())
	line := fmt.Sprintf("mail to %s: %s (%s, token %d, key %s)", email.To, email.Subject, email.Order, f.Token, r.Header.Get(outbox.IdempotencyHeader))
	fmt.Println(line)
	m.mu.Lock()
	m.out = append(m.out, line)
	m.mu.Unlock()
	select {
	case m.got <- struct{}{}:
	default:
	}
	w.WriteHeader(http.StatusAccepted)
}

func (m *mailService) sent() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.out...)
}

func (m *mailService) Close() error { return m.srv.Close() }
