package redisholder_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/redisholder"
)

// A counter set back (Redis restarted without persistence) issues tokens
// the resource has passed: the next holder's writes are refused as stale,
// and the refusal says the counter regressed rather than blaming a newer
// holder. A refusal by a newer holder does not.
func TestCounterResetDetected(t *testing.T) {
	c, k := client(t), key(t)
	store := fence.NewMemoryStore()
	for range 2 {
		l := obtain(t, c, k, time.Minute)
		g, _ := fence.NewGuard(l)
		if err := g.Put(t.Context(), store, "report", []byte("v")); err != nil {
			t.Fatal(err)
		}
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Del(t.Context(), redisholder.TokenKey(k)).Err(); err != nil { // the restart
		t.Fatal(err)
	}
	l := obtain(t, c, k, time.Minute)
	g, _ := fence.NewGuard(l)
	err := g.Put(t.Context(), store, "report", []byte("after the reset"))
	if !errors.Is(err, fence.ErrStale) || !errors.Is(err, fence.ErrTokenRegressed) {
		t.Fatalf("token %d after the reset: got %v, want ErrStale and ErrTokenRegressed", l.Token(), err)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the counter catches up: 2, then 3
		obtain(t, c, k, time.Minute).Release(t.Context())
	}
	stale := obtain(t, c, k, time.Minute) // 4
	if err := stale.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	newer := obtain(t, c, k, time.Minute) // 5
	gn, _ := fence.NewGuard(newer)
	if err := gn.Put(t.Context(), store, "report", []byte("newer")); err != nil {
		t.Fatal(err)
	}
	gs, _ := fence.NewGuard(stillHeld{stale})
	if err := gs.Put(t.Context(), store, "report", []byte("late")); !errors.Is(err, fence.ErrStale) || errors.Is(err, fence.ErrTokenRegressed) {
		t.Fatalf("a late write under a newer holder: got %v, want ErrStale alone", err)
	}
}

// stillHeld is a Lock whose Done has not been seen closed (a paused
// holder), still asking its counter.
type stillHeld struct{ *redisholder.Lock }

func (h stillHeld) Done() <-chan struct{} { return make(chan struct{}) }
