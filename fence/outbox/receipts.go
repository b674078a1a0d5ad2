package outbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/propagate"
	"github.com/fencelock/fencelock/internal/nilcheck"
)

// MaxIdempotencyKeyLen is the longest idempotency key [Receipts] takes, in
// bytes.
const MaxIdempotencyKeyLen = 255

// receiptToken is the token of every write on a receipt's key. A receipt
// is not a holder's resource: its writes are conditional on what they
// read (Updater.Update, atomic against a writer with the same token),
// which is the compare-and-swap claiming, finishing and releasing need.
const receiptToken fence.Token = 1

// Receipts is the ledger of a service that receives effects: for each
// idempotency key, the delivery in progress or the first answer, and for
// each lock name, the highest fencing token accepted (the floor), kept in
// a fenced store ([fence.Store] that is also a [fence.Updater], as every
// adapter's is). [NewReceiver] (HTTP) and fence/outbox/outboxgrpc (gRPC)
// are written over it; use it directly for other transports (a JetStream
// consumer, deduplicating on Nats-Msg-Id beyond the stream's window).
//
// A delivery is [Receipts.Begin], then the handler, then
// [Delivery.Finish] with its answer or [Delivery.Release] to let the next
// delivery run the handler again. Receipts is safe for concurrent use,
// and several receivers (processes) share one through their store.
type Receipts struct {
	store fence.Store
	up    fence.Updater
	o     receiveOptions
	now   func() time.Time
}

// NewReceipts returns the ledger kept in store. It fails with an error
// matching [fence.ErrInvalidArgument] for a nil store, a store that is not
// a [fence.Updater], a nil or invalid option.
func NewReceipts(store fence.Store, opts ...ReceiveOption) (*Receipts, error) {
	if nilcheck.IsNil(store) {
		return nil, fmt.Errorf("%w: outbox: NewReceipts: nil store", fence.ErrInvalidArgument)
	}
	up, ok := store.(fence.Updater)
	if !ok {
		return nil, fmt.Errorf("%w: outbox: NewReceipts: %T is not a fence.Updater", fence.ErrInvalidArgument, store)
	}
	o := defaultReceiveOptions()
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: outbox: NewReceipts: nil ReceiveOption", fence.ErrInvalidArgument)
		}
		opt.applyReceive(&o)
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	return &Receipts{store: store, up: up, o: o, now: time.Now}, nil
}

// KeyRequired reports [WithKeyRequired]'s setting, for a transport's
// middleware.
func (r *Receipts) KeyRequired() bool { return r.o.keyRequired }

// TokenRequired reports [WithTokenRequired]'s setting, for a transport's
// middleware.
func (r *Receipts) TokenRequired() bool { return r.o.tokenRequired }

// PendingTimeout returns how long a delivery in progress holds its key
// ([WithPendingTimeout]): the longest a handler should run.
func (r *Receipts) PendingTimeout() time.Duration { return r.o.pendingTimeout }

// Answer is the first answer to a delivery, as [Receipts] keeps it for
// replay: an HTTP status, the headers [WithReplayedHeaders] names, and
// the body, or no body and Omitted when it was larger than
// [WithMaxAnswer]. Other transports put their own answer in it (the gRPC
// interceptor: the code as Status, the marshalled message as Body).
type Answer struct {
	Status  int         `json:"status"`
	Header  http.Header `json:"header,omitempty"`
	Body    []byte      `json:"body,omitempty"`
	Omitted bool        `json:"omitted,omitempty"`
}

// Delivery is one delivery that [Receipts.Begin] let through. Exactly one
// of three holds: Replay is not nil (a repeat: answer it with Replay, and
// call nothing else); Stale is not nil (its token is below its lock's
// floor: answer with a stale refusal, propagate.WriteStale, and record
// that answer with Finish); or neither (the first delivery: run the
// handler, then Finish or Release).
type Delivery struct {
	Replay *Answer
	Stale  error // matches fence.ErrStale; a *fence.StaleError

	r     *Receipts
	key   string // the receipt's key in the store
	owner string // this delivery's mark on the pending receipt
}

// receipt is what the store holds under a receipt's key.
type receipt struct {
	State  string  `json:"state"`            // statePending, stateDone or stateFree
	Owner  string  `json:"owner,omitempty"`  // pending's: the delivery's random mark
	Since  int64   `json:"since,omitempty"`  // pending's: when it was claimed, Unix nanoseconds
	Answer *Answer `json:"answer,omitempty"` // done's
}

const (
	statePending = "pending"
	stateDone    = "done"
	stateFree    = "free" // released: as if absent
)

