package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/nilchecktest"
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
		"UnlockNow":       func() error { return l.UnlockNow(nilCtx) },
		"Campaign":        func() error { _, err := c.Campaign(nilCtx, "x", ""); return err },
		"Proclaim":        func() error { return term.Proclaim(nilCtx, "v") },
		"Resign":          func() error { return term.Resign(nilCtx) },
		"Observe":         func() error { _, err := c.Observe(nilCtx, "x"); return err },
		"WatchStatus":     func() error { _, err := c.WatchStatus(nilCtx, etcdlock.StatusScope{}); return err },
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

// TestZeroValues: a call on a nil or zero Client, Lock, Term, Semaphore or
// MultiLock (one no constructor made, as an ignored error leaves) gives an
// error matching ErrInvalidArgument, never a panic.
func TestZeroValues(t *testing.T) {
	ctx := t.Context()
	var (
		nilClient *etcdlock.Client
		nilLock   *etcdlock.Lock
		nilTerm   *etcdlock.Term
		nilSem    *etcdlock.Semaphore
		nilMulti  *etcdlock.MultiLock
	)
	lead := func(context.Context, *etcdlock.Term) error { return nil }
	fn := func(context.Context, *etcdlock.Lock) error { return nil }
	for _, c := range map[string]*etcdlock.Client{"nil": nilClient, "zero": {}} {
		sem, _ := c.Semaphore("x", 2) // no I/O: its Acquire is refused below
		for name, call := range map[string]func() error{
			"Lock":              func() error { _, err := c.Lock(ctx, "x"); return err },
			"TryLock":           func() error { _, err := c.TryLock(ctx, "x"); return err },
			"RLock":             func() error { _, err := c.RLock(ctx, "x"); return err },
			"Do":                func() error { return c.Do(ctx, "x", fn) },
			"LockAll":           func() error { _, err := c.LockAll(ctx, []string{"x"}); return err },
			"Campaign":          func() error { _, err := c.Campaign(ctx, "x", ""); return err },
			"Run":               func() error { return c.Run(ctx, "x", "", lead) },
			"Observe":           func() error { _, err := c.Observe(ctx, "x"); return err },
			"WatchStatus":       func() error { _, err := c.WatchStatus(ctx, etcdlock.StatusScope{}); return err },
			"Leader":            func() error { _, err := c.Leader(ctx, "x"); return err },
			"Inspect":           func() error { _, err := c.Inspect(ctx, "x"); return err },
			"InspectSemaphore":  func() error { _, err := c.InspectSemaphore(ctx, "x"); return err },
			"Break":             func() error { _, err := c.Break(ctx, "x", 1); return err },
			"BreakSemaphore":    func() error { _, err := c.BreakSemaphore(ctx, "x", 1); return err },
			"ListLocks":         func() error { _, err := c.ListLocks(ctx); return err },
			"CheckToken":        func() error { _, err := c.CheckToken(ctx, 1); return err },
			"Close":             func() error { return c.Close(ctx) },
			"Semaphore.Acquire": func() error { _, err := sem.Acquire(ctx); return err },
		} {
			if err := nilchecktest.NoPanic(call); !errors.Is(err, etcdlock.ErrInvalidArgument) {
				t.Errorf("%s on a %s Client: got %v, want an error matching ErrInvalidArgument", name, map[bool]string{true: "nil", false: "zero"}[c == nil], err)
			}
		}
	}
	for name, call := range map[string]func() error{
		"nil Lock.Unlock":          func() error { return nilLock.Unlock(ctx) },
		"nil Lock.UnlockNow":       func() error { return nilLock.UnlockNow(ctx) },
		"zero Lock.Unlock":         func() error { return (&etcdlock.Lock{}).Unlock(ctx) },
		"nil Term.Resign":          func() error { return nilTerm.Resign(ctx) },
		"zero Term.Proclaim":       func() error { return (&etcdlock.Term{}).Proclaim(ctx, "v") },
		"nil Semaphore.TryAcquire": func() error { _, err := nilSem.TryAcquire(ctx); return err },
		"zero Semaphore.Acquire":   func() error { _, err := (&etcdlock.Semaphore{}).Acquire(ctx); return err },
		"nil MultiLock.Unlock":     func() error { return nilMulti.Unlock(ctx) },
		"zero MultiLock.Unlock":    func() error { return (&etcdlock.MultiLock{}).Unlock(ctx) },
		"nil LeaderHealth.Check":   func() error { return (*etcdlock.LeaderHealth)(nil).Check() },
		"zero LeaderHealth.Check":  func() error { return (&etcdlock.LeaderHealth{}).Check() },
		"nil LeaderHealth.ServeHTTP": func() error {
			w := httptest.NewRecorder()
			(*etcdlock.LeaderHealth)(nil).ServeHTTP(w, httptest.NewRequest("GET", "/healthz", nil))
			if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "invalid argument") {
				return fmt.Errorf("answered %d %q, want 503 and the reason", w.Code, w.Body)
			}
			return etcdlock.ErrInvalidArgument
		},
		"nil Semaphore.Inspect":  func() error { _, err := nilSem.Inspect(ctx); return err },
		"zero Semaphore.Inspect": func() error { _, err := (&etcdlock.Semaphore{}).Inspect(ctx); return err },
		"nil Lock.Issued":        func() error { _, err := nilLock.Issued(ctx, 1); return err },
		"zero Lock.Issued":       func() error { _, err := (&etcdlock.Lock{}).Issued(ctx, 1); return err },
		"nil Term.Issued":        func() error { _, err := nilTerm.Issued(ctx, 1); return err },
		"zero Term.Issued":       func() error { _, err := (&etcdlock.Term{}).Issued(ctx, 1); return err },
	} {
		if err := nilchecktest.NoPanic(call); !errors.Is(err, etcdlock.ErrInvalidArgument) {
			t.Errorf("%s: got %v, want an error matching ErrInvalidArgument", name, err)
		}
	}
	// WriteRefused takes a context but returns nothing: on a nil or zero
	// Lock or Term it does nothing.
	refusal := errors.New("refused")
	for name, call := range map[string]func(){
		"nil Lock.WriteRefused":  func() { nilLock.WriteRefused(ctx, refusal) },
		"zero Lock.WriteRefused": func() { (&etcdlock.Lock{}).WriteRefused(ctx, refusal) },
		"nil Term.WriteRefused":  func() { nilTerm.WriteRefused(ctx, refusal) },
		"zero Term.WriteRefused": func() { (&etcdlock.Term{}).WriteRefused(ctx, refusal) },
	} {
		if err := nilchecktest.NoPanic(func() error { call(); return nil }); err != nil {
			t.Errorf("%s: %v, want nothing done", name, err)
		}
	}
}
