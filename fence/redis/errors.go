package redisfence

import (
	"errors"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/errfamily"
)

// ErrInvalidArgument means a call was given something it cannot use: a nil
// client (a typed nil too), a nil context, an empty prefix or token field,
// no fields to write, a field named like the token field. Nothing was sent
// to Redis. Retrying cannot help; fix the call. It matches
// [fence.ErrInvalidArgument], and [ErrInvalidOption] matches it.
var ErrInvalidArgument = errfamily.New("redisfence: invalid argument", fence.ErrInvalidArgument)

// ErrInvalidOption means an [Option] given to [New] or [NewHash] was nil or
// had an invalid value. No Store or Hash was returned.
var ErrInvalidOption = errfamily.New("redisfence: invalid option", ErrInvalidArgument)

// ErrCorrupt means a key holds what this package did not write: a key of
// a Store that is not a hash or whose fields are not in the Store's
// format, or a Hash's token field that is not a token of [TokenDigits]
// digits. The call changed nothing. Something other than this package
// wrote the key.
var ErrCorrupt = errors.New("redisfence: key not in the format this package writes")

// ErrCrossSlot means an [Store.UpdateAll] was given keys whose hashes fall
// in different hash slots ([Slot]): one script can touch only keys of one
// slot, in a Redis Cluster, and the Store refuses them out of one too, so
// that code tested on one server works on a cluster. Nothing was sent.
// Give the keys one hash tag ("acct:{42}:a", "acct:{42}:b"), in the keys
// or the Store's prefix. It matches [ErrInvalidArgument].
var ErrCrossSlot = errfamily.New("redisfence: keys in different hash slots", ErrInvalidArgument)
