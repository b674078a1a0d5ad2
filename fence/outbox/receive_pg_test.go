package outbox_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// TestReceiverOnPostgres runs the receiver over a real fenced store,
// fence/postgres's Store, with HTTPSender delivering: an effect delivered
// twice runs the handler once; an effect whose token is below one already
// accepted for its resource is refused as stale, which the sender takes
// as permanent; deliveries of one effect at once run it once. The control
// delivers to the handler without the receiver: it runs twice.
func TestReceiverOnPostgres(t *testing.T) {
	testenv.Long(t, "starts a PostgreSQL server")
	pool := pgtest.NewPool(t)
	store, err := postgres.NewStore(pool, pgx.Identifier{postgres.DefaultStoreTable})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.CreateTable(t.Context()); err != nil {
		t.Fatal(err)
	}
	sender, err := outbox.NewHTTPSender()
	if err != nil {
		t.Fatal(err)
	}
	send := func(url string, e outbox.Effect) error {
		e.Destination = url + "/effects"
		return sender.Send(t.Context(), e)
	}
	e7 := outbox.Effect{Resource: "invoice-7", Token: 7, Seq: 0, Payload: []byte("charge")}

	t.Run("receiver", func(t *testing.T) {
		c := &counting{}
		srv := httptest.NewServer(newReceiver(t, store, c))
		t.Cleanup(srv.Close)
		for i := range 2 {
			if err := send(srv.URL, e7); err != nil {
				t.Fatalf("delivery %d: %v", i+1, err)
			}
		}
		if got := c.runs.Load(); got != 1 {
			t.Fatalf("got %d runs after two deliveries of one effect, want 1", got)
		}
		if err := send(srv.URL, outbox.Effect{Resource: "invoice-7", Token: 8, Payload: []byte("refund")}); err != nil {
			t.Fatal(err)
		}
		err := send(srv.URL, outbox.Effect{Resource: "invoice-7", Token: 7, Seq: 1, Payload: []byte("late")})
		if !outbox.IsPermanent(err) || c.runs.Load() != 2 {
			t.Fatalf("a late effect of token 7: got %v and %d runs, want a permanent error (409 stale) and 2 runs", err, c.runs.Load())
		}
		if err := send(srv.URL, e7); err != nil || c.runs.Load() != 2 {
			t.Fatalf("a repeat of the first effect: got %v and %d runs, want its first answer and 2 runs", err, c.runs.Load())
		}
		testManyAtOnce(t, store)
	})
	t.Run("control: no receiver", func(t *testing.T) {
		c := &counting{}
		srv := httptest.NewServer(http.Handler(c))
		t.Cleanup(srv.Close)
		for range 2 {
			if err := send(srv.URL, e7); err != nil {
				t.Fatal(err)
			}
		}
		if got := c.runs.Load(); got != 2 {
			t.Fatalf("got %d runs, want 2: without the receiver a redelivery runs the handler again", got)
		}
	})
}
