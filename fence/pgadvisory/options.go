package pgadvisory

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/internal/nilcheck"
)

// Option configures [Acquire], [TryAcquire] and [CreateSequence]. The
// interface is sealed: the options are this package's With… functions.
// They are checked before any I/O; an invalid one fails the call with
// [ErrInvalidArgument].
type Option interface{ apply(*options) }

type options struct {
	sequence pgx.Identifier
	interval time.Duration
	setIntvl bool          // WithPingInterval was given
	timeout  time.Duration // idle_session_timeout; 0: none
	issuer   string        // "": the database's and the sequence's names
	bad      string        // why an option is invalid; "" if none is
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// DefaultSequence is the sequence the tokens come from unless
// [WithSequence] names another.
var DefaultSequence = pgx.Identifier{"fencelock_advisory_token"}

// DefaultPingInterval is how often a Lock checks its session unless
// [WithPingInterval] says otherwise.
const DefaultPingInterval = time.Second

// WithSequence names the sequence the tokens come from (created by
// [CreateSequence] with the same option). Every client of one lock key
// must use the same sequence. Default: [DefaultSequence]. An empty
// identifier is refused.
func WithSequence(seq pgx.Identifier) Option {
	return optionFunc(func(o *options) {
		o.sequence = seq
		if len(seq) == 0 {
			o.bad = "WithSequence: empty identifier"
		}
	})
}

// WithPingInterval sets how often the Lock checks that its session is
// alive (a ping, which must answer within the interval); between pings
// it waits on the connection, so a session the server ends is noticed at
// once. Done closes at the latest about two intervals after the server
// becomes unreachable. Default: [DefaultPingInterval]. A duration that is
// not positive is refused.
func WithPingInterval(d time.Duration) Option {
	return optionFunc(func(o *options) {
		o.interval, o.setIntvl = d, true
		if d <= 0 {
			o.bad = fmt.Sprintf("WithPingInterval: %v (must be positive)", d)
		}
	})
}

// WithSessionTimeout makes the lock a lease: the lock's session gets
// idle_session_timeout d (PostgreSQL 14 and later), so the server ends it,
// and frees the lock, once it has sent nothing for d: a holder frozen by
// a GC pause, SIGSTOP or a suspended VM no longer keeps the next one
// waiting for as long as it is frozen. The Lock's pings keep a live
// session going: the ping interval defaults to d/3 (at most
// [DefaultPingInterval]) and must be at most d/2. The Lock is then an
// [fence.Expirer] whose deadline is d after its last ping was sent.
// Default: the session's own idle_session_timeout, if the role, the
// database or the connection's parameters set one (the Lock is then a
// lease all the same, and Acquire fails if WithPingInterval is over half
// of it); otherwise none (the session lasts as long as its connection). A
// duration under a millisecond is refused; a fraction of one is dropped,
// as the server drops it.
func WithSessionTimeout(d time.Duration) Option {
	return optionFunc(func(o *options) {
		o.timeout = d.Truncate(time.Millisecond) // as the server takes it
		if d < time.Millisecond {
			o.bad = fmt.Sprintf("WithSessionTimeout: %v (must be at least 1ms)", d)
		}
	})
}

// WithIssuer names the source of the lock's tokens for the stores that
// check it ([fence.IssuerNamer]). Default: "postgres:", the database's
// name and the sequence's, schema-qualified, as the server found them
// (current_database(), and the search_path for an unqualified
// [WithSequence]), which does not tell
// two servers with databases of the same name apart: name the server here
// when several could fence one resource. Every client of one lock must
// give the same name. An empty name is refused.
func WithIssuer(name string) Option {
	return optionFunc(func(o *options) {
		o.issuer = name
		if name == "" {
			o.bad = "WithIssuer: empty name"
		}
	})
}

// buildOptions applies and checks opts.
func buildOptions(opts []Option) (options, error) {
	o := options{sequence: DefaultSequence, interval: DefaultPingInterval}
	for _, opt := range opts {
		if nilcheck.IsNil(opt) {
			return o, fmt.Errorf("%w: nil Option", ErrInvalidArgument)
		}
		opt.apply(&o)
	}
	if o.bad != "" {
		return o, fmt.Errorf("%w: %s", ErrInvalidArgument, o.bad)
	}
	switch {
	case o.timeout == 0:
	case !o.setIntvl:
		o.interval = min(DefaultPingInterval, o.timeout/3)
	case o.interval > o.timeout/2:
		return o, fmt.Errorf("%w: WithPingInterval %v is over half of WithSessionTimeout %v: a live session could be ended", ErrInvalidArgument, o.interval, o.timeout)
	}
	return o, nil
}
