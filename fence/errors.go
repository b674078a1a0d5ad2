package fence

import (
	"errors"
	"fmt"

	"github.com/fencelock/fencelock/internal/errfamily"
)

// ErrInvalidArgument means a nil context, a nil (or typed-nil) holder,
// store or function was passed where one is required. Nothing was written.
//
// It is also the root of every invalid-input error of fencelock's packages:
// [ErrInvalidToken], [ErrInvalidKey], and the ErrInvalid… errors of
// etcdlock, fence/postgres and fence/s3 all match it, so one errors.Is
// tells a call refused for its input, before any I/O, from every other
// failure.
var ErrInvalidArgument = errors.New("fence: invalid argument")

// ErrStale means the resource refused a write because it has already accepted
// a write with a higher token: a newer holder exists. The write changed
// nothing. Retrying with the same token cannot succeed.
var ErrStale = errors.New("fence: stale token: the resource has accepted a newer one")

// ErrTokenRegressed means a resource refused a write for staleness with a
// highest accepted token that the lock service never issued: the service
// was replaced by a new cluster, or restored from a snapshot taken before
// that token, and hands out tokens that are all lower. No newer holder
// of this service exists; every holder's writes will be refused until the
// service's tokens pass the resource's again. The one other cause is a
// resource fenced by two lock services at once (a second etcd cluster
// whose holders write it too): there the refusal may be a newer holder's
// doing, and the resource's floor must not be moved down. It comes from a [Guard] whose holder is a
// [TokenIssuer], always together with [ErrStale] (the write changed
// nothing): retrying cannot succeed; the operator must act (see
// docs/restore.md: restore etcd with a revision bump above the resource's
// token, or move the resource's floor knowingly).
var ErrTokenRegressed = errors.New("fence: the resource has accepted a token the lock service never issued (replaced or restored from a snapshot)")

// ErrIssuerMismatch means a resource refused a write whose token comes
// from another issuer than the tokens it has accepted for that key (see
// [IssuerNamer]): two lock services, or two counters, fence one resource,
// and their tokens cannot be ordered against each other. The write
// changed nothing. It does not match [ErrStale]: no newer holder is known
// to exist. Fence each resource with one issuer's tokens, or move the
// resource to the other knowingly.
var ErrIssuerMismatch = errors.New("fence: the token's issuer is not the one whose tokens the resource has accepted")

// ErrIssuerRequired means a resource made to require issuers (fence's
// [RequireIssuer] for a [MemoryStore], fence/postgres's RequireIssuer for
// its Store) refused, before any I/O, a write that names none: its context
// carries no issuer's name ([ContextWithIssuer]), because it was not made
// through a [Guard] whose holder names its tokens' source
// ([IssuerNamer]). The error matches [ErrInvalidArgument] too, and says
// what to add. The write changed nothing.
var ErrIssuerRequired = errfamily.New("fence: the write names no issuer, and the resource requires one", ErrInvalidArgument)

// ErrLockLost means a [Guard] refused a write locally, before any I/O, because
// its holder already knows the lock is lost or its validity deadline has
// passed. Nothing was sent to the resource.
var ErrLockLost = errors.New("fence: lock lost or expired; write not attempted")

// ErrInvalidToken means a token was zero or negative. Nothing was written.
// It matches [ErrInvalidArgument].
var ErrInvalidToken = errfamily.New("fence: invalid token (must be > 0)", ErrInvalidArgument)

// ErrInvalidKey means a resource key was empty or otherwise unusable. It
// matches [ErrInvalidArgument].
var ErrInvalidKey = errfamily.New("fence: invalid resource key", ErrInvalidArgument)

// ErrNotFound means a read found no record for the resource.
var ErrNotFound = errors.New("fence: resource not found")

// ErrConflict means an Update gave up: the record changed between its read
// and its conditional write on each of [UpdateAttempts] tries, each time by
// a writer with the same token (a holder's own concurrent writes). Nothing
// was written by the last try. A newer holder's write is [ErrStale]
// instead.
var ErrConflict = errors.New("fence: update conflict: the record kept changing between read and write")

// ErrChanged is what an [UpdateRounds] or [UpdateAllRounds] returns (wrapped
// or as it is) when the record changed between its read and its write:
// the loop reads again. It is between an adapter and the loop: after
// [UpdateAttempts] rounds the loop returns an error matching [ErrConflict]
// instead, and never one matching ErrChanged.
var ErrChanged = errors.New("fence: the record changed since it was read")

// ErrPanicked is the error an update's span ends with ([UpdateSpan]) when
// its function panicked. The loop passes the panic on and never returns
// it.
var ErrPanicked = errors.New("fence: the update function panicked")

// ErrUnknownOutcome means the write may or may not have been applied: the
// request reached (or may have reached) the resource, but no answer came back
// (timeout, connection reset, cancelled context). It is distinct from
// [ErrStale]: the caller should read the resource back before deciding.
var ErrUnknownOutcome = errors.New("fence: write outcome unknown")

// StaleError is the error a resource returns when it refuses a write for
// staleness. It matches [ErrStale] with errors.Is, and errors.As gives the
// numbers:
//
//	var se *fence.StaleError
//	if errors.As(err, &se) {
//		log.Printf("token %d refused: resource is at %d", se.Token, se.Current)
//	}
type StaleError struct {
	// Resource names what was written (a key, a table row, an object).
	Resource string
	// Token is the token the refused write carried.
	Token Token
	// Current is the highest token the resource had accepted, when known
	// (0 when the adapter could not tell without another read).
	Current Token
}

// Error implements error.
func (e *StaleError) Error() string {
	if e.Current > 0 {
		return fmt.Sprintf("fence: stale token %d for %q: the resource has accepted %d", e.Token, e.Resource, e.Current)
	}
	return fmt.Sprintf("fence: stale token %d for %q: the resource has accepted a newer one", e.Token, e.Resource)
}

// Is reports whether target is [ErrStale].
func (e *StaleError) Is(target error) bool { return target == ErrStale }

// UnknownOutcomeError wraps the transport error behind [ErrUnknownOutcome].
// errors.Is(err, fence.ErrUnknownOutcome) and errors.Is(err, context.DeadlineExceeded)
// (or whatever the cause was) both hold.
type UnknownOutcomeError struct {
	// Resource names what was being written.
	Resource string
	// Token is the token the write carried.
	Token Token
	// Err is the underlying cause.
	Err error
}

// Error implements error.
func (e *UnknownOutcomeError) Error() string {
	return fmt.Sprintf("fence: write of %q with token %d: outcome unknown: %v", e.Resource, e.Token, e.Err)
}

// Unwrap returns the cause.
func (e *UnknownOutcomeError) Unwrap() error { return e.Err }

// Is reports whether target is [ErrUnknownOutcome].
func (e *UnknownOutcomeError) Is(target error) bool { return target == ErrUnknownOutcome }
