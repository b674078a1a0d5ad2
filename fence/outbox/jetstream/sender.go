package jetstream

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/fence/propagate"
	"github.com/fencelock/fencelock/internal/nilcheck"
)

// Publisher is what a [Sender] needs of a JetStream context: a
// synchronous publish that waits for the stream's acknowledgement.
// github.com/nats-io/nats.go/jetstream's JetStream has it.
type Publisher interface {
	PublishMsg(ctx context.Context, msg *nats.Msg, opts ...natsjs.PublishOpt) (*natsjs.PubAck, error)
}

// Sender is an [outbox.Sender] that publishes each effect to JetStream
// (see the package's documentation). Send returns nil once the stream has
// acknowledged the message, a duplicate within the stream's window
// included. It reports, wrapped in [outbox.Permanent] so that the
// dispatcher parks the effect: a Destination that is not a publishable
// subject ([ErrInvalidSubject]); a subject no stream captures
// ([ErrNoStream], unless [WithNoStreamRetried]); a payload larger than
// the stream takes, or a stream other than [WithExpectStream]'s. Any
// other failure (a timeout, a lost connection, a stream out of room) is
// returned as it is, to be retried.
//
// Create one with [NewSender]; it is safe for concurrent use.
type Sender struct {
	js Publisher
	o  options
}

var _ outbox.Sender = (*Sender)(nil)

// NewSender returns a [Sender] publishing through js. It fails with an
// error matching [fence.ErrInvalidArgument] for a nil js or a nil option.
func NewSender(js Publisher, opts ...Option) (*Sender, error) {
	if nilcheck.IsNil(js) {
		return nil, fmt.Errorf("%w: jetstream: NewSender: nil JetStream context", fence.ErrInvalidArgument)
	}
	o := options{parkNoStream: true}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: jetstream: NewSender: nil Option", fence.ErrInvalidArgument)
		}
		opt.apply(&o)
	}
	return &Sender{js: js, o: o}, nil
}

// Send publishes e and waits for the stream's acknowledgement, for as
// long as ctx allows; see [Sender].
func (s *Sender) Send(ctx context.Context, e outbox.Effect) error {
	key := e.Key()
	if err := checkSubject(e.Destination); err != nil {
		return outbox.Permanent(fmt.Errorf("outbox: effect %s: %w", key, err))
	}
	msg := nats.NewMsg(e.Destination)
	msg.Data = e.Payload
	msg.Header.Set(nats.MsgIdHdr, key)
	msg.Header.Set(outbox.IdempotencyHeader, key)
	msg.Header.Set(propagate.Header, propagate.Fencing{Name: e.Resource, Token: e.Token}.String())
	var opts []natsjs.PublishOpt
	if s.o.stream != "" {
		opts = append(opts, natsjs.WithExpectStream(s.o.stream))
	}
	_, err := s.js.PublishMsg(ctx, msg, opts...)
	return s.outcome(key, e.Destination, err)
}

// outcome is the one rule for what a publish's error means.
func (s *Sender) outcome(key, subject string, err error) error {
	if err == nil {
		return nil
	}
	var api *natsjs.APIError
	switch {
	case errors.Is(err, natsjs.ErrNoStreamResponse) && s.o.parkNoStream:
		return outbox.Permanent(fmt.Errorf("outbox: effect %s: %w %q (no JetStream responder: create a stream whose subjects include it, then requeue the effect): %w", key, ErrNoStream, subject, err))
	case errors.Is(err, natsjs.ErrNoStreamResponse):
		return fmt.Errorf("outbox: effect %s: %w %q: %w", key, ErrNoStream, subject, err)
	case errors.As(err, &api) && permanentCodes[api.ErrorCode]:
		return outbox.Permanent(fmt.Errorf("outbox: effect %s to %q: %w", key, subject, err))
	case errors.Is(err, nats.ErrMaxPayload), errors.Is(err, nats.ErrBadSubject):
		return outbox.Permanent(fmt.Errorf("outbox: effect %s to %q: %w", key, subject, err))
	}
	return fmt.Errorf("outbox: effect %s to %q: %w", key, subject, err)
}

// permanentCodes are the JetStream API errors a publish's retry cannot
// fix.
var permanentCodes = map[natsjs.ErrorCode]bool{
	natsjs.JSErrCodeStreamMessageExceedsMaximum: true, // the payload is larger than the stream takes
	natsjs.JSErrCodeStreamNotFound:              true, // WithExpectStream's stream does not exist
	jsErrCodeStreamNotMatch:                     true, // WithExpectStream's stream is not the subject's
	natsjs.JSErrCodeBadRequest:                  true,
}

// jsErrCodeStreamNotMatch is the server's "expected stream does not
// match" (JSStreamNotMatchErr), which the client names no constant for.
const jsErrCodeStreamNotMatch natsjs.ErrorCode = 10060

// checkSubject returns an error matching ErrInvalidSubject unless subject
// is one a message can be published to: dot-separated non-empty tokens,
// no wildcards, no white space or control characters.
func checkSubject(subject string) error {
	if subject == "" {
		return fmt.Errorf("%w: empty", ErrInvalidSubject)
	}
	for _, tok := range strings.Split(subject, ".") {
		if tok == "" || tok == "*" || tok == ">" {
			return fmt.Errorf("%w: %.64q has an empty or wildcard token", ErrInvalidSubject, subject)
		}
	}
	if i := strings.IndexFunc(subject, func(r rune) bool { return r <= ' ' || r == 0x7f }); i >= 0 {
		return fmt.Errorf("%w: %.64q has white space or a control character", ErrInvalidSubject, subject)
	}
	return nil
}
