package jsfence

import (
	"errors"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/errfamily"
)

// ErrInvalidArgument means a call was given something it cannot use: a nil
// KeyValue, a nil context, a key JetStream does not allow, a value over
// the server's max_payload. Nothing was sent. It matches
// [fence.ErrInvalidArgument], and [ErrInvalidOption] and [ErrNoBucket]
// match it.
var ErrInvalidArgument = errfamily.New("jsfence: invalid argument", fence.ErrInvalidArgument)

// ErrInvalidOption means an [Option] given to [New] was nil or invalid.
var ErrInvalidOption = errfamily.New("jsfence: invalid option", ErrInvalidArgument)

// ErrNoBucket means no stream answered a write: the bucket does not
// exist (any more), or JetStream is not enabled on the server. Nothing was
// written. It matches [ErrInvalidArgument].
var ErrNoBucket = errfamily.New("jsfence: no stream for the bucket", ErrInvalidArgument)

// ErrCorrupt means an entry under the store's prefix does not start with
// this package's header: something else wrote it. The call changed
// nothing.
var ErrCorrupt = errors.New("jsfence: entry not in the format this package writes")

// ErrRevisionsIgnored means the server applied a write whose expected
// revision (Nats-Expected-Last-Subject-Sequence) did not hold
// ([Store.CheckRevisions]): it cannot fence anything. A server too old to
// know the header, or a proxy that drops it, behaves so; so does
// nats-server 2.9 with a replicated bucket, for writes in flight together.
var ErrRevisionsIgnored = errors.New("jsfence: server does not honour the expected revision of a write")
