package propagate

import (
	"context"
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/nilcheck"
)

// MaxNameLen is the longest lock name a [Fencing] may carry, in bytes
// (etcdlock's own limit).
const MaxNameLen = 256

// Fencing is what a call carries of the lock its caller holds: the lock's
// name and its fencing token, and the name of the tokens' issuer when the
// holder names one ([fence.IssuerNamer]). The called service fences its
// writes with them (the token, and the name as the resource or to check
// the caller holds the lock the service expects); [NewHandler] and the
// gRPC server interceptors put the issuer in the request's context
// ([fence.ContextWithIssuer]), for the stores that check it.
//
// The zero Fencing is not valid: see [Fencing.Validate].
type Fencing struct {
	// Name is the lock's name: non-empty UTF-8 of at most MaxNameLen bytes
	// without control characters.
	Name string
	// Token is the lock's fencing token; it must be positive.
	Token fence.Token
	// Issuer names the token's source ([fence.IssuerNamer]): empty for
	// none, or a name as Name's rules allow.
	Issuer string
}

// FencingOf returns the Fencing of a holder of the lock called name: its
// token, and its issuer when it names one ([fence.IssuerNamer]). A nil h
// (a nil pointer too) gives a Fencing without a token, which
// [NewContext] refuses.
//
//	ctx, err := propagate.NewContext(ctx, propagate.FencingOf(lock.Name(), lock))
func FencingOf(name string, h fence.Holder) Fencing {
	f := Fencing{Name: name}
	if nilcheck.IsNil(h) {
		return f
	}
	f.Token = h.Token()
	if n, ok := h.(fence.IssuerNamer); ok {
		f.Issuer = n.Issuer()
	}
	return f
}

// Validate returns an error matching [ErrInvalidName] or
// [fence.ErrInvalidToken] (both match [fence.ErrInvalidArgument]) when f
// cannot be carried, and nil otherwise.
func (f Fencing) Validate() error {
	if err := validateName(f.Name); err != nil {
		return err
	}
	if err := f.Token.Validate(); err != nil {
		return fmt.Errorf("propagate: %w", err)
	}
	if f.Issuer != "" {
		if err := validateName(f.Issuer); err != nil {
			return fmt.Errorf("%w (the issuer)", err)
		}
	}
	return nil
}

func validateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrInvalidName)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: %d bytes, longer than %d", ErrInvalidName, len(name), MaxNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: %.64q is not valid UTF-8", ErrInvalidName, name)
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: %.64q contains %q", ErrInvalidName, name, r)
		}
	}
	return nil
}

type contextKey struct{}

// NewContext returns a copy of ctx that carries f, for [Transport] and the
// gRPC client interceptors of fence/propagate/fencegrpc to send with every
// call made with it (an f already in ctx is replaced). It fails, returning
// nil, with an error matching [fence.ErrInvalidArgument] when ctx is nil or
// f is not valid ([Fencing.Validate]).
//
//	ctx, err := propagate.NewContext(ctx, propagate.FencingOf(lock.Name(), lock))
func NewContext(ctx context.Context, f Fencing) (context.Context, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: NewContext: nil context", fence.ErrInvalidArgument)
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return context.WithValue(ctx, contextKey{}, f), nil
}

// FromContext returns the Fencing that ctx carries, put there by
// [NewContext] (on the caller's side) or by [NewHandler] and the gRPC
// server interceptors (on the service's side, from the call), and whether
// there is one. A Fencing it returns is valid. A nil ctx carries none.
func FromContext(ctx context.Context) (Fencing, bool) {
	if ctx == nil {
		return Fencing{}, false
	}
	f, ok := ctx.Value(contextKey{}).(Fencing)
	return f, ok
}