// Begin starts handling the delivery with idempotency key key and
// fencing f (the zero Fencing when the delivery carries none). In one
// conditional write on the key's receipt it finds a first answer (and
// returns it as Replay), a delivery in progress (ErrInFlight), or nothing,
// or a delivery in progress for longer than [WithPendingTimeout], which it
// takes over; it then raises f.Name's floor to f.Token with a fenced write
// (the store refusing a lower token: Stale). So a repeat gets its first
// answer even when its token has since been overtaken.
//
// Errors: [ErrInvalidIdempotencyKey] before any I/O; [ErrInFlight]; the
// store's errors (fence.ErrUnknownOutcome, fence.ErrConflict when the
// receipt kept changing), after which the receipt is released where it
// was claimed. ctx bounds the store's calls.
func (r *Receipts) Begin(ctx context.Context, key string, f propagate.Fencing) (*Delivery, error) {
	if err := checkIdempotencyKey(key); err != nil {
		return nil, err
	}
	d := &Delivery{r: r, key: r.o.prefix + "key/" + key, owner: mark()}
	var replay *Answer
	err := r.up.Update(ctx, d.key, receiptToken, func(old fence.Record) ([]byte, error) {
		replay = nil
		rc, err := decodeReceipt(old.Value)
		switch {
		case err != nil:
			return nil, err
		case rc.State == stateDone:
			replay = rc.Answer
			return nil, errReplay
		case rc.State == statePending && r.now().Sub(time.Unix(0, rc.Since)) < r.o.pendingTimeout:
			return nil, ErrInFlight
		}
		return json.Marshal(receipt{State: statePending, Owner: d.owner, Since: r.now().UnixNano()})
	})
	switch {
	case errors.Is(err, errReplay):
		return &Delivery{Replay: replay}, nil
	case errors.Is(err, fence.ErrUnknownOutcome):
		// The claim may have landed: free it if it did, or the retry
		// meets its own claim, in flight, until WithPendingTimeout.
		d.releaseAfter(ctx)
		return nil, fmt.Errorf("outbox: delivery %q: %w", key, err)
	case err != nil:
		return nil, fmt.Errorf("outbox: delivery %q: %w", key, err)
	}
	if err := r.Floor(ctx, f); errors.Is(err, fence.ErrStale) {
		d.Stale = err
	} else if err != nil {
		d.releaseAfter(ctx)
		return nil, err
	}
	return d, nil
}

// errReplay aborts Begin's Update when the receipt holds an answer.
var errReplay = errors.New("outbox: replay")

// Floor raises f.Name's floor to f.Token with a fenced write, which the
// store refuses, with an error matching [fence.ErrStale], when a higher
// token has been accepted for f.Name. The zero Fencing is let through.
// ctx bounds the write.
func (r *Receipts) Floor(ctx context.Context, f propagate.Fencing) error {
	if f == (propagate.Fencing{}) {
		return nil
	}
	if err := f.Validate(); err != nil {
		return err
	}
	return r.store.Put(ctx, r.o.prefix+"floor/"+f.Name, f.Token, []byte(f.Token.String()))
}

// Finish records a as the delivery's answer, replayed to every repeat
// from then on (its body left out when larger than [WithMaxAnswer]). It
// returns [ErrTakenOver] when a later delivery has taken the key over,
// and the store's errors; the receipt then stays pending until
// [WithPendingTimeout]. On a replay, which holds nothing, it does nothing.
// ctx bounds the write.
func (d *Delivery) Finish(ctx context.Context, a Answer) error {
	if d == nil || d.r == nil {
		return nil // a replay holds nothing
	}
	if len(a.Body) > d.r.o.maxBody {
		a.Body, a.Omitted = nil, true
	}
	return d.settle(ctx, receipt{State: stateDone, Answer: &a})
}

// Release gives the delivery's key up without an answer, so that the next
// delivery runs the handler again: after a failure that a retry may not
// meet (a 5xx). Errors as for [Delivery.Finish].
func (d *Delivery) Release(ctx context.Context) error {
	return d.settle(ctx, receipt{State: stateFree})
}

// releaseAfter releases d after Begin failed, whether or not ctx has
// ended, within settleTimeout.
func (d *Delivery) releaseAfter(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	_ = d.Release(ctx)
}

// settle writes rc on the delivery's receipt if it is still the
// delivery's own.
func (d *Delivery) settle(ctx context.Context, rc receipt) error {
	if d == nil || d.r == nil {
		return nil // a replay holds nothing
	}
	value, err := json.Marshal(rc)
	if err != nil {
		return err
	}
	return d.r.up.Update(ctx, d.key, receiptToken, func(old fence.Record) ([]byte, error) {
		cur, err := decodeReceipt(old.Value)
		if err != nil {
			return nil, err
		}
		if cur.State != statePending || cur.Owner != d.owner {
			return nil, ErrTakenOver
		}
		return value, nil
	})
}

// decodeReceipt reads a receipt; an absent one reads as free.
func decodeReceipt(b []byte) (receipt, error) {
	if len(b) == 0 {
		return receipt{State: stateFree}, nil
	}
	var rc receipt
	if err := json.Unmarshal(b, &rc); err != nil {
		return receipt{}, fmt.Errorf("%w: %v", ErrCorruptReceipt, err)
	}
	switch rc.State {
	case statePending, stateFree:
	case stateDone:
		if rc.Answer == nil {
			return receipt{}, fmt.Errorf("%w: done without an answer", ErrCorruptReceipt)
		}
	default:
		return receipt{}, fmt.Errorf("%w: state %q", ErrCorruptReceipt, rc.State)
	}
	return rc, nil
}

// checkIdempotencyKey returns an error matching ErrInvalidIdempotencyKey
// unless key is 1 to MaxIdempotencyKeyLen bytes of visible ASCII.
func checkIdempotencyKey(key string) error {
	if key == "" || len(key) > MaxIdempotencyKeyLen {
		return fmt.Errorf("%w: %d bytes, want 1 to %d", ErrInvalidIdempotencyKey, len(key), MaxIdempotencyKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if key[i] <= ' ' || key[i] > '~' {
			return fmt.Errorf("%w: byte %#x at %d (want visible ASCII)", ErrInvalidIdempotencyKey, key[i], i)
		}
	}
	return nil
}

// mark returns a random mark telling one delivery's pending receipt from
// another's.
func mark() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}
