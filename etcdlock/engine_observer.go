package etcdlock

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencelock/fencelock/fence"
)

// engineObserver is told of the engine's work, in the shape of pgx's tracers: a
// start and an end for each call that takes time, an event for the rest,
// each given a value that carries what it may record. The engine calls it
// and reads nothing back but a context and an observation to hand to the
// end; telemetry (telemetry_calls.go) is the one observer, and reads
// nothing of the engine's but these values. Its methods are called from
// any goroutine, and must not block.
type engineObserver interface {
	// acquireStart and acquireEnd frame one acquisition of any kind (the
	// call of Lock, RLock, Acquire, Campaign, Join, …); acquireEnd gets
	// the context and the observation acquireStart returned.
	acquireStart(ctx context.Context, e acquireStartEvent) (context.Context, observation)
	acquireEnd(ctx context.Context, o observation, e acquireEndEvent)
	// holdStart is when a lock just acquired starts being held, for
	// lockEndEvent.acquired: the zero time when the observer does not
	// time holds, which spares reading the clock.
	holdStart() time.Time
	// releaseStart and releaseEnd frame one Unlock (or Resign, Leave, …).
	releaseStart(ctx context.Context, e lockEvent) (context.Context, observation)
	releaseEnd(o observation, e releaseEndEvent)
	// releaseFailed: a release's request failed; it is retried in the
	// background. cleanupRetried: one background retry of a release or of
	// a failed acquisition's cleanup.
	releaseFailed(e lockEvent, err error)
	cleanupRetried()
	// lockEnded: a held lock (or term, …) ended, released or lost.
	lockEnded(e lockEndEvent)
	// renewed: a keepalive was acknowledged. sessionEnded: a session was
	// lost and dropped for a new one.
	renewed(e renewEvent)
	sessionEnded(e sessionEndEvent)
}

// observation is what an observer's start hands to its end, through the
// engine, which does not read it.
type observation struct {
	span  trace.Span
	start time.Time // zero when neither timed nor logged
	timed bool      // the wait's duration is recorded
}

// acquireStartEvent is an acquisition that starts.
type acquireStartEvent struct {
	kind kind
	name string
	wait bool // it waits for its turn (Lock), or gives up at once (TryLock)
}

// acquireEndEvent is an acquisition's outcome: held (err nil, with its
// token and lease), or err.
type acquireEndEvent struct {
	kind  kind
	name  string
	token fence.Token
	lease clientv3.LeaseID
	err   error
}

// lockEvent names one held lock (or term, …).
type lockEvent struct {
	kind  kind
	name  string
	token fence.Token
	lease clientv3.LeaseID
}

// releaseEndEvent is a release's outcome. pending: err is a loss whose
// cause is still being looked up (reading its message would wait for it).
type releaseEndEvent struct {
	err     error
	pending bool
}

// lockEndEvent is the end of a held lock: released when cause is its
// kind's ended (ErrUnlocked, ErrResigned), else lost.
type lockEndEvent struct {
	lockEvent
	acquired time.Time // holdStart's answer when it was acquired
	cause    error
	owner    string // the Client's (WithOwner)
}

// renewEvent is an acknowledged keepalive: its round trip, and the
// validity deadline's distance from now after it.
type renewEvent struct{ rtt, margin time.Duration }

// sessionEndEvent is a session lost and dropped, and why.
type sessionEndEvent struct {
	lease clientv3.LeaseID
	cause error
}
