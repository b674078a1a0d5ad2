package gcsfence

import (
	"errors"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/errfamily"
)

// ErrInvalidArgument means a call was given something it cannot use: a nil
// client, a nil context, an empty bucket name. Nothing was sent. It matches
// [fence.ErrInvalidArgument], and [ErrInvalidOption] and [ErrNoBucket]
// match it.
var ErrInvalidArgument = errfamily.New("gcsfence: invalid argument", fence.ErrInvalidArgument)

// ErrInvalidOption means an [Option] given to [New] was nil or invalid.
var ErrInvalidOption = errfamily.New("gcsfence: invalid option", ErrInvalidArgument)

// ErrNoBucket means the store's bucket does not exist (404 on a write).
// Nothing was written. It matches [ErrInvalidArgument].
var ErrNoBucket = errfamily.New("gcsfence: no such bucket", ErrInvalidArgument)

// ErrCorrupt means an object under the store's prefix does not start with
// this package's header: something else wrote it. The call changed
// nothing.
var ErrCorrupt = errors.New("gcsfence: object not in the format this package writes")

// ErrPreconditionsUnsupported means the server applied a write whose
// ifGenerationMatch did not hold ([Store.CheckPreconditions]): it cannot
// fence anything.
var ErrPreconditionsUnsupported = errors.New("gcsfence: server does not honour ifGenerationMatch")
