package etcdfence

import (
	"context"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/internal/nilcheck"
)

// DefaultMaxEffectPayload is the default of [WithMaxEffectPayload]: 1 MiB.
const DefaultMaxEffectPayload = 1 << 20

// MaxWriteOps is etcd's default --max-txn-ops, 128: a recording write
// compares two keys per resource it claims and one per effect (that the
// effect was never recorded), and puts one key per resource it writes
// and two per effect (the effect and the marker that outlives its
// delivery), so [Outbox.Update] records at most 63 effects, and
// [Outbox.UpdateAll] of n keys at most (128 - n) / 2.
const MaxWriteOps = 128

// Outbox records side effects (an [outbox.Effect]: an email, a webhook
// call) in the same etcd transaction as the fenced write of a [Store]'s
// record they belong to, so that an effect exists if and only if its
// write landed, and is the [outbox.Log] a dispatcher delivers them from.
// It implements [outbox.Watcher] (a watch on its effects),
// [outbox.Requeuer] and [outbox.Checker] (etcd's auth: [Outbox.Check]).
//
// Its keys live under its own prefix, which must not overlap the Store's
// floor/ and data/ spaces; the layout is in outbox_layout.go.
//
// Settled effects leave a marker: each recorded effect also creates an
// empty key PREFIX r/KEY (KEY its [outbox.Effect.Key]) that delivery
// does not delete, so that a writer's retry of a write whose outcome was
// unknown is refused with [outbox.ErrDuplicate] even after the effect
// was delivered, instead of applying the state change and the effect
// twice. Storage therefore grows by one small key (the prefix, "r/" and
// a key of at most 72 bytes) per effect ever recorded; [Outbox.Pending]
// does not read them. No pruning method is provided: an operator who
// must reclaim the space deletes r/KEY keys whose e/KEY is gone (the
// effect delivered) and whose create revision is older than any write a
// writer may still retry; a retry of a pruned effect records it again,
// and only its receiver's deduplication on the key stops the copy.
//
// Like a
// Store it holds no state beyond its configuration: it is safe for
// concurrent use, and any number of Outboxes in any number of processes
// may share a prefix. The zero Outbox is not usable; create one with
// [NewOutbox].
type Outbox struct {
	store   *Store
	prefix  string
	watcher clientv3.Watcher // nil: Watch fails
	opts    outboxOptions
}

var (
	_ outbox.Log      = (*Outbox)(nil)
	_ outbox.Watcher  = (*Outbox)(nil)
	_ outbox.Requeuer = (*Outbox)(nil)
)

// OutboxOption configures an [Outbox]; the interface is sealed, and
// [NewOutbox] checks each option, failing with [ErrInvalidOption].
type OutboxOption interface {
	applyOutbox(*outboxOptions)
}

type outboxOptions struct {
	maxPayload int
	watcher    clientv3.Watcher
	nilWatcher bool // WithWatcher was given nil
}

type outboxOptionFunc func(*outboxOptions)

func (f outboxOptionFunc) applyOutbox(o *outboxOptions) { f(o) }

// WithMaxEffectPayload sets the largest payload, in bytes, one effect may
// have: a bigger one is refused with an error matching
// [outbox.ErrTooLarge] before the write is sent. Default
// [DefaultMaxEffectPayload]; n must be positive. A write's whole request
// must also fit the Store's [WithMaxRequestBytes].
func WithMaxEffectPayload(n int) OutboxOption {
	return outboxOptionFunc(func(o *outboxOptions) { o.maxPayload = n })
}

// WithWatcher sets the etcd watcher [Outbox.Watch] watches through.
// Default: the Store's client when it is a *clientv3.Client (or any
// clientv3.Watcher); give one, such as namespace.NewWatcher's, when the
// Store's KV is wrapped. nil (a typed nil too) makes NewOutbox fail.
func WithWatcher(w clientv3.Watcher) OutboxOption {
	return outboxOptionFunc(func(o *outboxOptions) { o.watcher, o.nilWatcher = w, nilcheck.IsNil(w) })
}

// NewOutbox returns an Outbox that records effects beside store's
// records and keeps them under prefix. It does no I/O. It fails with an
// error matching [ErrInvalidArgument] for a nil or zero store, an empty
// prefix or one that overlaps the store's floor or data keys, and with
// [ErrInvalidOption] for an invalid option.
func NewOutbox(store *Store, prefix string, opts ...OutboxOption) (*Outbox, error) {
	if store == nil || store.kv == nil {
		return nil, fmt.Errorf("%w: NewOutbox: a nil or zero Store", ErrInvalidArgument)
	}
	if prefix == "" {
		return nil, fmt.Errorf("%w: NewOutbox: empty prefix", ErrInvalidArgument)
	}
	for _, space := range []string{store.prefix + floorSpace, store.prefix + dataSpace} {
		if strings.HasPrefix(prefix, space) || strings.HasPrefix(space, prefix) {
			return nil, fmt.Errorf("%w: NewOutbox: prefix %q overlaps the store's keys under %q", ErrInvalidArgument, prefix, space)
		}
	}
	o := outboxOptions{maxPayload: DefaultMaxEffectPayload}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: nil OutboxOption", ErrInvalidOption)
		}
		opt.applyOutbox(&o)
	}
	switch {
	case o.nilWatcher:
		return nil, fmt.Errorf("%w: WithWatcher(nil)", ErrInvalidOption)
	case o.maxPayload <= 0:
		return nil, fmt.Errorf("%w: WithMaxEffectPayload(%d): must be positive", ErrInvalidOption, o.maxPayload)
	}
	w := o.watcher
	if w == nil {
		w, _ = store.kv.(clientv3.Watcher)
	}
	return &Outbox{store: store, prefix: prefix, watcher: w, opts: o}, nil
}

// Prefix returns the prefix of the Outbox's keys.
func (o *Outbox) Prefix() string { return o.prefix }

// MaxPayload returns the largest payload one effect may have
// ([WithMaxEffectPayload]).
func (o *Outbox) MaxPayload() int { return o.opts.maxPayload }

// check refuses a nil or zero Outbox and a nil context.
func (o *Outbox) check(ctx context.Context) error {
	if o == nil || o.store == nil {
		return fmt.Errorf("%w: a nil or zero Outbox; create one with NewOutbox", ErrInvalidArgument)
	}
	if nilcheck.IsNil(ctx) {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	return ctx.Err()
}
