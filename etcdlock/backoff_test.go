package etcdlock

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// pauses returns the pauses of n waits of b, each cut short by a
// cancelled context (so the test sleeps not at all), checking that every
// wait returns the context's error.
func pauses(t *testing.T, b *backoff, n int) []time.Duration {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var got []time.Duration
	for range n {
		got = append(got, max(b.d, b.min))
		if err := b.wait(ctx, nil); !errors.Is(err, context.Canceled) {
			t.Fatalf("wait with a cancelled context: got %v, want context.Canceled", err)
		}
	}
	return got
}

func TestBackoffDoubles(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name     string
		min, max time.Duration
		want     []time.Duration
	}{
		{"session.retry and Run", 100 * ms, 5 * time.Second,
			[]time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5 * time.Second, 5 * time.Second}},
		{"a waiter's watch", 10 * ms, time.Second,
			[]time.Duration{10 * ms, 20 * ms, 40 * ms, 80 * ms, 160 * ms, 320 * ms, 640 * ms, time.Second, time.Second}},
		{"min equals max", 50 * ms, 50 * ms, []time.Duration{50 * ms, 50 * ms, 50 * ms}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := backoff{min: tt.min, max: tt.max}
			if got := pauses(t, &b, len(tt.want)); !slices.Equal(got, tt.want) {
				t.Errorf("pauses: got %v, want %v", got, tt.want)
			}
			b.reset()
			if got := pauses(t, &b, 2); !slices.Equal(got, tt.want[:2]) {
				t.Errorf("pauses after reset: got %v, want %v", got, tt.want[:2])
			}
		})
	}
}

// TestBackoffResetIfLasted is the loop of wait.go's retryPause: before each
// pause, an attempt that lasted longer than max starts the pauses over.
func TestBackoffResetIfLasted(t *testing.T) {
	ms := time.Millisecond
	b := backoff{min: 10 * ms, max: time.Second}
	pauses(t, &b, 3) // 10, 20, 40 ms
	b.resetIfLasted(time.Now())
	if got, want := pauses(t, &b, 1), []time.Duration{80 * ms}; !slices.Equal(got, want) {
		t.Errorf("after a short attempt: got %v, want %v", got, want)
	}
	b.resetIfLasted(time.Now().Add(-2 * time.Second))
	if got, want := pauses(t, &b, 2), []time.Duration{10 * ms, 20 * ms}; !slices.Equal(got, want) {
		t.Errorf("after an attempt that lasted: got %v, want %v", got, want)
	}
}

func TestBackoffWait(t *testing.T) {
	closed := make(chan struct{})
	close(closed)
	expired, cancel := context.WithTimeout(context.Background(), -time.Second)
	defer cancel()
	tests := []struct {
		name string
		ctx  context.Context
		stop <-chan struct{}
		want error
	}{
		{"full pause", context.Background(), nil, nil},
		{"full pause, stop open", context.Background(), make(chan struct{}), nil},
		{"stop closed", context.Background(), closed, errStopped},
		{"ctx past its deadline", expired, nil, context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := backoff{min: 20 * time.Millisecond, max: time.Second}
			start := time.Now()
			err := b.wait(tt.ctx, tt.stop)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("wait: got %v, want %v", err, tt.want)
			}
			if took := time.Since(start); (tt.want == nil) != (took >= 20*time.Millisecond) {
				t.Errorf("wait took %v; got error %v", took, err)
			}
			if b.d != 40*time.Millisecond {
				t.Errorf("next pause: got %v, want 40ms", b.d)
			}
		})
	}
}

// TestBackoffStopMeansCaller is the shape of wait.go's pause and of Run:
// the caller turns errStopped into what its stop channel stands for.
func TestBackoffStopMeansCaller(t *testing.T) {
	sessionDone := make(chan struct{})
	close(sessionDone)
	b := backoff{min: time.Hour, max: time.Hour}
	err := b.wait(context.Background(), sessionDone)
	if errors.Is(err, errStopped) {
		err = sessionCause(ErrLeaseExpired)
	}
	if !errors.Is(err, ErrLost) || !errors.Is(err, ErrLeaseExpired) {
		t.Errorf("got %v, want an error matching ErrLost and ErrLeaseExpired", err)
	}
}
