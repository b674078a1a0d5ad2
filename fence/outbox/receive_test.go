package outbox_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/fence/propagate"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

// deliver sends one delivery to h as an HTTPSender does: the key and the
// fencing token in their headers ("" and the zero Fencing leave them out).
func deliver(h http.Handler, key string, f propagate.Fencing) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/effects", strings.NewReader("payload"))
	if key != "" {
		req.Header.Set(outbox.IdempotencyHeader, key)
	}
	if f != (propagate.Fencing{}) {
		req.Header.Set(propagate.Header, f.String())
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// counting is the receiving service's handler: it counts its runs and
// answers 201 with the run's number, and the Fencing it found.
type counting struct{ runs atomic.Int64 }

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := c.runs.Add(1)
	f, _ := propagate.FromContext(r.Context())
	w.Header().Set("Location", fmt.Sprintf("/receipts/%d", n))
	w.Header().Set("X-Not-Kept", "x")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, "run %d for %s@%d", n, f.Name, f.Token)
}

func newReceiver(t *testing.T, store fence.Store, h http.Handler, opts ...outbox.ReceiveOption) http.Handler {
	t.Helper()
	rv, err := outbox.NewReceiver(store, h, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return rv
}

var inv7 = propagate.Fencing{Name: "invoice-7", Token: 7}

// TestReceiverDuplicateRunsOnce: an effect delivered twice runs the
// handler once, and the second delivery gets the first answer. The
// control, without the receiver, runs it twice.
func TestReceiverDuplicateRunsOnce(t *testing.T) {
	key := outbox.Key("invoice-7", 7, 0)
	for _, tc := range []struct {
		name     string
		wrap     func(h http.Handler) http.Handler
		wantRuns int64
	}{
		{"receiver", func(h http.Handler) http.Handler { return newReceiver(t, fence.NewMemoryStore(), h) }, 1},
		{"control: no receiver", func(h http.Handler) http.Handler { return h }, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &counting{}
			h := tc.wrap(c)
			first, second := deliver(h, key, inv7), deliver(h, key, inv7)
			if got := c.runs.Load(); got != tc.wantRuns {
				t.Fatalf("got %d runs of the handler, want %d", got, tc.wantRuns)
			}
			if tc.wantRuns != 1 {
				return
			}
			if first.Code != http.StatusCreated || first.Body.String() != "run 1 for invoice-7@7" {
				t.Fatalf("first: got %d %q, want 201 %q", first.Code, first.Body, "run 1 for invoice-7@7")
			}
			if second.Code != first.Code || second.Body.String() != first.Body.String() || second.Header().Get("Location") != "/receipts/1" {
				t.Errorf("repeat: got %d %q Location %q, want the first answer", second.Code, second.Body, second.Header().Get("Location"))
			}
			if got := second.Header().Get(outbox.ReplayedHeader); got != "true" {
				t.Errorf("repeat: got %s %q, want true", outbox.ReplayedHeader, got)
			}
			if got := second.Header().Get("X-Not-Kept"); got != "" {
				t.Errorf("repeat: got X-Not-Kept %q, want it left out (not in WithReplayedHeaders)", got)
			}
		})
	}
}

