package outbox

import (
	"context"
)

// Sender delivers one effect to its destination. The [Dispatcher] calls
// Send with a context that bounds the attempt ([WithSendTimeout]) and
// ends when the dispatcher's lock is lost.
//
// Send returns nil once the receiver has the effect (and may have applied
// it: delivery is at least once, so the receiver deduplicates on
// [Effect.Key]); an error wrapped with [Permanent] when retrying cannot
// help, and the dispatcher parks the effect; any other error to have it
// retried with backoff. A Send that panics has its effect parked with the
// panic as the reason; the dispatcher goes on. Senders must be safe for
// concurrent use: a dispatcher sends the effects of different resources at
// once.
type Sender interface {
	Send(ctx context.Context, e Effect) error
}

// SenderFunc adapts a function to a [Sender]: the sender for anything
// that is neither HTTP nor JetStream (an SMTP relay, a payment SDK). The
// function should pass [Effect.Key] to the receiver as its idempotency key
// where the receiver takes one.
type SenderFunc func(ctx context.Context, e Effect) error

// Send calls f(ctx, e).
func (f SenderFunc) Send(ctx context.Context, e Effect) error { return f(ctx, e) }
