package outbox

import (
	"errors"
	"fmt"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/errfamily"
)

// ErrNoDestination is returned, before any I/O, for an effect with an
// empty Destination. It matches [fence.ErrInvalidArgument].
var ErrNoDestination = errfamily.New("outbox: effect has no destination", fence.ErrInvalidArgument)

// ErrDuplicate is returned by a store's recording call for an effect whose
// Resource, Token and Seq (so its [Effect.Key]) are already recorded, or
// appear twice in one write; the write then changes nothing. After a write
// whose outcome was unknown, it tells the retry that the first one landed.
// It matches [fence.ErrInvalidArgument].
var ErrDuplicate = errfamily.New("outbox: effect already recorded", fence.ErrInvalidArgument)

// ErrTooLarge is returned, before any I/O, for an effect larger than its
// store can hold in one write (each store documents its limit); nothing is
// written. It matches [fence.ErrInvalidArgument].
var ErrTooLarge = errfamily.New("outbox: effect too large for its store", fence.ErrInvalidArgument)

// ErrParked is what [Dispatcher] reports (its error handler, its spans)
// for an effect it parked: one its sender refused for good ([Permanent],
// an HTTP 4xx) or that failed [WithMaxAttempts] times. A parked effect
// stays in the store with its reason, is not delivered again by a
// dispatcher, and does not hold back the resource's later effects; an
// operator redelivers it by hand (the store's Requeue).
var ErrParked = errors.New("outbox: effect parked")

// ErrNotPermitted is returned by [Dispatcher.Run] at start when its store
// refuses what a dispatcher needs (reading pending effects, marking them,
// its own fence), with the store's words, before anything is delivered.
var ErrNotPermitted = errors.New("outbox: the store refuses what a dispatcher needs")

// PermanentError marks a sender's error as one that retrying cannot fix
// (a 4xx answer, a payload the receiver rejects): the dispatcher parks the
// effect at once. Create one with [Permanent].
type PermanentError struct {
	Err error
}

// Permanent wraps err so that the dispatcher parks the effect instead of
// retrying it. Permanent(nil) returns nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// Error returns the wrapped error's text.
func (e *PermanentError) Error() string { return fmt.Sprintf("permanent: %v", e.Err) }

// Unwrap returns the wrapped error.
func (e *PermanentError) Unwrap() error { return e.Err }

// IsPermanent reports whether err, or an error it wraps, is a
// [*PermanentError].
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}