// TestReceiverStaleTokenRefused: once token 8 is accepted for a lock
// name, an effect with token 7 is refused with propagate's stale answer
// and the handler does not run; a repeat of an effect that was accepted
// before token 8 came gets its first answer, not 409. The control,
// without the receiver, runs the old effect.
func TestReceiverStaleTokenRefused(t *testing.T) {
	t.Run("receiver", func(t *testing.T) {
		c := &counting{}
		h := newReceiver(t, fence.NewMemoryStore(), c)
		old := deliver(h, "k-old", inv7) // accepted while 7 was the newest
		if old.Code != http.StatusCreated {
			t.Fatalf("got %d, want 201", old.Code)
		}
		deliver(h, "k-new", propagate.Fencing{Name: "invoice-7", Token: 8})
		late := deliver(h, "k-late", inv7)
		if late.Code != propagate.StatusStale || !strings.HasPrefix(late.Header().Get(propagate.RefusedHeader), "stale") {
			t.Fatalf("late effect of token 7: got %d %s %q, want 409 stale", late.Code, propagate.RefusedHeader, late.Header().Get(propagate.RefusedHeader))
		}
		if got := c.runs.Load(); got != 2 {
			t.Fatalf("got %d runs, want 2: the stale effect must not run the handler", got)
		}
		again := deliver(h, "k-late", inv7)
		if again.Code != propagate.StatusStale || again.Header().Get(outbox.ReplayedHeader) != "true" {
			t.Errorf("repeat of the stale effect: got %d, replayed %q, want its first answer, 409", again.Code, again.Header().Get(outbox.ReplayedHeader))
		}
		repeat := deliver(h, "k-old", inv7)
		if repeat.Code != http.StatusCreated || repeat.Body.String() != old.Body.String() {
			t.Errorf("repeat of an effect accepted before token 8: got %d %q, want its first answer", repeat.Code, repeat.Body)
		}
		other := deliver(h, "k-other", propagate.Fencing{Name: "invoice-9", Token: 1})
		if other.Code != http.StatusCreated {
			t.Errorf("another lock name's token 1: got %d, want 201 (each name has its own floor)", other.Code)
		}
	})
	t.Run("control: no receiver", func(t *testing.T) {
		c := &counting{}
		h, _ := propagate.NewHandler(c)
		deliver(h, "k-new", propagate.Fencing{Name: "invoice-7", Token: 8})
		if late := deliver(h, "k-late", inv7); late.Code != http.StatusCreated || c.runs.Load() != 2 {
			t.Fatalf("got %d and %d runs, want the unprotected handler to run the stale effect", late.Code, c.runs.Load())
		}
	})
}

// blocking is a handler that signals entered and waits for release.
type blocking struct {
	counting
	entered chan struct{}
	release chan struct{}
}

func newBlocking() *blocking {
	return &blocking{entered: make(chan struct{}, 8), release: make(chan struct{})}
}

func (b *blocking) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.entered <- struct{}{}
	<-b.release
	b.counting.ServeHTTP(w, r)
}

// TestReceiverConcurrentDuplicate: a duplicate that comes while the
// first delivery is in the handler gets 409 with Retry-After; a later one
// the first answer.
func TestReceiverConcurrentDuplicate(t *testing.T) {
	b := newBlocking()
	h := newReceiver(t, fence.NewMemoryStore(), b)
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- deliver(h, "k", inv7) }()
	<-b.entered
	dup := deliver(h, "k", inv7)
	if dup.Code != http.StatusConflict || dup.Header().Get("Retry-After") == "" || dup.Header().Get(propagate.RefusedHeader) != "" {
		t.Fatalf("duplicate in flight: got %d Retry-After %q, want 409 with Retry-After and no Fencing-Refused", dup.Code, dup.Header().Get("Retry-After"))
	}
	close(b.release)
	first := <-done
	if later := deliver(h, "k", inv7); later.Body.String() != first.Body.String() || b.runs.Load() != 1 {
		t.Fatalf("after the first: got %q and %d runs, want %q and 1", later.Body, b.runs.Load(), first.Body)
	}
}

// TestReceiverPendingTakenOver: a delivery in progress for longer than
// WithPendingTimeout is presumed dead: the next delivery runs the handler
// and its answer is kept; the first one's, when it ends, is not.
func TestReceiverPendingTakenOver(t *testing.T) {
	b := newBlocking()
	h := newReceiver(t, fence.NewMemoryStore(), b, outbox.WithPendingTimeout(50*time.Millisecond))
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- deliver(h, "k", inv7) }()
	<-b.entered
	second := make(chan *httptest.ResponseRecorder, 1)
	poll.Until(t, "the pending delivery's timeout", func() bool {
		go func() { second <- deliver(h, "k", inv7) }()
		select {
		case <-b.entered: // taken over: the second is in the handler
			return true
		case w := <-second:
			if w.Code != http.StatusConflict {
				t.Fatalf("got %d, want 409 until the timeout", w.Code)
			}
			return false
		}
	})
	close(b.release)
	<-done
	took := <-second
	if later := deliver(h, "k", inv7); later.Body.String() != took.Body.String() || b.runs.Load() != 2 {
		t.Fatalf("got %q and %d runs, want the second delivery's answer %q kept, and 2 runs", later.Body, b.runs.Load(), took.Body)
	}
}

