package tel

import (
	"context"
	"reflect"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// Tracer starts the spans of one instrumentation scope with fixed start
// options, and none while no SDK is set: while tp is OpenTelemetry's
// global provider as it is before otel.SetTracerProvider, every span it
// would start records nothing, yet costs allocations and a context layer
// that each context lookup on the request's path walks. An SDK set later
// is used from the next span on (the check is made per span).
type Tracer struct {
	tracer trace.Tracer
	unset  trace.TracerProvider // the global provider before an SDK is set; nil if tp is another
	opts   []trace.SpanStartOption
}

// NewTracer returns the Tracer of scope on tp.
func NewTracer(tp trace.TracerProvider, scope string, opts ...trace.SpanStartOption) *Tracer {
	t := &Tracer{tracer: tp.Tracer(scope), opts: opts}
	if global := otel.GetTracerProvider(); tp == global && isUnsetGlobal(global) {
		t.unset = global
	}
	return t
}

// Start starts a span called name, a child of ctx's, and returns the
// context carrying it; while no SDK is set, a no-op span and ctx as it is.
func (t *Tracer) Start(ctx context.Context, name string) (context.Context, trace.Span) {
	if t.unset != nil && otel.GetTracerProvider() == t.unset {
		return ctx, noopSpan
	}
	return t.tracer.Start(ctx, name, t.opts...)
}

// noopSpan is boxed once: a tracenoop.Span, a struct of several words,
// would be copied to the heap by each return as a trace.Span.
var noopSpan trace.Span = tracenoop.Span{}

// globalPkg is the package of the provider otel.GetTracerProvider returns
// until an SDK is set (otel.SetTracerProvider then makes it return the
// SDK's, and this one delegate to it).
const globalPkg = "go.opentelemetry.io/otel/internal/global"

func isUnsetGlobal(tp trace.TracerProvider) bool {
	rt := reflect.TypeOf(tp)
	if rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
	}
	return rt.PkgPath() == globalPkg
}
