package jsfence

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fencelock/fencelock/fence"
)

// written is what a conditional write came to.
type written struct {
	rev uint64 // the entry's revision, when it landed
	ok  bool   // landed; false with a nil error: the revision had moved on
	id  uint64 // the write's id, in its header
}

// writeIf writes key's entry with token, if its last revision is still rev
// (0: if it has none): kv.Update, or kv.Create. It reports ok false, with
// no error, when the condition failed: the key changed since it was read.
// A write whose answer did not come is followed by a read: the write's id
// there means it landed; else the error matches [fence.ErrUnknownOutcome].
func (s *Store) writeIf(ctx context.Context, what, key string, rev uint64, token fence.Token, none bool, value []byte) (written, error) {
	w := written{id: rand.Uint64()}
	b := encode(token, none, w.id, value)
	rctx, cancel := s.request(ctx)
	var err error
	if rev == 0 {
		w.rev, err = s.kv.Create(rctx, s.prefix+key, b)
	} else {
		w.rev, err = s.kv.Update(rctx, s.prefix+key, b, rev)
	}
	cancel()
	switch outcomeOf(err) {
	case landed:
		w.ok = true
		s.cache.put(key, entry{rev: w.rev, token: token, none: none, id: w.id})
		return w, nil
	case changed:
		s.cache.drop(key)
		return w, nil
	case noStream:
		return w, fmt.Errorf("%w: %s %q: %w", ErrNoBucket, what, key, err)
	case refused:
		return w, fmt.Errorf("jsfence: %s %q: refused, nothing written: %w", what, key, err)
	case invalid:
		return w, fmt.Errorf("%w: %s %q: not sent: %w", ErrInvalidArgument, what, key, err)
	}
	s.cache.drop(key)
	return s.reconcile(ctx, key, token, w, err)
}

// reconcile reads key after a write whose answer did not come: if the
// entry holds the write's id, the write landed (and nothing since); else
// the outcome stays unknown, since the write may have landed and been
// written over, or may still land.
func (s *Store) reconcile(ctx context.Context, key string, token fence.Token, w written, cause error) (written, error) {
	if ctx.Err() == nil && !s.noRecognise {
		if e, err := s.read(ctx, key); err == nil && e.rev != 0 && e.id == w.id {
			w.rev, w.ok = e.rev, true
			return w, nil
		}
	}
	return w, &fence.UnknownOutcomeError{Resource: key, Token: token, Err: cause}
}

// outcome is what the error of a write says of it: the one rule of when
// a write's outcome is unknown.
type outcome int

const (
	unknown  outcome = iota // no answer: it may have landed
	landed                  // no error
	changed                 // refused: the expected revision was not the key's last
	noStream                // no stream listens on the bucket's subjects: not written
	refused                 // the server refused it
	invalid                 // the client refused it before sending: a bad argument
)

func outcomeOf(err error) outcome {
	var api *jetstream.APIError
	switch {
	case err == nil:
		return landed
	case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyRevisionMismatch):
		return changed
	case errors.As(err, &api):
		if api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant {
			return changed
		}
		return refused // the stream answered: an error is its refusal
	case errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders):
		return noStream
	case errors.Is(err, jetstream.ErrInvalidKey), errors.Is(err, nats.ErrMaxPayload), errors.Is(err, nats.ErrBadSubject):
		return invalid // the client's own check, before sending
	}
	return unknown
}
