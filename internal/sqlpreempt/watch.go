// Package sqlpreempt ends, on MySQL and MariaDB and on PostgreSQL, the
// transaction of a frozen older holder that blocks a statement raising a
// fence: fence/sql's fenced transactions and fence/gorm's claims use it,
// each naming the row its statement raises (a table, its key, its fence
// column).
//
// A statement raising a fence waits for any other transaction that holds
// the fence's row. When that transaction belongs to a holder that froze
// with it open (a GC pause, a stopped process, a suspended VM whose TCP
// connection stays up), the wait lasts as long as the freeze, long after
// that holder's lease ended and the waiter got the lock. So a statement
// that has waited [Watch.After] looks, on a connection of its own, at the
// transactions holding the row, and ends the connection of one that
// raised the fence to an older token than the waiter's:
//
//   - on MySQL and MariaDB, InnoDB's lock waits name the holders, the row
//     is read as they left it (READ UNCOMMITTED) and as committed, and a
//     holder that raised it to an older token is ended (KILL CONNECTION);
//   - on PostgreSQL, the holder is found by the row's xmax, and its
//     tokens read from its tag (internal/pgtag), which the holder's own
//     claim sets; one older on what they share is ended
//     (pg_terminate_backend).
//
// A holder of the same token or a newer one, and one that has not raised
// the fence (no fenced transaction, or on PostgreSQL one whose tag names
// only other resources: it wrote the row without claiming it), are left
// alone. The unblocked path
// costs a timer that is stopped.
package sqlpreempt

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fencelock/fencelock/fence"
)

// DefaultAfter is how long a statement waits before it looks, unless its
// package's option says otherwise.
const DefaultAfter = 100 * time.Millisecond

// every is how often a waiting statement looks again.
const every = 250 * time.Millisecond

// Server is the kind of server the row is on.
type Server int

// The servers a watch looks on; any other makes no watch.
const (
	MySQL      Server = iota + 1 // MySQL 5.7 and MariaDB (INNODB_LOCK_WAITS)
	PostgreSQL                   // PostgreSQL (pgtag)
)

// Row names the row a statement raises the fence of. Its names go into
// SQL as they are: quote them.
type Row struct {
	Table     string   // the table, quoted, maybe qualified
	Qualified bool     // Table names its database (MySQL), else it is in the connection's
	Key       []string // the primary key's columns, quoted
	Values    []any    // the key's values, one per column of Key
	Fence     string   // the fence column, quoted
	// LockData are the ways InnoDB's information_schema.INNODB_LOCKS may
	// show the key in lock_data ([LockData]): one of them must be the
	// row's. None: the row cannot be named, and nothing is ended.
	LockData []string
}

// Watch is one fence statement's watch: the claim of Resource with Token
// on Row, by a statement whose connection is one of Pool's.
type Watch struct {
	Server   Server
	Pool     *sql.DB // nil: no other connection to look from, no watch
	After    time.Duration
	Row      Row
	Resource string // the claim's resource: its tag's hash on PostgreSQL, and messages
	Token    fence.Token
}

// Run runs op, the statement raising the fence, under the watch (Start,
// and its stop once op has returned, also when op panics). It returns
// op's error and, when op failed because ctx ended meanwhile (not refused
// as stale), a note for the caller's message on what the claim waited
// for: " (what the watch found)", or why nothing looked; "" otherwise.
func (w Watch) Run(ctx context.Context, op func() error) (note string, err error) {
	stop := w.Start(ctx)
	defer func() {
		found, watching := stop()
		switch {
		case err == nil || ctx.Err() == nil || errors.Is(err, fence.ErrStale):
		case found != nil:
			note = " (" + found.Error() + ")"
		case !watching:
			note = " (nothing looked at what it waited for: preemption is off, or the handle has no other connection to look from)"
		}
	}()
	return "", op()
}

// Start starts the watch over the statement about to raise the fence, and
// returns what stops it once the statement has returned, which returns
// what the watch found and could not end, and whether there was a watch
// at all (none when After <= 0, Pool is nil, or the server is another).
// Until After has passed the watch is a timer alone; ctx ends it too.
func (w Watch) Start(ctx context.Context) (stop func() (found error, watching bool)) {
	if w.After <= 0 || w.Pool == nil || (w.Server != MySQL && w.Server != PostgreSQL) {
		return func() (error, bool) { return nil, false }
	}
	ctx, cancel := context.WithCancel(ctx)
	var (
		wg    sync.WaitGroup
		found error // set by the watch, read once it has returned
	)
	wg.Add(1)
	timer := time.AfterFunc(w.After, func() {
		defer wg.Done()
		found = w.run(ctx)
	})
	return func() (error, bool) {
		cancel()
		if timer.Stop() {
			wg.Done()
		}
		wg.Wait()
		return found, true
	}
}

// run looks at the row's holders now and then every 250 ms until ctx
// ends, ending those older than the claim. It returns what it could not
// do, for the statement's error.
func (w Watch) run(ctx context.Context) error {
	var (
		conn *sql.Conn
		last error
	)
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return last
		case <-t.C:
		}
		if conn == nil {
			c, err := w.Pool.Conn(ctx)
			if err != nil {
				last = fmt.Errorf("taking a connection to look at what blocks it: %w", err)
				t.Reset(every)
				continue
			}
			conn = c
		}
		var err error
		if w.Server == PostgreSQL {
			err = w.endPostgres(ctx, conn)
		} else {
			err = w.endMySQL(ctx, conn)
		}
		if ctx.Err() != nil && last != nil {
			return last // a look the end cut short: keep what the one before found
		}
		last = err
		t.Reset(every)
	}
}

// where is the condition naming the row, its placeholders numbered from
// first on PostgreSQL ($first...), ? on MySQL.
func (w Watch) where(first int) string {
	var b strings.Builder
	for i, k := range w.Row.Key {
		if i > 0 {
			b.WriteString(" AND ")
		}
		b.WriteString(k + " = ")
		if w.Server == PostgreSQL {
			b.WriteString("$" + strconv.Itoa(first+i))
		} else {
			b.WriteString("?")
		}
	}
	return b.String()
}
