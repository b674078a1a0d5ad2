package fence_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/nilchecktest"
)

// scripted is an UpdateRounds whose halves return what the test says, and
// count their calls; with traced, waited and conflicted it has the
// optional interfaces too.
type scripted struct {
	claimErr, writeErr error
	claims, writes     int
	waits              []int
	ended              []error
}

func (s *scripted) ClaimRead(context.Context, string, fence.Token) (fence.Record, int, error) {
	s.claims++
	return fence.Record{Value: []byte("v"), Token: 1}, s.claims, s.claimErr
}

func (s *scripted) WriteIf(context.Context, string, fence.Token, int, []byte) error {
	s.writes++
	return s.writeErr
}

type traced struct{ *scripted }

func (t traced) StartUpdate(ctx context.Context, _ string, _ fence.Token) (context.Context, fence.UpdateSpan) {
	return ctx, t
}
func (t traced) End(err error) { t.ended = append(t.ended, err) }
func (t traced) WaitUpdate(_ context.Context, _ string, n int) error {
	t.waits = append(t.waits, n)
	return nil
}

var errOwnConflict = fmt.Errorf("%w: the adapter's own", fence.ErrConflict)

type conflicted struct{ *scripted }

func (c conflicted) UpdateConflict(string, fence.Token, error) error { return errOwnConflict }

func TestRunUpdate(t *testing.T) {
	boom := errors.New("boom")
	fnChanged := func(fence.Record) ([]byte, error) { return nil, fmt.Errorf("nested: %w", fence.ErrChanged) }
	ok := func(fence.Record) ([]byte, error) { return []byte("w"), nil }
	for _, tt := range []struct {
		name           string
		rounds         *scripted
		fn             fence.UpdateFunc
		want           error
		claims, writes int
	}{
		{"written", &scripted{}, ok, nil, 1, 1},
		{"not found is claimed", &scripted{claimErr: fence.ErrNotFound}, ok, nil, 1, 1},
		{"changed every round", &scripted{writeErr: fence.ErrChanged}, ok, fence.ErrConflict, fence.UpdateAttempts, fence.UpdateAttempts},
		{"claim meets a change", &scripted{claimErr: fence.ErrChanged}, ok, fence.ErrConflict, fence.UpdateAttempts, 0},
		{"stale at the claim", &scripted{claimErr: &fence.StaleError{}}, ok, fence.ErrStale, 1, 0},
		{"stale at the write", &scripted{writeErr: &fence.StaleError{}}, ok, fence.ErrStale, 1, 1},
		{"lost reply", &scripted{writeErr: &fence.UnknownOutcomeError{Err: boom}}, ok, fence.ErrUnknownOutcome, 1, 1},
		{"fn's error", &scripted{}, func(fence.Record) ([]byte, error) { return nil, boom }, boom, 1, 0},
		{"fn's error matching ErrChanged is fn's", &scripted{}, fnChanged, fence.ErrChanged, 1, 0},
		{"nil fn", &scripted{}, nil, fence.ErrInvalidArgument, 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := fence.RunUpdate(t.Context(), tt.rounds, "k", 1, tt.fn)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Errorf("got %v, want an error matching %v", err, tt.want)
			}
			if errors.Is(err, fence.ErrConflict) && errors.Is(err, fence.ErrChanged) {
				t.Errorf("got %v, which matches ErrChanged: the loop keeps it to itself", err)
			}
			if tt.rounds.claims != tt.claims || tt.rounds.writes != tt.writes {
				t.Errorf("claims, writes: got %d, %d, want %d, %d", tt.rounds.claims, tt.rounds.writes, tt.claims, tt.writes)
			}
		})
	}
}

