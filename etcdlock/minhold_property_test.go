package etcdlock_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// Three machines run a job with TryLock, WithMinHold and Unlock over and
// over while a third of their transactions and lease grants arrive late,
// twice, or lose their reply: successive runs (by token) start at least
// the hold apart, and tokens increase. The control, without the hold,
// runs the job closer together than that.
func TestMinHoldRequestFaultProperty(t *testing.T) {
	testenv.Long(t, "a property test: random request faults on minimum holds")
	const hold = 1200 * time.Millisecond
	for _, withHold := range []bool{true, false} {
		name := map[bool]string{true: "min hold", false: "control: none"}[withHold]
		t.Run(name, func(t *testing.T) {
			type run struct {
				at    time.Time
				token fence.Token
			}
			var mu sync.Mutex
			var runs []run
			span := map[bool]time.Duration{true: 8 * hold, false: 2 * hold}[withHold]
			ctx, cancel := context.WithTimeout(t.Context(), span)
			defer cancel()
			var wg sync.WaitGroup
			for m := range 3 {
				cli, in := faulty(t, uint64(40+m))
				c := newLocker(t, cli, etcdlock.WithCleanupTimeout(300*time.Millisecond))
				in.Random(0.33, 200*time.Millisecond, func(method string, req any) bool {
					return reqfault.Method("KV/Txn")(method, req) || reqfault.Method("Lease/LeaseGrant")(method, req)
				})
				var opts []etcdlock.LockOption
				if withHold {
					opts = append(opts, etcdlock.WithMinHold(hold))
				}
				wg.Go(func() {
					for ctx.Err() == nil {
						actx, acancel := context.WithTimeout(ctx, 500*time.Millisecond)
						l, err := c.TryLock(actx, "job", opts...)
						acancel()
						if err != nil {
							continue // ErrLocked, or a fault
						}
						mu.Lock()
						runs = append(runs, run{time.Now(), l.Token()})
						mu.Unlock()
						uctx, ucancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
						if err := l.Unlock(uctx); errors.Is(err, etcdlock.ErrLost) {
							t.Errorf("Unlock: %v", err)
						}
						ucancel()
					}
				})
			}
			wg.Wait()
			slices.SortFunc(runs, func(a, b run) int { return int(a.token - b.token) })
			closest := time.Duration(1<<63 - 1)
			for i := 1; i < len(runs); i++ {
				if runs[i].token <= runs[i-1].token {
					t.Fatalf("run %d: token %d after %d, want greater", i, runs[i].token, runs[i-1].token)
				}
				closest = min(closest, runs[i].at.Sub(runs[i-1].at))
			}
			t.Logf("%d runs in %v, closest %v apart", len(runs), span, closest)
			if len(runs) < 2 {
				t.Fatalf("%d runs, want at least 2", len(runs))
			}
			if got := closest >= hold-50*time.Millisecond; got != withHold {
				t.Fatalf("closest runs %v apart, want at least the hold %v: %v", closest, hold, withHold)
			}
		})
	}
}
