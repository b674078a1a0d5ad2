package etcdfence

import (
	"errors"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/errfamily"
)

// ErrInvalidArgument means a call was given something it cannot use: a nil
// client (a typed nil too), a nil context, an empty prefix. Nothing was sent
// to etcd. Retrying cannot help; fix the call. It matches
// [fence.ErrInvalidArgument], and [ErrInvalidOption] and [ErrValueTooLarge]
// match it.
var ErrInvalidArgument = errfamily.New("etcdfence: invalid argument", fence.ErrInvalidArgument)

// ErrInvalidOption means an [Option] given to [New] was nil or had an
// invalid value. New returned no Store.
var ErrInvalidOption = errfamily.New("etcdfence: invalid option", ErrInvalidArgument)

// ErrValueTooLarge means a write's request would exceed etcd's limit on the
// size of a request: either the Store's own estimate was above
// [WithMaxRequestBytes] and nothing was sent, or etcd (or its gRPC layer)
// refused the request for its size. Either way nothing was written. The
// error wraps etcd's when etcd gave one. Retrying cannot help; store a
// smaller value, or raise etcd's --max-request-bytes and
// [WithMaxRequestBytes] together.
var ErrValueTooLarge = errfamily.New("etcdfence: value too large for one etcd request", ErrInvalidArgument)

// ErrCorrupt means a key of the Store's layout (see the package
// documentation) holds a value this package did not write: a data key
// shorter than its token, or a token that is not a positive decimal number
// of [TokenDigits] digits. Get returns it instead of a record, and a write
// that reads such a floor when it is refused returns it. Something other
// than a Store wrote under the prefix.
var ErrCorrupt = errors.New("etcdfence: key under the store's prefix not in the store's format")
