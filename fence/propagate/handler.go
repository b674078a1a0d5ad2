package propagate

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/nilcheck"
)

// RefusedHeader is the response header that says why a service refused a
// call for its fencing token: "missing" and "invalid" (status 400, from
// [NewHandler]), or "stale" (status 409, from [WriteStale]).
// [CheckResponse] reads it.
const RefusedHeader = "Fencing-Refused"

// Option configures [NewHandler].
type Option interface {
	apply(*options)
}

type options struct {
	required bool
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithRequired sets whether a request must carry a fencing token. Default
// true: a request without one is refused with 400 before the handler runs.
// With false it reaches the handler, whose context then carries no
// [Fencing] and names no issuer, whatever the context it was served in
// carried; a token that is sent must still parse.
func WithRequired(required bool) Option {
	return optionFunc(func(o *options) { o.required = required })
}

// NewHandler returns h wrapped so that the Fencing-Token header of each
// request is parsed ([Parse]) into the request's context, where h finds it
// with [FromContext] and fences its writes with it:
//
//	ledger, err := propagate.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
//		f, _ := propagate.FromContext(r.Context()) // there: required by default
//		_, err := postgres.Exec(r.Context(), pool, "invoice-42", f.Token, "UPDATE ...") // fenced on the resource
//		if propagate.WriteStale(w, err) {
//			return // 409: a newer holder wrote first
//		}
//		...
//	}))
//
// A request whose header does not parse, or comes more than once, is
// refused with 400 Bad Request and "Fencing-Refused: invalid", and one
// without it, unless [WithRequired](false), with 400 and
// "Fencing-Refused: missing"; h does not run for either. The refusal's
// body is one line of plain text saying why.
//
// NewHandler fails with an error matching [fence.ErrInvalidArgument] when
// h is nil or an option is.
func NewHandler(h http.Handler, opts ...Option) (http.Handler, error) {
	if nilcheck.IsNil(h) {
		return nil, fmt.Errorf("%w: NewHandler: nil handler", fence.ErrInvalidArgument)
	}
	o := options{required: true}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: NewHandler: nil Option", fence.ErrInvalidArgument)
		}
		opt.apply(&o)
	}
	return &handler{h: h, o: o}, nil
}

type handler struct {
	h http.Handler
	o options
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	vs := r.Header.Values(Header)
	switch {
	case len(vs) == 0 && !h.o.required:
		h.h.ServeHTTP(w, r.WithContext(withoutFencing(r.Context())))
		return
	case len(vs) == 0:
		refuse(w, "missing", ErrMissing)
		return
	case len(vs) > 1:
		refuse(w, "invalid", fmt.Errorf("%w: %d %s headers, want one", ErrInvalidHeader, len(vs), Header))
		return
	}
	f, err := Parse(vs[0])
	if err != nil {
		refuse(w, "invalid", err)
		return
	}
	ctx, _ := NewContext(r.Context(), f)         // f parsed, so valid
	ctx = fence.ContextWithIssuer(ctx, f.Issuer) // none clears any
	h.h.ServeHTTP(w, r.WithContext(ctx))
}

// withoutFencing returns ctx without a Fencing or an issuer: a request
// that carries no Fencing-Token names neither, whatever the context it is
// served in (a server's BaseContext, a caller serving the handler
// in-process) carried. It returns ctx itself when it carries neither.
func withoutFencing(ctx context.Context) context.Context {
	if _, ok := FromContext(ctx); ok {
		ctx = context.WithValue(ctx, contextKey{}, nil) // FromContext: none
	}
	if fence.IssuerFromContext(ctx) != "" {
		ctx = fence.ContextWithIssuer(ctx, "")
	}
	return ctx
}

// refuse writes a refusal: its kind's status (refusalStatus), the
// Fencing-Refused header set to why, and err as the body.
func refuse(w http.ResponseWriter, why string, err error) {
	kind, _, _ := strings.Cut(why, ";")
	w.Header().Set(RefusedHeader, why)
	http.Error(w, err.Error(), refusalStatus[kind])
}
