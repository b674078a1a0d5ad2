package redisfence_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	redisfence "github.com/fencelock/fencelock/fence/redis"
)

// countingClient counts the commands it is given and sends none.
type countingClient struct{ n atomic.Int64 }

var errNotSent = errors.New("countingClient: not sent")

func (c *countingClient) Process(_ context.Context, cmd redis.Cmder) error {
	c.n.Add(1)
	cmd.SetErr(errNotSent)
	return errNotSent
}

type nilClaimer struct{}

func (*nilClaimer) Claims() []fence.Claim { return nil }

// UpdateAll refuses keys of two hash slots, and the rest of its bad input,
// before any I/O; keys that share a hash tag, in the keys or in the
// prefix, are sent.
func TestUpdateAllBadInput(t *testing.T) {
	var c countingClient
	s := mustNew(t, &c, "p:")
	fn := transfer(1, nil)
	var zero redisfence.Store
	for _, tt := range []struct {
		name string
		err  error
		want error
	}{
		{"keys in two slots", s.UpdateAll(t.Context(), []fence.Claim{{Resource: "a", Token: 1}, {Resource: "b", Token: 1}}, fn), redisfence.ErrCrossSlot},
		{"tag in one key only", s.UpdateAll(t.Context(), []fence.Claim{{Resource: "{a}:x", Token: 1}, {Resource: "a:y", Token: 1}}, fn), redisfence.ErrCrossSlot},
		{"no claims", s.UpdateAll(t.Context(), nil, fn), fence.ErrInvalidArgument},
		{"one key, two tokens", s.UpdateAll(t.Context(), []fence.Claim{{Resource: acctA, Token: 1}, {Resource: acctA, Token: 2}}, fn), fence.ErrInvalidArgument},
		{"zero token", s.UpdateAll(t.Context(), both(0), fn), fence.ErrInvalidToken},
		{"nil function", s.UpdateAll(t.Context(), both(1), nil), fence.ErrInvalidArgument},
		{"nil holder", s.UpdateHeld(t.Context(), nil, fn), fence.ErrInvalidArgument},
		{"typed nil holder", s.UpdateHeld(t.Context(), (*nilClaimer)(nil), fn), fence.ErrInvalidArgument},
		{"holder of nothing", s.UpdateHeld(t.Context(), &nilClaimer{}, fn), fence.ErrInvalidArgument},
		{"zero Store", zero.UpdateAll(t.Context(), both(1), fn), redisfence.ErrInvalidArgument},
	} {
		if !errors.Is(tt.err, tt.want) {
			t.Errorf("%s: got %v, want an error matching %v", tt.name, tt.err, tt.want)
		}
		if !errors.Is(tt.err, fence.ErrInvalidArgument) {
			t.Errorf("%s: got %v, want an error matching fence.ErrInvalidArgument too", tt.name, tt.err)
		}
	}
	if n := c.n.Load(); n != 0 {
		t.Fatalf("commands sent for bad input: got %d, want 0", n)
	}
	if err := s.UpdateAll(t.Context(), both(1), fn); !errors.Is(err, errNotSent) {
		t.Fatalf("keys of one hash tag: got %v, want them sent", err)
	}
	tagged := mustNew(t, &c, "p:{tenant}:")
	if err := tagged.UpdateAll(t.Context(), []fence.Claim{{Resource: "a", Token: 1}, {Resource: "b", Token: 1}}, fn); !errors.Is(err, errNotSent) {
		t.Fatalf("keys under a prefix with a hash tag: got %v, want them sent", err)
	}
}
