package outbox_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/internal/testkit/httpfault"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

// applied is a receiving service that notes each effect it applies, in
// order.
type applied struct {
	mu   sync.Mutex
	keys []string
}

func (a *applied) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.keys = append(a.keys, r.Header.Get(outbox.IdempotencyHeader))
	a.mu.Unlock()
	w.WriteHeader(http.StatusCreated)
}

func (a *applied) got() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.keys)
}

// TestDeliveryLostAndRepeated runs a Dispatcher, an HTTPSender and a
// NewReceiver end to end, each request and answer crossing a real
// connection, with the faults of a network and a store between them:
//
//   - a reply lost after the receiver applied the effect: the sender
//     retries, the receiver replays, the effect is applied once;
//   - a round's Settle lost after its effects, of two tokens on one
//     resource, were applied: the next round sends both again, and the
//     older one, coming after the newer token's, gets its first answer
//     (a repeat), not a stale refusal: neither is parked.
//
// Every effect is applied once, in order per resource. The control, the
// same without the receiver, applies the lost reply's effect twice.
func TestDeliveryLostAndRepeated(t *testing.T) {
	for _, receiver := range []bool{true, false} {
		t.Run(fmt.Sprintf("receiver %v", receiver), func(t *testing.T) {
			svc := &applied{}
			var h http.Handler = svc
			if receiver {
				h = newReceiver(t, fence.NewMemoryStore(), h)
			}
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			tr := &httpfault.Transport{Next: &http.Transport{}}
			t.Cleanup(tr.Next.(*http.Transport).CloseIdleConnections)
			sender, err := outbox.NewHTTPSender(outbox.WithHTTPClient(&http.Client{Transport: tr}))
			if err != nil {
				t.Fatal(err)
			}
			lostReply := effect("a", 5, 0)
			lostReply.Destination = srv.URL
			m := &faultyLog{MemoryLog: outbox.NewMemoryLog()}
			mustRecord(t, m.MemoryLog, lostReply)
			tr.LoseNextReply(func() {})
			stop, _ := start(t, newDispatcher(t, m, sender), newHolder(100))
			waitPending(t, m.MemoryLog, 0)

			older, newer := effect("b", 5, 0), effect("b", 6, 0)
			older.Destination, newer.Destination = srv.URL, srv.URL
			m.loseSettles.Store(true)
			lost := m.settles.Load()
			mustRecord(t, m.MemoryLog, older)
			mustRecord(t, m.MemoryLog, newer)
			poll.Until(t, "two rounds of both sent, their Settles lost", func() bool {
				return m.settles.Load() >= lost+2 && len(svc.got()) >= 3
			})
			m.loseSettles.Store(false)
			waitPending(t, m.MemoryLog, 0)
			stop()

			if parked, _ := m.Parked(t.Context(), outbox.All, 10); len(parked) != 0 {
				t.Errorf("parked %v, want none", parked)
			}
			got := svc.got()
			want := []string{lostReply.Key(), older.Key(), newer.Key()}
			if !receiver {
				if got[0] != lostReply.Key() || got[1] != lostReply.Key() {
					t.Fatalf("control: applied %q, want the lost reply's effect twice", got)
				}
				return
			}
			if !slices.Equal(got, want) {
				t.Fatalf("applied %q, want each once, in order: %q", got, want)
			}
		})
	}
}
