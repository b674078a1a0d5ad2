package etcdlock_test

import (
	"context"
	"errors"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
)

// The nil rule (CONTRIBUTING.md): a nil context, client or function gives
// an error matching ErrInvalidArgument, never a panic, before any request.
func TestNilArguments(t *testing.T) {
	c := newLocker(t, etcdClient(t))
	l := mustLock(t, c, "held")
	defer l.Unlock(t.Context())
	term := mustCampaign(t, c, "led", "")
	defer term.Resign(t.Context())
	var nilCtx context.Context
	lead := func(context.Context, *etcdlock.Term) error { return nil }
	tests := map[string]func() error{
		"New(nil)":        func() error { _, err := etcdlock.New(nil); return err },
		"New(typed nil)":  func() error { _, err := etcdlock.New((*clientv3.Client)(nil)); return err },
		"Lock":            func() error { _, err := c.Lock(nilCtx, "x"); return err },
		"TryLock":         func() error { _, err := c.TryLock(nilCtx, "x"); return err },
		"Unlock":          func() error { return l.Unlock(nilCtx) },
		"Campaign":        func() error { _, err := c.Campaign(nilCtx, "x", ""); return err },
		"Proclaim":        func() error { return term.Proclaim(nilCtx, "v") },
		"Resign":          func() error { return term.Resign(nilCtx) },
		"Observe":         func() error { _, err := c.Observe(nilCtx, "x"); return err },
		"Run(nil ctx)":    func() error { return c.Run(nilCtx, "x", "", lead) },
		"Run(nil lead)":   func() error { return c.Run(t.Context(), "x", "", nil) },
		"Leader":          func() error { _, err := c.Leader(nilCtx, "x"); return err },
		"Inspect":         func() error { _, err := c.Inspect(nilCtx, "x"); return err },
		"Break":           func() error { _, err := c.Break(nilCtx, "x", 1); return err },
		"ListLocks":       func() error { _, err := c.ListLocks(nilCtx); return err },
		"Close":           func() error { return c.Close(nilCtx) },
		"InspectElection": func() error { _, err := c.InspectElection(nilCtx, "x"); return err },
		"BreakElection":   func() error { _, err := c.BreakElection(nilCtx, "x", 1); return err },
		"ListElections":   func() error { _, err := c.ListElections(nilCtx); return err },
	}
	for name, call := range tests {
		t.Run(name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("panic: %v", p)
					}
				}()
				err = call()
			}()
			if !errors.Is(err, etcdlock.ErrInvalidArgument) {
				t.Fatalf("got %v, want an error matching ErrInvalidArgument", err)
			}
		})
	}
	if l.Err() != nil || term.Err() != nil {
		t.Fatalf("after the nil calls: lock %v, term %v; want both held", l.Err(), term.Err())
	}
}
