package outbox

import (
	"fmt"
	"net/http"
	"time"

	"github.com/fencelock/fencelock/fence"
)

// ReceiveOption configures [NewReceipts] and [NewReceiver].
type ReceiveOption interface{ applyReceive(*receiveOptions) }

type receiveOptions struct {
	keyRequired    bool
	tokenRequired  bool
	prefix         string
	pendingTimeout time.Duration
	maxBody        int
	headers        []string // canonical names of the headers an answer keeps
}

func defaultReceiveOptions() receiveOptions {
	return receiveOptions{
		keyRequired: true, tokenRequired: true, prefix: "outbox-receipts/",
		pendingTimeout: 30 * time.Second, maxBody: 64 << 10,
		headers: []string{"Content-Type", "Content-Encoding", "Content-Language", "Content-Location",
			"Location", "Etag", "Last-Modified", "Cache-Control", "Fencing-Refused"},
	}
}

type receiveOptionFunc func(*receiveOptions)

func (f receiveOptionFunc) applyReceive(o *receiveOptions) { f(o) }

// WithKeyRequired sets whether a delivery must carry an idempotency key.
// Default true: one without is refused (400, FailedPrecondition for gRPC)
// before the handler runs. With false it reaches the handler
// undeduplicated (its fencing token still checked against the floor).
func WithKeyRequired(required bool) ReceiveOption {
	return receiveOptionFunc(func(o *receiveOptions) { o.keyRequired = required })
}

// WithTokenRequired sets whether a delivery must carry a fencing token, as
// propagate.WithRequired does. Default true. With false a delivery
// without one is deduplicated but checked against no floor.
func WithTokenRequired(required bool) ReceiveOption {
	return receiveOptionFunc(func(o *receiveOptions) { o.tokenRequired = required })
}

// WithKeyPrefix sets the prefix of the keys [Receipts] writes in its
// store: PREFIX+"key/"+idempotency key for each delivery's receipt,
// PREFIX+"floor/"+lock name for each resource's floor. Default
// "outbox-receipts/". Several receivers sharing a store (and a floor
// for each lock name) use the same prefix; an empty one is refused.
func WithKeyPrefix(prefix string) ReceiveOption {
	return receiveOptionFunc(func(o *receiveOptions) { o.prefix = prefix })
}

// WithPendingTimeout sets how long a delivery in progress holds its key:
// a duplicate that comes in the meantime is refused as in flight (409,
// Retry-After), and one that comes later takes the key over and runs the
// handler again (the first is presumed dead). Default 30 s; it should
// exceed the handler's longest run, and stay well below the span of a
// dispatcher's retries (about 6 minutes with its defaults), or a receiver
// that crashed mid-handler holds the key until the effect is parked. It is measured with the
// receivers' clocks, which should agree to well within it.
func WithPendingTimeout(d time.Duration) ReceiveOption {
	return receiveOptionFunc(func(o *receiveOptions) { o.pendingTimeout = d })
}

// WithMaxAnswer sets the largest answer body kept for replay, in bytes.
// Default 64 KiB. A larger answer is kept without its body: a repeat
// gets the first status and headers, an empty body and
// "Idempotent-Replayed: true; body-omitted". 0 keeps no body.
func WithMaxAnswer(n int) ReceiveOption {
	return receiveOptionFunc(func(o *receiveOptions) { o.maxBody = n })
}

// WithReplayedHeaders sets the response headers kept with an answer and
// replayed to a repeat. Default Content-Type, Content-Encoding,
// Content-Language, Content-Location, Location, ETag, Last-Modified,
// Cache-Control and Fencing-Refused.
func WithReplayedHeaders(names ...string) ReceiveOption {
	return receiveOptionFunc(func(o *receiveOptions) {
		o.headers = make([]string, len(names))
		for i, n := range names {
			o.headers[i] = http.CanonicalHeaderKey(n)
		}
	})
}

func (o *receiveOptions) check() error {
	switch {
	case o.prefix == "":
		return fmt.Errorf("%w: outbox: WithKeyPrefix: empty prefix", fence.ErrInvalidArgument)
	case o.pendingTimeout <= 0:
		return fmt.Errorf("%w: outbox: WithPendingTimeout(%v): want > 0", fence.ErrInvalidArgument, o.pendingTimeout)
	case o.maxBody < 0:
		return fmt.Errorf("%w: outbox: WithMaxAnswer(%d): want >= 0", fence.ErrInvalidArgument, o.maxBody)
	}
	return nil
}
