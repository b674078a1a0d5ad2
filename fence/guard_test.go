package fence_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/nilchecktest"
)

// holder is a fence.Holder and fence.Expirer under the test's control.
type holder struct {
	token fence.Token
	done  chan struct{}
	until time.Time
}

func newHolder(tok fence.Token) *holder {
	return &holder{token: tok, done: make(chan struct{}), until: time.Now().Add(time.Hour)}
}

func (h *holder) Token() fence.Token    { return h.token }
func (h *holder) Done() <-chan struct{} { return h.done }
func (h *holder) ValidUntil() time.Time { return h.until }

func TestNewGuardRejectsBadTokens(t *testing.T) {
	for _, tok := range []fence.Token{0, -1} {
		if _, err := fence.NewGuard(newHolder(tok)); !errors.Is(err, fence.ErrInvalidToken) {
			t.Errorf("NewGuard(token %d): got %v, want fence.ErrInvalidToken", tok, err)
		}
	}
}

func TestGuardRefusesLocally(t *testing.T) {
	tests := []struct {
		name  string
		alter func(h *holder)
	}{
		{"done closed", func(h *holder) { close(h.done) }},
		{"deadline passed", func(h *holder) { h.until = time.Now().Add(-time.Millisecond) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHolder(4)
			g, err := fence.NewGuard(h)
			if err != nil {
				t.Fatal(err)
			}
			tt.alter(h)
			called := false
			err = g.Do(t.Context(), func(context.Context, fence.Token) error { called = true; return nil })
			if !errors.Is(err, fence.ErrLockLost) || called {
				t.Fatalf("Do: got error %v, write called %v; want fence.ErrLockLost and no call", err, called)
			}
		})
	}
}

func TestGuardDo(t *testing.T) {
	g, err := fence.NewGuard(newHolder(9))
	if err != nil {
		t.Fatal(err)
	}
	var got fence.Token
	if err := g.Do(t.Context(), func(_ context.Context, tok fence.Token) error { got = tok; return nil }); err != nil {
		t.Fatalf("Do: got %v, want nil", err)
	}
	if got != 9 {
		t.Errorf("token passed to write: got %d, want 9", got)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := g.Do(ctx, func(context.Context, fence.Token) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("Do with cancelled ctx: got %v, want context.Canceled", err)
	}
}

// TestNilArguments: a nil context, holder, store or write function, a typed
// nil one too, gives an error, never a panic, and calls nothing.
func TestNilArguments(t *testing.T) {
	g, err := fence.NewGuard(newHolder(9))
	if err != nil {
		t.Fatal(err)
	}
	var nilCtx context.Context
	write := func(context.Context, fence.Token) error { t.Error("write called"); return nil }
	tests := []struct {
		name string
		call func() error
	}{
		{"NewGuard(nil)", func() error { _, err := fence.NewGuard(nil); return err }},
		{"NewGuard(typed nil)", func() error { _, err := fence.NewGuard((*holder)(nil)); return err }},
		{"Do(nil ctx)", func() error { return g.Do(nilCtx, write) }},
		{"Do(nil write)", func() error { return g.Do(t.Context(), nil) }},
		{"Put(nil ctx)", func() error { return g.Put(nilCtx, fence.NewMemoryStore(), "k", nil) }},
		{"Put(nil store)", func() error { return g.Put(t.Context(), nil, "k", nil) }},
		{"Put(typed nil store)", func() error { return g.Put(t.Context(), (*fence.MemoryStore)(nil), "k", nil) }},
		{"zero Guard Check", func() error { return (&fence.Guard{}).Check() }},
		{"zero Guard Do", func() error { return (&fence.Guard{}).Do(t.Context(), write) }},
		{"nil Guard Check", func() error { return (*fence.Guard)(nil).Check() }},
		{"nil Guard Put", func() error { return (*fence.Guard)(nil).Put(t.Context(), fence.NewMemoryStore(), "k", nil) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := nilchecktest.NoPanic(tt.call); !errors.Is(err, fence.ErrInvalidArgument) {
				t.Fatalf("%s: got %v, want an error matching ErrInvalidArgument", tt.name, err)
			}
		})
	}
}

// lastWriterWins is a store without fencing: the control for the test below.
type lastWriterWins struct{ fence.MemoryStore }

func (s *lastWriterWins) Put(ctx context.Context, k string, _ fence.Token, v []byte) error {
	return s.MemoryStore.Put(ctx, k, 1, v)
}

// TestPausedHolder plays the failure story: A passes the guard's local check,
// is paused, B takes over and writes, A's write arrives late. With a fencing
// store A is refused; with the control store A's stale write lands.
func TestPausedHolder(t *testing.T) {
	tests := []struct {
		name       string
		store      fence.Store
		wantStale  bool
		wantResult string
	}{
		{"fenced", fence.NewMemoryStore(), true, "B"},
		{"control, no fencing", &lastWriterWins{}, false, "A"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := newHolder(33), newHolder(34)
			ga, _ := fence.NewGuard(a)
			gb, _ := fence.NewGuard(b)
			err := ga.Do(t.Context(), func(ctx context.Context, tok fence.Token) error {
				close(a.done) // A's lease expires while it is paused here...
				if err := gb.Put(ctx, tt.store, "row", []byte("B")); err != nil {
					t.Fatalf("B's write: got %v, want nil", err)
				}
				return tt.store.Put(ctx, "row", tok, []byte("A")) // ...and A wakes up.
			})
			if got := errors.Is(err, fence.ErrStale); got != tt.wantStale {
				t.Fatalf("A's late write: got error %v, want stale %v", err, tt.wantStale)
			}
			r, err := tt.store.Get(t.Context(), "row")
			if err != nil || string(r.Value) != tt.wantResult {
				t.Fatalf("row: got %q (%v), want %q", r.Value, err, tt.wantResult)
			}
		})
	}
}

// observing is a holder that is also a fence.RefusalObserver.
type observing struct {
	*holder
	refused []error
}

func (o *observing) WriteRefused(_ context.Context, err error) { o.refused = append(o.refused, err) }

// A holder that is a RefusalObserver hears of each write the guard refuses
// locally, and of nothing else: not of writes let through, nor of Check.
func TestGuardTellsRefusalObserver(t *testing.T) {
	h := &observing{holder: newHolder(4)}
	g, err := fence.NewGuard(h)
	if err != nil {
		t.Fatal(err)
	}
	s := fence.NewMemoryStore()
	if err := g.Put(t.Context(), s, "k", []byte("v")); err != nil {
		t.Fatalf("Put while held: got %v, want nil", err)
	}
	close(h.done)
	if err := g.Check(); !errors.Is(err, fence.ErrLockLost) {
		t.Fatalf("Check: got %v, want fence.ErrLockLost", err)
	}
	if len(h.refused) != 0 {
		t.Fatalf("refusals told before any refused write: got %d, want 0", len(h.refused))
	}
	err = g.Put(t.Context(), s, "k", []byte("late"))
	if !errors.Is(err, fence.ErrLockLost) {
		t.Fatalf("Put after the loss: got %v, want fence.ErrLockLost", err)
	}
	if len(h.refused) != 1 || h.refused[0] != err {
		t.Fatalf("refusals told: got %v, want exactly the error Put returned (%v)", h.refused, err)
	}
}
