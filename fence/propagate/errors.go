package propagate

import (
	"errors"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/errfamily"
)

// ErrInvalidHeader means a Fencing-Token value (an HTTP header, a gRPC
// metadata entry) does not parse: see [Parse] for the grammar. A server
// refuses the call before its handler runs. It matches
// [fence.ErrInvalidArgument].
var ErrInvalidHeader = errfamily.New("propagate: invalid Fencing-Token value", fence.ErrInvalidArgument)

// ErrInvalidName means a lock name is empty, longer than [MaxNameLen], not
// UTF-8, or holds a control character. Nothing was sent. It matches
// [fence.ErrInvalidArgument].
var ErrInvalidName = errfamily.New("propagate: invalid lock name", fence.ErrInvalidArgument)

// ErrMissing means a call that requires a fencing token carried none: a
// server refused it before its handler ran ([CheckResponse] returns it for
// such a refusal).
var ErrMissing = errors.New("propagate: the call carries no fencing token and the server requires one")
