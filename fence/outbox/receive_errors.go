package outbox

import (
	"errors"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/errfamily"
)

// The receiving side's errors live here, beside errors.go, which the
// sending side's change owns.

// ErrInFlight is returned by [Receipts.Begin] for a delivery whose key
// another delivery holds, still in progress (younger than
// [WithPendingTimeout]): a concurrent duplicate. The receiver answers it
// 409 Conflict with Retry-After, and the handler does not run.
var ErrInFlight = errors.New("outbox: a delivery with this idempotency key is in progress")

// ErrTakenOver is returned by [Delivery.Finish] and [Delivery.Release]
// when the delivery's key is no longer its own: a later delivery took it
// over after [WithPendingTimeout], and records its own answer. Nothing was
// written.
var ErrTakenOver = errors.New("outbox: the delivery's key was taken over by a later delivery")

// ErrInvalidIdempotencyKey means an idempotency key is empty, longer than
// [MaxIdempotencyKeyLen], or holds a byte other than visible ASCII. It
// matches [fence.ErrInvalidArgument].
var ErrInvalidIdempotencyKey = errfamily.New("outbox: invalid idempotency key", fence.ErrInvalidArgument)

// ErrCorruptReceipt means a receipt in the store does not decode: the key
// was written by something else. It is returned as it is, and the
// delivery is not handled.
var ErrCorruptReceipt = errors.New("outbox: a receipt in the store does not decode")
