package jetstream

import (
	"errors"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/errfamily"
)

// ErrNoStream is what a [Sender] reports, wrapped in outbox.Permanent, for
// an effect whose subject no stream captures: the server's JetStream had
// no responder for it, after the client's own retries. Most likely a
// configuration error (the stream is missing, or its subjects do not
// include the effect's Destination), so the dispatcher parks the effect
// with this reason instead of retrying it forever; create the stream and
// requeue the effect. [WithNoStreamRetried] makes it a retried error
// instead.
var ErrNoStream = errors.New("jetstream: no stream captures the effect's subject")

// ErrInvalidSubject is what a [Sender] reports, wrapped in
// outbox.Permanent, for an effect whose Destination is not a subject a
// message can be published to (empty tokens, wildcards, white space). It
// matches [fence.ErrInvalidArgument].
var ErrInvalidSubject = errfamily.New("jetstream: the effect's destination is not a publishable subject", fence.ErrInvalidArgument)
