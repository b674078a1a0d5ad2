package fence_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock/fence"
)

func TestNewHolderRefusesBadInput(t *testing.T) {
	open := make(chan struct{})
	for _, tt := range []struct {
		name  string
		token fence.Token
		done  chan struct{}
		opts  []fence.HolderOption
		want  error
	}{
		{"token 0", 0, open, nil, fence.ErrInvalidToken},
		{"negative token", -3, open, nil, fence.ErrInvalidToken},
		{"nil done", 5, nil, nil, fence.ErrInvalidArgument},
		{"nil option", 5, open, []fence.HolderOption{nil}, fence.ErrInvalidArgument},
		{"zero deadline", 5, open, []fence.HolderOption{fence.WithValidUntil(time.Time{})}, fence.ErrInvalidArgument},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, err := fence.NewHolder(tt.token, tt.done, tt.opts...)
			if !errors.Is(err, tt.want) || !errors.Is(err, fence.ErrInvalidArgument) || h != nil {
				t.Fatalf("got %v, %v; want nil and an error matching %v", h, err, tt.want)
			}
		})
	}
}

// The guard of a raw token writes while the caller's lock is held, and
// refuses locally once done is closed or the deadline has passed; the
// holder that is neither (the control) still writes.
func TestNewHolderGuard(t *testing.T) {
	for _, tt := range []struct {
		name     string
		close    bool
		until    time.Duration // 0: no WithValidUntil
		wantLost bool
	}{
		{"held", false, 0, false},
		{"held, deadline ahead", false, time.Hour, false},
		{"done closed", true, 0, true},
		{"deadline passed", false, -time.Millisecond, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan struct{})
			var opts []fence.HolderOption
			if tt.until != 0 {
				opts = append(opts, fence.WithValidUntil(time.Now().Add(tt.until)))
			}
			h, err := fence.NewHolder(9, done, opts...)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := h.(fence.Expirer); ok != (tt.until != 0) {
				t.Fatalf("an Expirer: got %v, want %v", ok, tt.until != 0)
			}
			if tt.close {
				close(done)
			}
			g, err := fence.NewGuard(h)
			if err != nil {
				t.Fatal(err)
			}
			s := fence.NewMemoryStore()
			err = g.Put(t.Context(), s, "k", []byte("v"))
			if errors.Is(err, fence.ErrLockLost) != tt.wantLost || (!tt.wantLost && err != nil) {
				t.Fatalf("got %v, want lock lost %v", err, tt.wantLost)
			}
			if r, err := s.Get(t.Context(), "k"); !tt.wantLost && (err != nil || r.Token != 9) {
				t.Fatalf("got %+v, %v; want the write with token 9", r, err)
			}
		})
	}
}
