package outbox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/propagate"
	"github.com/fencelock/fencelock/internal/nilcheck"
)

// ReplayedHeader is set, to "true", on an answer [NewReceiver] replays to
// a repeated delivery ("true; body-omitted" when the first answer's body
// was too large to keep: see [WithMaxAnswer]).
const ReplayedHeader = "Idempotent-Replayed"

// settleTimeout bounds recording an answer, after the handler ran: the
// request's own context may have ended (the sender gave up), and the
// answer must be recorded all the same.
const settleTimeout = 10 * time.Second

// NewReceiver returns h wrapped for a service that receives effects (an
// [HTTPSender]'s requests, or any carrying Idempotency-Key and
// Fencing-Token), so that h applies each effect once and never one whose
// token is stale:
//
//	h, err := outbox.NewReceiver(store, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
//		f, _ := propagate.FromContext(r.Context()) // the effect's resource and token
//		...
//	}))
//
// The Fencing-Token header is parsed into the request's context, as
// propagate.NewHandler does (refusing, with 400, one that does not parse,
// or is missing unless [WithTokenRequired](false)). Then, through a
// [Receipts] kept in store:
//
//   - a repeat of a delivery that was answered (the same Idempotency-Key)
//     gets the first answer (status, the headers [WithReplayedHeaders]
//     names, body) with "Idempotent-Replayed: true", and h does not run;
//     this is checked first, so a repeat of an old effect gets its first
//     answer, not a stale refusal;
//   - a duplicate that comes while the first is in progress gets 409
//     Conflict with "Retry-After: 1", and h does not run; after
//     [WithPendingTimeout] the first is presumed dead and the next
//     delivery runs h again;
//   - a token below the highest accepted for its lock name (its floor,
//     raised by a fenced write in store, so the store's check is the
//     guarantee) gets propagate's stale answer (409, "Fencing-Refused:
//     stale"), kept as the key's answer, and h does not run;
//   - otherwise h runs, and its answer is kept, unless it is one a sender
//     retries (408, 425, 429, 5xx) or h panics: then the key is released,
//     and the next delivery runs h again. h's request context does not end
//     when the sender gives up (it ends after [WithPendingTimeout]), so
//     that an effect h applied is not answered with a 5xx, released, and
//     applied again by the next delivery.
//
// A request without Idempotency-Key is refused with 400, unless
// [WithKeyRequired](false): it then reaches h with its token checked
// against the floor only. A key that is not visible ASCII of at most
// [MaxIdempotencyKeyLen] bytes, or a second one, is refused with 400.
// When the store fails, the answer is 503 with "Retry-After: 1".
//
// h fences its own writes with the token (the floor only keeps out
// deliveries that come after a newer one was accepted; two in flight at
// once are told apart by h's store). NewReceiver fails with an error
// matching [fence.ErrInvalidArgument] for a nil h, and as [NewReceipts].
func NewReceiver(store fence.Store, h http.Handler, opts ...ReceiveOption) (http.Handler, error) {
	if nilcheck.IsNil(h) {
		return nil, fmt.Errorf("%w: outbox: NewReceiver: nil handler", fence.ErrInvalidArgument)
	}
	r, err := NewReceipts(store, opts...)
	if err != nil {
		return nil, err
	}
	return propagate.NewHandler(&receiver{r: r, h: h}, propagate.WithRequired(r.o.tokenRequired))
}

type receiver struct {
	r *Receipts
	h http.Handler
}

func (rv *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	f, _ := propagate.FromContext(req.Context())
	keys := req.Header.Values(IdempotencyHeader)
	switch {
	case len(keys) == 0 && rv.r.o.keyRequired:
		http.Error(w, "outbox: the request carries no "+IdempotencyHeader+" header and the service requires one", http.StatusBadRequest)
		return
	case len(keys) == 0:
		rv.unkeyed(w, req, f)
		return
	case len(keys) > 1:
		http.Error(w, fmt.Sprintf("outbox: %d %s headers, want one", len(keys), IdempotencyHeader), http.StatusBadRequest)
		return
	}
	d, err := rv.r.Begin(req.Context(), keys[0], f)
	if err != nil {
		refuseDelivery(w, err)
		return
	}
	if d.Replay != nil {
		replay(w, d.Replay)
		return
	}
	rec := &recorder{ResponseWriter: w, max: rv.r.o.maxBody, keep: rv.r.o.headers}
	defer rv.settle(req.Context(), d, rec) // also when h panics: rec.done stays false
	if propagate.WriteStale(rec, d.Stale) {
		rec.done = true
		return
	}
	// h applies the effect under a context the sender cannot cancel: a
	// sender that gave up (its timeout, a deposed dispatcher's end) would
	// otherwise leave h's write landed and its answer a 5xx, the key
	// released, and the effect applied again by the next delivery. The
	// delivery holds its key for WithPendingTimeout; so long, h may run.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(req.Context()), rv.r.o.pendingTimeout)
	defer cancel()
	rv.h.ServeHTTP(rec, req.WithContext(ctx))
	rec.done = true
}

// unkeyed serves a request without an idempotency key: its token checked
// against the floor, then h.
func (rv *receiver) unkeyed(w http.ResponseWriter, req *http.Request, f propagate.Fencing) {
	err := rv.r.Floor(req.Context(), f)
	if propagate.WriteStale(w, err) {
		return
	}
	if err != nil {
		refuseDelivery(w, err)
		return
	}
	rv.h.ServeHTTP(w, req)
}

// settle records rec's answer as d's, or releases d when the answer is
// one a sender retries or h did not finish.
func (rv *receiver) settle(ctx context.Context, d *Delivery, rec *recorder) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if !rec.done {
		_ = d.Release(ctx)
		return
	}
	a := rec.answer()
	if retried(a.Status) {
		_ = d.Release(ctx)
		return
	}
	_ = d.Finish(ctx, a) // on failure the key stays pending until WithPendingTimeout
}

// retried reports whether a sender retries an answer with status (the
// rule of httpOutcome): such an answer is not kept.
func retried(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusTooEarly || status == http.StatusTooManyRequests || status >= 500
}

// refuseDelivery answers a delivery Begin (or Floor) refused.
func refuseDelivery(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrInFlight):
		w.Header().Set("Retry-After", "1")
		http.Error(w, err.Error(), http.StatusConflict)
	case errors.Is(err, fence.ErrInvalidArgument):
		http.Error(w, err.Error(), http.StatusBadRequest)
	default:
		w.Header().Set("Retry-After", "1")
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	}
}

// replay writes a kept answer.
func replay(w http.ResponseWriter, a *Answer) {
	for k, vs := range a.Header {
		w.Header()[k] = vs
	}
	if a.Omitted {
		w.Header().Set(ReplayedHeader, "true; body-omitted")
	} else {
		w.Header().Set(ReplayedHeader, "true")
	}
	w.WriteHeader(a.Status)
	_, _ = w.Write(a.Body)
}