// TestReceiverRetriedAnswersNotKept: an answer a sender retries (5xx,
// 429) is not kept, so the next delivery runs the handler again; nor is
// one the handler never gave (it panicked).
func TestReceiverRetriedAnswersNotKept(t *testing.T) {
	for _, fail := range []func(w http.ResponseWriter){
		func(w http.ResponseWriter) { http.Error(w, "db down", http.StatusInternalServerError) },
		func(w http.ResponseWriter) { http.Error(w, "slow down", http.StatusTooManyRequests) },
		func(w http.ResponseWriter) { panic("handler bug") },
	} {
		var runs atomic.Int64
		h := newReceiver(t, fence.NewMemoryStore(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if runs.Add(1) == 1 {
				fail(w)
				return
			}
			fmt.Fprint(w, "ok")
		}))
		func() {
			defer func() { _ = recover() }()
			deliver(h, "k", inv7)
		}()
		if w := deliver(h, "k", inv7); w.Code != http.StatusOK || w.Body.String() != "ok" || runs.Load() != 2 {
			t.Fatalf("after a failed run: got %d %q, %d runs, want 200 \"ok\" from a second run", w.Code, w.Body, runs.Load())
		}
		if w := deliver(h, "k", inv7); w.Body.String() != "ok" || runs.Load() != 2 {
			t.Fatalf("third delivery: got %q, %d runs, want the kept \"ok\", 2 runs", w.Body, runs.Load())
		}
	}
}

// TestReceiverManyAtOnce: deliveries of one effect from many goroutines
// at once run the handler once.
func TestReceiverManyAtOnce(t *testing.T) {
	testManyAtOnce(t, fence.NewMemoryStore())
}

func testManyAtOnce(t *testing.T, store fence.Store) {
	t.Helper()
	c := &counting{}
	h := newReceiver(t, store, c)
	var wg sync.WaitGroup
	codes := make([]int, 16)
	for i := range codes {
		wg.Go(func() { codes[i] = deliver(h, "k-many", propagate.Fencing{Name: "invoice-many", Token: 1}).Code })
	}
	wg.Wait()
	if got := c.runs.Load(); got != 1 {
		t.Fatalf("got %d runs, want 1 (codes %v)", got, codes)
	}
	for _, code := range codes {
		if code != http.StatusCreated && code != http.StatusConflict {
			t.Errorf("got %d, want 201 or 409 (in flight)", code)
		}
	}
}

func TestReceiverRefusesBadDeliveries(t *testing.T) {
	c := &counting{}
	h := newReceiver(t, fence.NewMemoryStore(), c)
	for _, tc := range []struct {
		name    string
		req     func(r *http.Request)
		status  int
		refused string
	}{
		{"no idempotency key", func(r *http.Request) { r.Header.Del(outbox.IdempotencyHeader) }, 400, ""},
		{"two idempotency keys", func(r *http.Request) { r.Header.Add(outbox.IdempotencyHeader, "b") }, 400, ""},
		{"key with a space", func(r *http.Request) { r.Header.Set(outbox.IdempotencyHeader, "a b") }, 400, ""},
		{"key too long", func(r *http.Request) { r.Header.Set(outbox.IdempotencyHeader, strings.Repeat("k", 256)) }, 400, ""},
		{"no fencing token", func(r *http.Request) { r.Header.Del(propagate.Header) }, 400, "missing"},
		{"bad fencing token", func(r *http.Request) { r.Header.Set(propagate.Header, "token=0") }, 400, "invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/", nil)
			req.Header.Set(outbox.IdempotencyHeader, "a")
			req.Header.Set(propagate.Header, inv7.String())
			tc.req(req)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != tc.status || w.Header().Get(propagate.RefusedHeader) != tc.refused {
				t.Errorf("got %d %q, want %d %q", w.Code, w.Header().Get(propagate.RefusedHeader), tc.status, tc.refused)
			}
		})
	}
	if c.runs.Load() != 0 {
		t.Errorf("got %d runs, want none", c.runs.Load())
	}
}

