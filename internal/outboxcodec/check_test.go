package outboxcodec_test

import (
	"context"
	"errors"
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/internal/outboxcodec"
)

var errInvalid = errors.New("invalid")

func TestChecks(t *testing.T) {
	ctx := context.Background()
	if err := outboxcodec.CheckList(outbox.Scope{}, 0, errInvalid); !errors.Is(err, errInvalid) {
		t.Errorf("CheckList limit 0: %v, want %v", err, errInvalid)
	}
	if err := outboxcodec.CheckList(outbox.Scope{}, 1, errInvalid); err != nil {
		t.Errorf("CheckList limit 1 (control): %v", err)
	}
	e := outbox.Effect{Resource: "r", Token: 1, Seq: -1}
	if err := outboxcodec.CheckRequeue(ctx, e, errInvalid); !errors.Is(err, errInvalid) {
		t.Errorf("CheckRequeue Seq -1: %v, want %v", err, errInvalid)
	}
	e.Seq, e.Resource = 0, ""
	if err := outboxcodec.CheckRequeue(ctx, e, errInvalid); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Errorf("CheckRequeue empty Resource: %v, want fence.ErrInvalidArgument", err)
	}
	e.Resource = "r"
	if err := outboxcodec.CheckRequeue(ctx, e, errInvalid); err != nil {
		t.Errorf("CheckRequeue (control): %v", err)
	}
}

func TestUnique(t *testing.T) {
	a := outbox.Effect{Resource: "r", Token: 1, Seq: 0}
	b := outbox.Effect{Resource: "r", Token: 1, Seq: 1}
	got := outboxcodec.Unique([]outbox.Settled{{Effect: a}, {Effect: b, Parked: "x"}, {Effect: a, Parked: "y"}, {Effect: b}})
	if len(got) != 2 || got[0].Effect.Key() != a.Key() || got[0].Parked != "" || got[1].Effect.Key() != b.Key() || got[1].Parked != "x" {
		t.Fatalf("Unique: %+v, want a then b parked, each at its first place", got)
	}
}
