package oteltest

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencelock/fencelock/fence"
)

// Store is a fenced store whose writes [SDK.StoreWrites] makes: every
// adapter's Store.
type Store interface {
	fence.Store
	fence.Updater
	Delete(ctx context.Context, key string, token fence.Token) error
}

// Write is one (operation, outcome) of the fencelock.writes counter.
type Write struct{ Op, Outcome string }

// StoreWrites is the write of each kind every adapter counts: [Write]s.
var StoreWrites = []Write{{"put", "accepted"}, {"put", "stale"}, {"delete", "accepted"}, {"get_for_update", "accepted"}, {"update", "accepted"}}

// StoreWrites makes one write of each of [StoreWrites] on s, to the keys
// prefix+"k" and prefix+"new" (which must hold nothing), the first Put
// under a caller's span, and returns that span's context.
func (sdk *SDK) StoreWrites(tb testing.TB, s Store, prefix string) trace.SpanContext {
	tb.Helper()
	k := prefix + "k"
	ctx, parent := sdk.Tracers.Tracer("test").Start(tb.Context(), "caller")
	if err := s.Put(ctx, k, 5, []byte("v5")); err != nil {
		tb.Fatal(err)
	}
	parent.End()
	if err := s.Put(tb.Context(), k, 3, []byte("v3")); !errors.Is(err, fence.ErrStale) {
		tb.Fatalf("Put(3) after 5: got %v, want ErrStale", err)
	}
	if err := s.Delete(tb.Context(), k, 7); err != nil {
		tb.Fatal(err)
	}
	if _, err := s.GetForUpdate(tb.Context(), prefix+"new", 5); !errors.Is(err, fence.ErrNotFound) {
		tb.Fatalf("GetForUpdate of a key with no value: got %v, want ErrNotFound", err)
	}
	if err := s.Update(tb.Context(), k, 7, func(fence.Record) ([]byte, error) { return []byte("u"), nil }); err != nil {
		tb.Fatal(err)
	}
	return parent.SpanContext()
}

// WantWrites checks that the fencelock.writes counter counted each of ws
// once for adapter (its fencelock.adapter).
func (sdk *SDK) WantWrites(tb testing.TB, adapter string, ws ...Write) {
	tb.Helper()
	for _, w := range ws {
		attr := []attribute.KeyValue{attribute.String("fencelock.adapter", adapter),
			attribute.String("fencelock.operation", w.Op), attribute.String("fencelock.outcome", w.Outcome)}
		if got := sdk.Sum(tb, "fencelock.writes", attr...); got != 1 {
			tb.Errorf("fencelock.writes %v: got %d, want 1", attr, got)
		}
	}
}

// WantPutSpan checks that adapter's first put span (adapter+".put") is a
// child of parent, with the token 5 [SDK.StoreWrites] gives it.
func (sdk *SDK) WantPutSpan(tb testing.TB, adapter string, parent trace.SpanContext) {
	tb.Helper()
	first := sdk.Span(tb, adapter+".put")
	if first.Parent().SpanID() != parent.SpanID() {
		tb.Fatalf("%s.put span: %v, want a child of the caller's", adapter, first)
	}
	if tok, _ := Attr(first, "fencelock.token"); tok.AsInt64() != 5 {
		tb.Fatalf("%s.put span's token: got %v, want 5", adapter, tok)
	}
}
