package outbox_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/fence/propagate"
)

// TestReceiverSenderGivesUp: a sender that gives up while h applies the
// effect does not end h's context, so h's answer is kept and the next
// delivery gets it, h not running again. Without that, h's write would
// land under a cancelled context answered 503, and the effect be applied
// twice.
func TestReceiverSenderGivesUp(t *testing.T) {
	var runs atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	h, err := outbox.NewReceiver(fence.NewMemoryStore(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			close(started)
			<-release
		}
		if r.Context().Err() != nil {
			http.Error(w, "cancelled mid-apply", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	if err != nil {
		t.Fatal(err)
	}
	send := func(ctx context.Context) *httptest.ResponseRecorder {
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/mail", nil)
		req.Header.Set(outbox.IdempotencyHeader, "fl1-5-0-abc")
		req.Header.Set(propagate.Header, propagate.Fencing{Name: "order-1", Token: 5}.String())
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); send(ctx) }()
	<-started
	cancel() // the sender gives up
	close(release)
	<-done
	if w := send(t.Context()); w.Code != http.StatusCreated || w.Header().Get(outbox.ReplayedHeader) != "true" || runs.Load() != 1 {
		t.Fatalf("repeat: got %d (replayed %q), h ran %d times; want the first answer 201 replayed, h once", w.Code, w.Header().Get(outbox.ReplayedHeader), runs.Load())
	}
}
