package fence

import (
	"fmt"
	"time"
)

// HolderOption configures [NewHolder]. The interface is sealed: the
// options are this package's WithValidUntil and its siblings.
type HolderOption interface{ applyHolder(*holderOptions) }

// holderOptions is what the HolderOptions set; the zero value is
// NewHolder's default.
type holderOptions struct {
	validUntil time.Time
	hasUntil   bool // WithValidUntil was given
	issuer     string
	hasIssuer  bool // WithIssuer was given
}

type holderOptionFunc func(*holderOptions)

func (f holderOptionFunc) applyHolder(o *holderOptions) { f(o) }

// WithValidUntil gives the holder a validity deadline: the result of
// [NewHolder] is then an [Expirer] too, and a [Guard] refuses locally
// ([ErrLockLost]) once t has passed. t should be measured from before the
// request that took the lock was sent (time.Now().Add(ttl), which carries
// a monotonic reading, before the request), so that it is never later
// than the lock's real end. Default: no deadline; only Done ends the
// holder. A zero t is refused by NewHolder.
func WithValidUntil(t time.Time) HolderOption {
	return holderOptionFunc(func(o *holderOptions) { o.validUntil, o.hasUntil = t, true })
}

// NewHolder returns a [Holder] for a token of the caller's own: one that
// another lock library handed out, or a counter the caller takes while
// holding its lock. Whatever issues it must make it grow with each
// acquisition of the lock, so that a newer holder always carries a higher
// token than an older one; [docs/holders.md] shows how for a Redis lock
// and a PostgreSQL advisory lock.
//
// done must be closed when the caller's lock ends or may have ended (its
// lease expired, a refresh failed, its session closed): a [Guard] then
// refuses writes locally. A lock with no such signal passes a channel
// it closes when it releases the lock, and gives its deadline with
// [WithValidUntil].
//
// NewHolder fails, with an error matching [ErrInvalidArgument], when t is
// not positive ([ErrInvalidToken]), done is nil, or an option is
// invalid. The holder it returns is immutable and safe for concurrent
// use; it is an [Expirer] when [WithValidUntil] was given, and an
// [IssuerNamer] (naming none without [WithIssuer]).
func NewHolder(t Token, done <-chan struct{}, opts ...HolderOption) (Holder, error) {
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("fence: NewHolder: %w", err)
	}
	if done == nil {
		return nil, fmt.Errorf("%w: NewHolder: nil done channel (pass one closed when the lock ends)", ErrInvalidArgument)
	}
	var o holderOptions
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: NewHolder: nil option", ErrInvalidArgument)
		}
		opt.applyHolder(&o)
	}
	if o.hasIssuer && o.issuer == "" {
		return nil, fmt.Errorf("%w: NewHolder: WithIssuer: empty name", ErrInvalidArgument)
	}
	h := tokenHolder{token: t, done: done, issuer: o.issuer}
	switch {
	case !o.hasUntil:
		return h, nil
	case o.validUntil.IsZero():
		return nil, fmt.Errorf("%w: NewHolder: WithValidUntil: zero time", ErrInvalidArgument)
	}
	return expiringHolder{tokenHolder: h, until: o.validUntil}, nil
}

// tokenHolder is NewHolder's holder without a deadline. Set once.
type tokenHolder struct {
	token  Token
	done   <-chan struct{}
	issuer string // "": none
}

func (h tokenHolder) Token() Token          { return h.token }
func (h tokenHolder) Done() <-chan struct{} { return h.done }
func (h tokenHolder) Issuer() string        { return h.issuer }

// expiringHolder is NewHolder's holder with a deadline: an Expirer. A
// separate type, since a Guard takes any Expirer's deadline as binding.
type expiringHolder struct {
	tokenHolder
	until time.Time
}

func (h expiringHolder) ValidUntil() time.Time { return h.until }