// TestReceiverOptional: WithKeyRequired(false) lets a delivery without a
// key through undeduplicated, its token still checked against the
// floor; WithTokenRequired(false) deduplicates one without a token.
func TestReceiverOptional(t *testing.T) {
	c := &counting{}
	h := newReceiver(t, fence.NewMemoryStore(), c, outbox.WithKeyRequired(false), outbox.WithTokenRequired(false))
	deliver(h, "", inv7)
	deliver(h, "", inv7)
	if c.runs.Load() != 2 {
		t.Fatalf("got %d runs, want 2 without a key", c.runs.Load())
	}
	deliver(h, "", propagate.Fencing{Name: "invoice-7", Token: 8})
	if w := deliver(h, "", inv7); w.Code != propagate.StatusStale || c.runs.Load() != 3 {
		t.Fatalf("stale without a key: got %d, %d runs, want 409 and 3 runs", w.Code, c.runs.Load())
	}
	deliver(h, "k", propagate.Fencing{})
	if w := deliver(h, "k", propagate.Fencing{}); w.Header().Get(outbox.ReplayedHeader) != "true" || c.runs.Load() != 4 {
		t.Fatalf("without a token: got replayed %q, %d runs, want a replay and 4 runs", w.Header().Get(outbox.ReplayedHeader), c.runs.Load())
	}
}

func TestReceiverLargeAnswerKeptWithoutBody(t *testing.T) {
	c := &counting{}
	h := newReceiver(t, fence.NewMemoryStore(), c, outbox.WithMaxAnswer(4))
	deliver(h, "k", inv7)
	w := deliver(h, "k", inv7)
	if w.Code != http.StatusCreated || w.Body.Len() != 0 || w.Header().Get(outbox.ReplayedHeader) != "true; body-omitted" || c.runs.Load() != 1 {
		t.Fatalf("got %d %q %q, %d runs, want 201, no body, body-omitted, 1 run", w.Code, w.Body, w.Header().Get(outbox.ReplayedHeader), c.runs.Load())
	}
}

// storeOnly is a fence.Store without Updater.
type storeOnly struct{ fence.Store }

func TestNewReceiverRefusesBadInput(t *testing.T) {
	mem := fence.NewMemoryStore()
	var typedNil *fence.MemoryStore
	for _, tc := range []struct {
		name  string
		store fence.Store
		h     http.Handler
		opts  []outbox.ReceiveOption
	}{
		{"nil store", nil, &counting{}, nil},
		{"typed nil store", typedNil, &counting{}, nil},
		{"store without Updater", storeOnly{mem}, &counting{}, nil},
		{"nil handler", mem, nil, nil},
		{"nil option", mem, &counting{}, []outbox.ReceiveOption{nil}},
		{"empty prefix", mem, &counting{}, []outbox.ReceiveOption{outbox.WithKeyPrefix("")}},
		{"zero pending timeout", mem, &counting{}, []outbox.ReceiveOption{outbox.WithPendingTimeout(0)}},
		{"negative max answer", mem, &counting{}, []outbox.ReceiveOption{outbox.WithMaxAnswer(-1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := outbox.NewReceiver(tc.store, tc.h, tc.opts...)
			if h != nil || !errors.Is(err, fence.ErrInvalidArgument) {
				t.Fatalf("got %v, %v, want nil and an error matching fence.ErrInvalidArgument", h, err)
			}
		})
	}
}
