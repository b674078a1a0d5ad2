package s3fence_test

import (
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/fencelock/fencelock/fence"
	s3fence "github.com/fencelock/fencelock/fence/s3"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/oteltest"
	"github.com/fencelock/fencelock/internal/testkit/s3test"
)

// TestUpdateLostAnswer: the server applies a PUT of Update, the claim's or
// the final write's, but its answer is lost. Update reads back, finds its
// write, and goes on: the counter is incremented once.
func TestUpdateLostAnswer(t *testing.T) {
	tests := []struct {
		name  string
		token fence.Token // 5 is claimed already: one PUT, the final write
	}{
		{"final write", 5},
		{"claim", 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &faults{}
			s := mustNew(t, faultyClient(t, f), s3test.New(t).Bucket)
			k := key(t)
			mustPut(t, s, k, 5, "1")
			f.mu.Lock()
			f.lostAnswers = 1
			f.mu.Unlock()
			calls := 0
			if err := s.Update(t.Context(), k, tt.token, counter(&calls)); err != nil {
				t.Fatalf("Update whose PUT's answer was lost: got %v, want nil (it landed)", err)
			}
			wantRecord(t, s, k, tt.token, "2")
			if calls != 1 {
				t.Errorf("fn called %d times, want 1", calls)
			}
		})
	}
}

// TestUpdateLostRequest: Update's final PUT never reaches the server.
// Reading back cannot tell a lost request from a slow one, so the outcome
// is unknown, and neither stale nor a conflict.
func TestUpdateLostRequest(t *testing.T) {
	f := &faults{}
	s := mustNew(t, faultyClient(t, f), s3test.New(t).Bucket)
	k := key(t)
	mustPut(t, s, k, 5, "1")
	f.mu.Lock()
	f.lostRequests = 1
	f.mu.Unlock()
	err := s.Update(t.Context(), k, 5, counter(new(int)))
	fencewant.Unknown(t, err, 5, s3fence.ErrConflict, fence.ErrConflict)
	wantRecord(t, s, k, 5, "1")
}

// TestUpdateConflicts: a PUT answered 409 sends Update back to the read
// and fn; refused every time, it gives up after fence.UpdateAttempts
// rounds with ErrConflict, having written nothing.
func TestUpdateConflicts(t *testing.T) {
	tests := []struct {
		name      string
		conflicts int
		wantErr   bool
	}{
		{"two", 2, false},
		{"endless", 1000, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &faults{}
			s := mustNew(t, faultyClient(t, f), s3test.New(t).Bucket, s3fence.WithRetryDelay(0))
			k := key(t)
			mustPut(t, s, k, 5, "1")
			f.mu.Lock()
			f.conflicts = tt.conflicts
			f.mu.Unlock()
			calls := 0
			err := s.Update(t.Context(), k, 5, counter(&calls))
			if !tt.wantErr {
				if err != nil || calls != tt.conflicts+1 {
					t.Fatalf("Update through %d conflicts: got %v and %d calls of fn, want nil and %d", tt.conflicts, err, calls, tt.conflicts+1)
				}
				wantRecord(t, s, k, 5, "2")
				return
			}
			if !errors.Is(err, fence.ErrConflict) || !errors.Is(err, s3fence.ErrConflict) || errors.Is(err, fence.ErrUnknownOutcome) {
				t.Fatalf("Update under endless conflicts: got %v, want fence.ErrConflict and s3fence.ErrConflict", err)
			}
			if calls != fence.UpdateAttempts {
				t.Errorf("fn called %d times, want fence.UpdateAttempts (%d)", calls, fence.UpdateAttempts)
			}
			wantRecord(t, s, k, 5, "1")
		})
	}
}

// TestUpdateTelemetry: Update and GetForUpdate are counted as writes of
// their own operations, by outcome.
func TestUpdateTelemetry(t *testing.T) {
	otel := oteltest.New(t)
	srv := s3test.New(t)
	s := mustNew(t, srv.Client(t), srv.Bucket, s3fence.WithMeterProvider(otel.Meters), s3fence.WithTracerProvider(otel.Tracers))
	k := key(t)
	if err := s.Update(t.Context(), k, 5, counter(new(int))); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetForUpdate(t.Context(), k, 4); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("GetForUpdate(4) after 5: got %v, want fence.ErrStale", err)
	}
	for _, tt := range []struct{ op, outcome string }{{"update", "accepted"}, {"get_for_update", "stale"}} {
		if got := otel.Sum(t, "fencelock.writes", attribute.String("fencelock.operation", tt.op), attribute.String("fencelock.outcome", tt.outcome)); got != 1 {
			t.Errorf("fencelock.writes %s %s: got %d, want 1", tt.op, tt.outcome, got)
		}
	}
	otel.Span(t, "s3.update")
}
