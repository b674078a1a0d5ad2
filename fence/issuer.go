package fence

import (
	"context"
	"fmt"
)

// IssuerNamer is implemented by holders that name the source of their
// tokens: tokens of two sources (two counters, two lock services) are not
// comparable, and a resource that has accepted one source's tokens must
// not order another's against them. [NewHolder] with [WithIssuer],
// fence/redisholder's and fence/pgadvisory's locks, and etcdlock's locks
// of a Client with its WithIssuer, implement it.
//
// A [Guard] whose holder is one passes the name to the resource with each
// write, in the write's context ([ContextWithIssuer]). The stores that
// check it ([MemoryStore], fence/postgres's Store with its issuer column)
// record the issuer of the tokens a key has accepted and refuse, with
// [ErrIssuerMismatch], a write whose tokens come from another; the other
// stores ignore it. An empty name is none: such a write, and a key whose
// floor was set without one, are not checked, so floors written before
// issuers keep working.
//
// It complements [TokenIssuer], which asks the lock service, after a
// refusal for staleness, whether it issued the resource's token: that
// tells a restored lock service from a newer holder, when every token
// comes from one service; an issuer's name keeps tokens of two services
// from being compared at all.
type IssuerNamer interface {
	// Issuer returns the name of the tokens' source, the same for the
	// holder's whole life ("" for none).
	Issuer() string
}

// issuerKey is the context key of the issuer's name.
type issuerKey struct{}

// ContextWithIssuer returns a copy of ctx that carries the name of the
// issuer of the tokens its writes carry, for the stores that check it (see
// [IssuerNamer]). A [Guard] does it for its holder's writes. An empty name
// removes it.
func ContextWithIssuer(ctx context.Context, issuer string) context.Context {
	return context.WithValue(ctx, issuerKey{}, issuer)
}

// IssuerFromContext returns the issuer's name that ctx carries, or "".
func IssuerFromContext(ctx context.Context) string {
	if ctx == nil {
		return ""
	}
	s, _ := ctx.Value(issuerKey{}).(string)
	return s
}

// WithIssuer names the source of the holder's tokens: the result of
// [NewHolder] then names it ([IssuerNamer]), and a Guard passes it to the
// stores that check it. Default: none. An empty name is refused.
func WithIssuer(name string) HolderOption {
	return holderOptionFunc(func(o *holderOptions) { o.issuer, o.hasIssuer = name, true })
}

// NeedIssuer returns the issuer's name that ctx carries
// ([IssuerFromContext]) or, when it carries none, an error matching
// [ErrIssuerRequired] and [ErrInvalidArgument] that says what to add. A
// store made to require issuers calls it before any I/O of a write.
func NeedIssuer(ctx context.Context) (string, error) {
	if iss := IssuerFromContext(ctx); iss != "" {
		return iss, nil
	}
	return "", fmt.Errorf("%w: write through a fence.Guard whose holder names its tokens' source "+
		"(etcdlock's WithIssuer, fence.NewHolder's WithIssuer; fence/redisholder and fence/pgadvisory name theirs), "+
		"or put the name in the write's context with fence.ContextWithIssuer", ErrIssuerRequired)
}
