package gormfence

import (
	"context"
	"database/sql/driver"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/fencelock/fencelock/fence"
	sqlfence "github.com/fencelock/fencelock/fence/sql"
	"github.com/fencelock/fencelock/internal/pgtag"
	"github.com/fencelock/fencelock/internal/sqlpreempt"
)

// A claim waits for any other transaction holding its row, also one whose
// holder froze inside Update, long after its lease ended. On MariaDB
// (and MySQL 5.7) and PostgreSQL a claim that has waited Plugin.PreemptAfter
// looks, on another connection of the pool, at what holds the row, and
// ends a transaction that claimed it with an older token:
// internal/sqlpreempt, fence/sql's own (its package doc has the rules).
// On PostgreSQL the holder is told by its tag, which its claim sets
// (tagKey).

// tagKey is the Statement setting by which a claim asks, on PostgreSQL,
// for its transaction's tag (internal/pgtag) to be set before its row is
// locked; its value is the claimed row's resource (see resource).
const tagKey = "fencelock:gormfence:tag"

// tag is the condition that sets, on PostgreSQL, the claiming
// transaction's tag to take in the claim of resource with token, for the
// transaction alone (set_config's is_local: a pooled connection does not
// keep it). An uncorrelated subquery, it is evaluated once, before the
// UPDATE locks the row, and is always true.
type tag struct {
	resource string
	token    int64
}

// Build writes the condition.
func (t tag) Build(b clause.Builder) {
	b.WriteString("(SELECT " + pgtag.SQL("fencelock_arg.t", "fencelock_arg.t", "fencelock_arg.e") + " FROM (SELECT ")
	b.AddVar(b, t.token)
	b.WriteString("::bigint AS t, ")
	b.AddVar(b, pgtag.Entry(t.resource, t.token))
	b.WriteString("::text AS e) AS fencelock_arg) IS NOT NULL")
}

// tagged returns the tag condition a claim's statement asked for, if any,
// on PostgreSQL.
func (c *callbacks) tagged(stmt *gorm.Statement, tok fence.Token) []clause.Expression {
	v, ok := stmt.Settings.Load(tagKey)
	res, _ := v.(string)
	if !ok || c.d != sqlfence.PostgreSQL {
		return nil
	}
	return []clause.Expression{tag{resource: res, token: int64(tok)}}
}

// preemptAfter is how long a claim of db waits before it looks at what
// holds its row; 0 for never.
func preemptAfter(db *gorm.DB) time.Duration {
	p, _ := db.Config.Plugins[pluginName].(Plugin)
	switch {
	case p.NoPreemption:
		return 0
	case p.PreemptAfter > 0:
		return p.PreemptAfter
	}
	return sqlpreempt.DefaultAfter
}

// watch is the watch over a claim of model's row (s its schema, column its
// fence column, res its resource) with token, run through db.
func watch(ctx context.Context, db *gorm.DB, d sqlfence.Dialect, s *schema.Schema, column, res string, token fence.Token, model any) sqlpreempt.Watch {
	w := sqlpreempt.Watch{After: preemptAfter(db), Resource: res, Token: token}
	switch d {
	case sqlfence.MySQL:
		w.Server = sqlpreempt.MySQL
	case sqlfence.PostgreSQL:
		w.Server = sqlpreempt.PostgreSQL
	default:
		return w
	}
	w.Pool, _ = db.DB() // a transaction's pool too; none: no watch
	q := db.Statement.Quote
	w.Row = sqlpreempt.Row{Table: q(s.Table), Qualified: strings.Contains(s.Table, "."), Fence: q(column)}
	v := reflect.ValueOf(model).Elem()
	ways := make([][]string, 0, len(s.PrimaryFields))
	for _, f := range s.PrimaryFields {
		pv, _ := f.ValueOf(ctx, v)
		w.Row.Key = append(w.Row.Key, q(f.DBName))
		w.Row.Values = append(w.Row.Values, pv)
		ways = append(ways, lockData(pv))
	}
	if d == sqlfence.MySQL {
		w.Row.LockData = sqlpreempt.LockData(ways...)
	}
	return w
}

// lockData returns the ways InnoDB's lock_data may show a key column
// holding v: an integer in decimal, a string quoted (a text column) or in
// hex (a binary one), bytes in hex; none for another type.
func lockData(v any) []string {
	if vr, ok := v.(driver.Valuer); ok {
		dv, err := vr.Value()
		if err != nil {
			return nil
		}
		v = dv
	}
	switch rv := reflect.ValueOf(v); {
	case !rv.IsValid():
		return nil
	case rv.CanInt():
		return []string{strconv.FormatInt(rv.Int(), 10)}
	case rv.CanUint():
		return []string{strconv.FormatUint(rv.Uint(), 10)}
	case rv.Kind() == reflect.String:
		return []string{sqlpreempt.Quoted(rv.String()), sqlpreempt.Hex([]byte(rv.String()))}
	case rv.Kind() == reflect.Slice && rv.Type().Elem().Kind() == reflect.Uint8:
		return []string{sqlpreempt.Hex(rv.Bytes())}
	}
	return nil
}

// preempting runs the claim's statement, update, under w. When ctx ends
// meanwhile, the error says so, and names what the claim was waiting for
// if the watch found it.
func preempting(ctx context.Context, w sqlpreempt.Watch, update func() error) error {
	note, err := w.Run(ctx, update)
	if note == "" {
		return err
	}
	return fmt.Errorf("gormfence: claim of %s: the context ended (%w) while it was raising the fence%s: %w", w.Resource, context.Cause(ctx), note, err)
}
