package etcdlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/oteltest"
)

// A write a Guard refuses because the lock or term is lost is counted in
// fencelock.writes as adapter "guard", outcome lock_lost, traced as a child
// of the caller's span and logged at warn level; the writes it let through
// before the loss are not counted as refused (the control).
func TestTelemetryGuardRefusal(t *testing.T) {
	in, opts := withTelemetry(t)
	cli := etcdClient(t)
	c := newLocker(t, cli, opts...)
	store := fence.NewMemoryStore()
	refused := []attribute.KeyValue{attribute.String("fencelock.adapter", "guard"), outcome("lock_lost")}

	l := mustLock(t, c, "job")
	g, err := fence.NewGuard(l)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Put(t.Context(), store, "k", []byte("v")); err != nil {
		t.Fatalf("Put while held: got %v, want nil", err)
	}
	if got := in.Sum(t, "fencelock.writes", refused...); got != 0 {
		t.Fatalf("refused writes while held: got %d, want 0", got)
	}
	if _, err := cli.Delete(t.Context(), l.Key()); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, l.Done(), 2*time.Second, "deleted lock's Done")
	ctx, parent := in.Tracers.Tracer("test").Start(t.Context(), "caller")
	if err := g.Put(ctx, store, "k", []byte("late")); !errors.Is(err, fence.ErrLockLost) {
		t.Fatalf("Put after the loss: got %v, want fence.ErrLockLost", err)
	}
	parent.End()

	term := mustCampaign(t, c, "e", "v")
	tg, err := fence.NewGuard(term)
	if err != nil {
		t.Fatal(err)
	}
	if err := term.Resign(t.Context()); err != nil {
		t.Fatal(err)
	}
	err = tg.Do(t.Context(), func(context.Context, fence.Token) error { return nil })
	if !errors.Is(err, fence.ErrLockLost) {
		t.Fatalf("Do after Resign: got %v, want fence.ErrLockLost", err)
	}

	if got := in.Sum(t, "fencelock.writes", refused...); got != 2 {
		t.Errorf("refused writes: got %d, want 2", got)
	}
	sp := in.Span(t, "guard.write")
	if sp.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("guard.write span %v: want a child of the caller's span", sp)
	}
	if got, _ := oteltest.Attr(sp, "fencelock.token"); got.AsInt64() != int64(l.Token()) {
		t.Errorf("guard.write span's token: got %v, want %d", got.String(), l.Token())
	}
	var warned int
	for _, line := range in.logs.lines() {
		if line["level"] == "WARN" && line["msg"] == "etcdlock: write refused by the guard: lock lost" {
			if line["name"] == nil || line["token"] == nil || line["lease"] == nil {
				t.Errorf("refusal log line lacks name, token or lease: %v", line)
			}
			warned++
		}
	}
	if warned != 2 {
		t.Errorf("warn lines for refused writes: got %d, want 2", warned)
	}
}