// The checks come before any I/O: no claim is made.
func TestRunUpdateChecks(t *testing.T) {
	ok := func(fence.Record) ([]byte, error) { return nil, nil }
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	for _, tt := range []struct {
		name  string
		ctx   context.Context
		key   string
		token fence.Token
		want  error
	}{
		{"empty key", t.Context(), "", 1, fence.ErrInvalidKey},
		{"zero token", t.Context(), "k", 0, fence.ErrInvalidToken},
		{"nil ctx", nil, "k", 1, fence.ErrInvalidArgument},
		{"ended ctx", ended, "k", 1, context.Canceled},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &scripted{}
			if err := fence.RunUpdate(tt.ctx, s, tt.key, tt.token, ok); !errors.Is(err, tt.want) {
				t.Errorf("got %v, want an error matching %v", err, tt.want)
			}
			if s.claims != 0 {
				t.Errorf("got %d claims, want 0", s.claims)
			}
		})
	}
	if err := fence.RunUpdate[int](t.Context(), nil, "k", 1, ok); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Errorf("nil rounds: got %v, want an error matching fence.ErrInvalidArgument", err)
	}
}

// A ctx that ends while fn runs sends nothing.
func TestRunUpdateEndedWhileFnRan(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	s := &scripted{}
	err := fence.RunUpdate(ctx, s, "k", 1, func(fence.Record) ([]byte, error) { cancel(); return nil, nil })
	if !errors.Is(err, context.Canceled) || s.writes != 0 {
		t.Errorf("got %v and %d writes, want context.Canceled and 0", err, s.writes)
	}
}

// The span ends once, with the result; the waits come between rounds
// only; the adapter's conflict error replaces fence's.
func TestRunUpdateOptional(t *testing.T) {
	s := &scripted{writeErr: fence.ErrChanged}
	err := fence.RunUpdate(t.Context(), traced{s}, "k", 1, func(fence.Record) ([]byte, error) { return nil, nil })
	if !errors.Is(err, fence.ErrConflict) || len(s.ended) != 1 || s.ended[0] != err {
		t.Errorf("got %v, span ended with %v, want ErrConflict once", err, s.ended)
	}
	if len(s.waits) != fence.UpdateAttempts-1 || s.waits[0] != 1 {
		t.Errorf("waits after rounds %v, want 1 to %d", s.waits, fence.UpdateAttempts-1)
	}
	s = &scripted{writeErr: fence.ErrChanged}
	if err := fence.RunUpdate(t.Context(), conflicted{s}, "k", 1, func(fence.Record) ([]byte, error) { return nil, nil }); err != errOwnConflict {
		t.Errorf("got %v, want the adapter's conflict error", err)
	}
}

// A panic in fn is passed on, and the span ends with ErrPanicked.
func TestRunUpdatePanic(t *testing.T) {
	s := &scripted{}
	defer func() {
		if p := recover(); p != "fn" {
			t.Errorf("recovered %v, want fn's panic", p)
		}
		if len(s.ended) != 1 || !errors.Is(s.ended[0], fence.ErrPanicked) || s.writes != 0 {
			t.Errorf("span ended with %v after %d writes, want ErrPanicked once and no write", s.ended, s.writes)
		}
	}()
	_ = fence.RunUpdate(t.Context(), traced{s}, "k", 1, func(fence.Record) ([]byte, error) { panic("fn") })
}

// TestRunUpdateTypedNil: rounds that are a nil pointer (a nil *Store's, as
// a nil *MemoryStore's are) are refused with ErrInvalidArgument before
// any I/O, as a nil interface is, by RunUpdate and RunUpdateAll: without
// the check, the first round's ClaimRead panics.
func TestRunUpdateTypedNil(t *testing.T) {
	ctx := t.Context()
	fn := func(fence.Record) ([]byte, error) { return nil, nil }
	afn := func(map[string]fence.Record) (map[string][]byte, error) { return nil, nil }
	claims := []fence.Claim{{Resource: "k", Token: 1}}
	var m *fence.MemoryStore
	for _, tt := range []struct {
		name string
		call func() error
	}{
		{"RunUpdate", func() error { return fence.RunUpdate(ctx, (*scripted)(nil), "k", 1, fn) }},
		{"MemoryStore.Update", func() error { return m.Update(ctx, "k", 1, fn) }},
		{"MemoryStore.UpdateAll", func() error { return m.UpdateAll(ctx, claims, afn) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := nilchecktest.NoPanic(tt.call); !errors.Is(err, fence.ErrInvalidArgument) {
				t.Fatalf("got %v, want fence.ErrInvalidArgument", err)
			}
		})
	}
}
