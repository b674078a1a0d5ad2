package outbox

import (
	"context"

	"github.com/fencelock/fencelock/fence"
)

// Log is the store side of an outbox: what a [Dispatcher] needs from the
// store where effects are recorded. Each store's adapter implements it
// (fence/postgres, fence/sql, fence/etcd, fence/dynamodb, fence/redis);
// the dispatcher's algorithm is written once, over it. Implementations are
// safe for concurrent use.
type Log interface {
	// Pending returns up to limit effects in scope that are neither
	// delivered nor parked, whose resource is not in skip, in the order
	// they were recorded (so, per resource, in the order of the writes
	// that recorded them and, within one write, of its slice). It reads
	// what is committed; it claims nothing.
	Pending(ctx context.Context, scope Scope, skip []string, limit int) ([]Effect, error)

	// Settle records, in one write fenced on by (the dispatcher's own
	// resource and token), that each of done was delivered or parked. A
	// token below the highest that has settled on by.Resource is refused
	// with an error matching [fence.ErrStale], and nothing is marked; so a
	// deposed dispatcher marks nothing once the next one has settled, and
	// Settle with no effects is how a dispatcher takes over (it raises
	// the floor) before it delivers anything. An effect already settled,
	// or no longer recorded, is passed over. When the outcome cannot be
	// told the error matches [fence.ErrUnknownOutcome].
	Settle(ctx context.Context, by fence.Claim, done []Settled) error
}

// Watcher is implemented by logs that can tell a dispatcher promptly that
// an effect may have been recorded (PostgreSQL's LISTEN/NOTIFY, an etcd
// watch), so that it need not poll tightly.
type Watcher interface {
	// Watch returns a channel that receives a value (coalesced: capacity
	// one, sent without blocking) after an effect in scope may have been
	// recorded. The watch is in place when Watch returns, so an effect
	// recorded after that is not missed. The channel is closed when ctx
	// ends or the watch breaks; the dispatcher then polls and calls Watch
	// again.
	Watch(ctx context.Context, scope Scope) (<-chan struct{}, error)
}

// Checker is implemented by logs that can tell, at a dispatcher's start,
// whether the store grants what the dispatcher needs (reading effects,
// marking them, its fence). Check returns an error matching
// [ErrNotPermitted], with the store's words, when it does not.
type Checker interface {
	Check(ctx context.Context, scope Scope) error
}

// Settled is one effect's outcome as a [Dispatcher] records it: delivered
// when Parked is empty, otherwise parked for the reason Parked gives.
// Attempts is how many deliveries were tried.
type Settled struct {
	Effect   Effect
	Parked   string
	Attempts int
}

// Parked is a parked effect as a store reports it: the effect, why, and
// how many deliveries were tried.
type Parked struct {
	Effect   Effect
	Reason   string
	Attempts int
}

// Requeuer is implemented by logs whose parked effects an operator can
// list and send back to the dispatcher (after fixing the receiver).
type Requeuer interface {
	// Parked returns up to limit parked effects in scope, in the order
	// they were recorded.
	Parked(ctx context.Context, scope Scope, limit int) ([]Parked, error)
	// Requeue makes the parked effect e pending again, at its place in
	// its resource's order. An effect that is not parked gets an error
	// matching [fence.ErrNotFound].
	Requeue(ctx context.Context, e Effect) error
}
