package sqlfence

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/sqlpreempt"
)

// A fenced transaction's statement raising a fence waits for any other
// transaction that holds the fence's row, also one whose holder froze with
// it open, long after its lease ended. On MySQL, MariaDB and PostgreSQL a
// statement that has waited preemptAfter looks, on a connection of its
// own, at what holds the row, and ends a transaction that raised the fence
// to an older token than the waiter's: internal/sqlpreempt (its package
// doc has the rules; fence/gorm's claims use it too), and "A frozen
// holder" in the package doc. The unblocked path costs a timer that is
// stopped.

// defaultPreemptAfter is [WithPreemptAfter]'s default.
const defaultPreemptAfter = sqlpreempt.DefaultAfter

// preemption is one fence statement's watch: claim's row, in f, waited for
// by a transaction of pool.
type preemption struct {
	f     *Fences
	pool  *sql.DB // nil: no other connection to look from
	after time.Duration
	claim fence.Claim
}

// guard runs advance, the statement raising p.claim's fence, under the
// watch. When ctx ends meanwhile, the error says so, and names what the
// statement was waiting for if the watch found it.
func (p preemption) guard(ctx context.Context, advance func() error) error {
	note, err := p.watch().Run(ctx, advance)
	if note == "" {
		return err
	}
	return fmt.Errorf("sqlfence: fenced transaction on %s: the context ended (%w) while it was raising the fence%s; the transaction was rolled back and nothing was written",
		p.claim.Resource, context.Cause(ctx), note)
}

// watch is the watch over the statement raising p.claim's fence: on the
// fence table's row of the claim's resource.
func (p preemption) watch() sqlpreempt.Watch {
	w := sqlpreempt.Watch{Pool: p.pool, After: p.after, Resource: p.claim.Resource, Token: p.claim.Token,
		Row: sqlpreempt.Row{Table: p.f.name, Qualified: p.f.qualified, Key: []string{"resource"}, Fence: "token"}}
	switch p.f.d {
	case MySQL:
		w.Server = sqlpreempt.MySQL
		w.Row.Values = []any{[]byte(p.claim.Resource)}
		w.Row.LockData = []string{sqlpreempt.Hex([]byte(p.claim.Resource))}
	case PostgreSQL:
		w.Server = sqlpreempt.PostgreSQL
		w.Row.Values = []any{p.claim.Resource}
	}
	return w
}
