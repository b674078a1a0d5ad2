package pgadvisory

import (
	"errors"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/errfamily"
)

// ErrInvalidArgument means a call was given something it cannot use: a
// nil context, a nil config or database handle (a typed nil too), a nil or
// invalid option. Nothing was sent to PostgreSQL. It matches
// [fence.ErrInvalidArgument].
var ErrInvalidArgument = errfamily.New("pgadvisory: invalid argument", fence.ErrInvalidArgument)

// ErrNotAcquired means [TryAcquire] found the advisory lock held by
// another session. No token was taken.
var ErrNotAcquired = errors.New("pgadvisory: lock held by another session")

// ErrSessionLost is the cause a [Lock]'s Done closes with (see [Lock.Err])
// when its session ended or could not be reached: the server may have
// released the lock, and another session may hold it.
var ErrSessionLost = errors.New("pgadvisory: the lock's session ended or is unreachable")
