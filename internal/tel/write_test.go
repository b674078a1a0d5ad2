package tel_test

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/tel"
	"github.com/fencelock/fencelock/internal/testkit/oteltest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// BenchmarkWrite is the telemetry's own cost per fenced write (Start and
// End, one accepted and one stale in turn), on the global providers with
// no SDK installed, on the SDK with every span recorded and kept in memory
// ("sdk"), and on the SDK with every span recorded and exported through a
// batch processor whose exporter drops them ("sdk-exported").
func BenchmarkWrite(b *testing.B) {
	stale := &fence.StaleError{Resource: "r", Token: 1, Current: 2}
	for _, name := range []string{"nosdk", "sdk", "sdk-exported"} {
		b.Run(name, func(b *testing.B) {
			r, err := newRecorder(b, name)
			if err != nil {
				b.Fatal(err)
			}
			op := r.Op("update")
			ctx := context.Background()
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				_, w := op.Start(ctx, 1)
				if w.Recording() {
					w.SetResource("accounts/a")
				}
				var err error = stale
				if i%2 == 0 {
					err = nil
				}
				w.End(err)
			}
		})
	}
}

func newRecorder(b *testing.B, sdk string) (*tel.Recorder, error) {
	var s *oteltest.SDK
	switch sdk {
	case "nosdk":
		return tel.New("postgres", "bench", nil, nil, "update")
	case "sdk":
		s = oteltest.New(b)
	default:
		s = oteltest.NewExported(b)
	}
	return tel.New("postgres", "bench", s.Meters, s.Tracers, "update")
}

func TestOutcome(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, tel.Accepted},
		{"stale", &fence.StaleError{}, tel.Stale},
		{"lock lost", fence.ErrLockLost, tel.LockLost},
		{"unknown", &fence.UnknownOutcomeError{Err: errors.New("reset")}, tel.Unknown},
		{"other", errors.New("boom"), tel.Error},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tel.Outcome(tt.err); got != tt.want {
				t.Errorf("Outcome(%v): got %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}

// fencelock.write.duration has buckets for seconds: a write of a
// millisecond or less is told apart from one of 10 ms (OpenTelemetry's
// default boundaries, made for milliseconds, put both in one bucket).
func TestWriteDurationBucketsForSeconds(t *testing.T) {
	s := oteltest.New(t)
	r, err := tel.New("test", "scope", s.Meters, s.Tracers, "update")
	if err != nil {
		t.Fatal(err)
	}
	_, w := r.Op("update").Start(context.Background(), 1)
	w.End(nil)
	b := s.Bounds(t, "fencelock.write.duration")
	if len(b) < 2 || b[0] > 0.001 || b[1] > 0.01 {
		t.Errorf("bucket boundaries %v, want the first two at most 1 ms and 10 ms", b)
	}
}
