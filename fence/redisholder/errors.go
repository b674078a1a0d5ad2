package redisholder

import (
	"errors"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/errfamily"
)

// ErrInvalidArgument means a call was given something it cannot use: a
// nil context, a nil client or lock (a typed nil too), an empty key, a
// TTL under a millisecond (redislock sends whole milliseconds), a nil or
// invalid option. Nothing was sent to Redis. It matches
// [fence.ErrInvalidArgument].
var ErrInvalidArgument = errfamily.New("redisholder: invalid argument", fence.ErrInvalidArgument)

// ErrNotHeld means the lock's key no longer holds the lock's value when a
// token was to be issued or the lock refreshed: its TTL ran out (and
// perhaps another client took it). No token was issued; the counter is
// unchanged.
var ErrNotHeld = errors.New("redisholder: lock not held")

// ErrEnded means a call on a [Lock] whose Done is closed: its deadline
// passed, a refresh failed, or it was released. Take a new lock.
var ErrEnded = errors.New("redisholder: lock ended (deadline passed, refresh failed or released)")
