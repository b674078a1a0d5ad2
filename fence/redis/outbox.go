package redisfence

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/internal/nilcheck"
)

// DefaultMaxEffectPayload is the default of [WithMaxEffectPayload]: 1 MiB.
const DefaultMaxEffectPayload = 1 << 20

// The keys of an Outbox under its prefix, all in one hash slot:
//
//	PREFIX seq      a counter: the last recording position handed out
//	PREFIX pending  a sorted set of the pending effects' keys
//	                (outbox.Effect.Key), scored by recording position
//	PREFIX parked   the same for the parked ones, scored as they were
//	PREFIX effects  a hash: effect key -> the effect (internal/outboxcodec)
//	PREFIX reasons  a hash: effect key -> a parked effect's reason
//	PREFIX delivered
//	                a set of the delivered effects' keys, kept so that
//	                recording one again is refused; Pending never reads it
//	PREFIX floors   a hash: dispatcher resource -> the highest token that
//	                has settled through it
//
// and the channel PREFIX wake, which a recording script publishes each
// effect's resource on.
const (
	keySeq       = "seq"
	keyPending   = "pending"
	keyParked    = "parked"
	keyEffects   = "effects"
	keyReasons   = "reasons"
	keyDelivered = "delivered"
	keyFloors    = "floors"
	chanWake     = "wake"
)

// Outbox records side effects (an [outbox.Effect]) in the same Lua
// script as the fenced write of a [Store]'s record they belong to, so
// that an effect exists if and only if its write landed, and is the
// [outbox.Log] a dispatcher delivers them from. It implements
// [outbox.Watcher] (PUBLISH in the recording script, SUBSCRIBE in Watch),
// [outbox.Requeuer] and [outbox.Checker] (Redis's ACL: [Outbox.Check]).
//
// One script touches the record's hash and the outbox's keys, so they
// must share a hash slot ([Slot]), on a cluster or not: give the Store's
// prefix and the Outbox's one hash tag ("{app}:" and "{app}:outbox:").
// Keys of another slot are refused with [ErrCrossSlot] before any I/O.
// On a cluster every recorded resource then lives on one shard.
//
// Delivered effects leave a marker: Settle moves a delivered effect's
// key (an [outbox.Effect.Key], at most 72 bytes) into the set PREFIX
// delivered and deletes the rest, so that a writer's retry of a write
// whose outcome was unknown is refused with [outbox.ErrDuplicate] even
// after the effect was delivered, instead of applying the state change
// and the effect twice. Memory therefore grows by one set member per
// delivered effect; Pending does not read the set. No pruning method is
// provided: an operator who must reclaim the memory removes members
// (SREM, or UNLINK of the whole set) only for effects no writer may
// still retry; a retry of a removed one records it again, and only its
// receiver's deduplication on the key stops the copy.
//
// An Outbox holds no state beyond its configuration and is safe for
// concurrent use. The zero Outbox is not usable; create one with
// [NewOutbox].
type Outbox struct {
	store      *Store
	prefix     string
	maxPayload int
}

var (
	_ outbox.Log      = (*Outbox)(nil)
	_ outbox.Watcher  = (*Outbox)(nil)
	_ outbox.Requeuer = (*Outbox)(nil)
)

// OutboxOption configures an [Outbox]; the interface is sealed, and
// [NewOutbox] checks each option, failing with [ErrInvalidOption].
type OutboxOption interface {
	applyOutbox(*Outbox)
}

type outboxOptionFunc func(*Outbox)

func (f outboxOptionFunc) applyOutbox(o *Outbox) { f(o) }

// WithMaxEffectPayload sets the largest payload, in bytes, one effect may
// have: a bigger one is refused with an error matching
// [outbox.ErrTooLarge] before the script is sent. Default
// [DefaultMaxEffectPayload]; n must be positive.
func WithMaxEffectPayload(n int) OutboxOption {
	return outboxOptionFunc(func(o *Outbox) { o.maxPayload = n })
}

// NewOutbox returns an Outbox that records effects beside store's records
// and keeps them under prefix. It does no I/O. It fails with an error
// matching [ErrInvalidArgument] for a nil or zero store or an empty
// prefix, [ErrCrossSlot] for a prefix whose keys fall in two slots (one
// with no hash tag), and [ErrInvalidOption] for an invalid option.
func NewOutbox(store *Store, prefix string, opts ...OutboxOption) (*Outbox, error) {
	if store == nil || store.c == nil {
		return nil, fmt.Errorf("%w: NewOutbox: a nil or zero Store", ErrInvalidArgument)
	}
	if prefix == "" {
		return nil, fmt.Errorf("%w: NewOutbox: empty prefix", ErrInvalidArgument)
	}
	o := &Outbox{store: store, prefix: prefix, maxPayload: DefaultMaxEffectPayload}
	for _, k := range []string{keyPending, keyParked, keyEffects, keyReasons, keyFloors, keyDelivered} {
		if Slot(o.key(k)) != Slot(o.key(keySeq)) {
			return nil, fmt.Errorf("%w: NewOutbox: the keys under %q fall in different slots: give the prefix a hash tag, such as {%s}", ErrCrossSlot, prefix, prefix)
		}
	}
	for _, opt := range opts {
		if nilcheck.IsNil(opt) {
			return nil, fmt.Errorf("%w: nil OutboxOption", ErrInvalidOption)
		}
		opt.applyOutbox(o)
	}
	if o.maxPayload <= 0 {
		return nil, fmt.Errorf("%w: WithMaxEffectPayload(%d): must be positive", ErrInvalidOption, o.maxPayload)
	}
	return o, nil
}

// Prefix returns the prefix of the Outbox's keys.
func (o *Outbox) Prefix() string { return o.prefix }

// MaxPayload returns the largest payload one effect may have
// ([WithMaxEffectPayload]).
func (o *Outbox) MaxPayload() int { return o.maxPayload }

func (o *Outbox) key(name string) string { return o.prefix + name }

// check refuses a nil or zero Outbox and a nil or ended context.
func (o *Outbox) check(ctx context.Context) error {
	if o == nil || o.store == nil {
		return fmt.Errorf("%w: a nil or zero Outbox; create one with NewOutbox", ErrInvalidArgument)
	}
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	return ctx.Err()
}

// subscriber is a client Watch can subscribe through: *redis.Client and
// *redis.ClusterClient are.
type subscriber interface {
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
}
