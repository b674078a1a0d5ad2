package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/pgtag"
)

// DefaultFenceTable is the fence table [RunInTx], [Exec] and [CreateSchema]
// use.
const DefaultFenceTable = "fencelock_fences"

// Fences is a fence table: one row per resource (a lock name, an invoice, a
// tenant) holding the highest token any fenced transaction on it carried.
// A fenced transaction first raises its resource's row to its token, and is
// rolled back with [fence.ErrStale] if the row is already higher. The row
// lock this takes serialises fenced transactions on one resource until they
// end, so a stale one can never commit after a newer one.
//
// The table is (resource text PRIMARY KEY, token bigint NOT NULL); see
// [Fences.CreateTable]. Create a Fences with [NewFences]; the zero Fences is
// not usable (its methods fail with [ErrInvalidArgument]). A Fences holds
// no connection and is safe for concurrent use.
type Fences struct {
	label  string
	quoted string // the table's name, quoted
	// advanceSQL is Advance's guard: $1 the resource, $2 the token, $3
	// the tag.
	advanceSQL string
	currentSQL string
	createSQL  string
	// execGuardSQL is Exec's guard: $1 the resource, $2 the token, $3
	// the tag.
	execGuardSQL string
	// advanceAllSQL is RunInTxAll's: $1 the resources, $2 their tokens,
	// $3 whether they are one token, $4 the tag.
	advanceAllSQL string
	// xmaxSQL lists the xmax of the rows of the resources $2 (preempt.go).
	xmaxSQL string
	tel     *pgTelemetry
}

// defaultFences serves the package-level functions, reporting to the
// global providers. It is made on their first call, so that a program that
// never calls them creates no instruments for them. Should the providers
// refuse an instrument (an SDK installed by then may), no constructor is
// there to return the error: it goes to the OpenTelemetry error handler
// (otel.Handle), and the writes report to the instruments the providers
// gave.
var defaultFences = sync.OnceValue(func() *Fences {
	tel, err := globalTelemetry()
	if err != nil {
		otel.Handle(fmt.Errorf("postgres: creating the OpenTelemetry instruments of the package-level functions: %w", err))
	}
	return newFences(pgx.Identifier{DefaultFenceTable}.Sanitize(), DefaultFenceTable, tel)
})

// NewFences returns the [Fences] kept in the table called name
// (schema-qualified or not; create it with [CreateSchema]); opts say where
// its fenced transactions report ([WithMeterProvider],
// [WithTracerProvider]). It fails with [ErrInvalidIdentifier] on an
// unusable name, and with [ErrInvalidOption] on an invalid option, before
// any I/O.
func NewFences(name pgx.Identifier, opts ...Option) (*Fences, error) {
	q, err := quoteName("fence table", name)
	if err != nil {
		return nil, err
	}
	o, err := newTelemetryOptions(opts)
	if err != nil {
		return nil, err
	}
	tel, err := o.telemetry()
	if err != nil {
		return nil, err
	}
	return newFences(q, strings.Join(name, "."), tel), nil
}

// newFences returns the Fences of the table quoted q, reporting to tel.
func newFences(q, label string, tel *pgTelemetry) *Fences {
	// A guard that passes also records the token for the rest of the
	// transaction, for the row trigger of [Table.CreateTrigger], and shows
	// it to newer holders that it may block (preempt.go).
	// The tag is set as the row to insert is made, before any wait for the
	// resource's row: a transaction that is refused there and freezes
	// before it rolls back holds the row tagged too.
	// $3 is the tag (tagOf).
	guard := "INSERT INTO " + q + " AS cur (resource, token) VALUES ($1, CASE WHEN " + setTag(3) +
		" IS NOT NULL THEN $2::bigint END)" +
		" ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token WHERE cur.token <= EXCLUDED.token" +
		" RETURNING set_config('" + tokenSetting + "', token::text, true)"
	return &Fences{
		label:         label,
		quoted:        q,
		advanceSQL:    guard,
		currentSQL:    "SELECT token FROM " + q + " WHERE resource = $1",
		createSQL:     "CREATE TABLE IF NOT EXISTS " + q + " (resource text PRIMARY KEY, token bigint NOT NULL CHECK (token > 0))",
		execGuardSQL:  execGuard(guard),
		advanceAllSQL: advanceAllGuard(q),
		xmaxSQL:       "SELECT xmax::text FROM " + q + " WHERE resource = ANY($2::text[])",
		tel:           tel,
	}
}

// CreateTable creates the fence table if it does not exist. ctx bounds the
// call. Run it once, at deployment, rather than racing it from many
// processes: concurrent CREATE TABLE IF NOT EXISTS can fail in PostgreSQL.
func (f *Fences) CreateTable(ctx context.Context, db DB) error {
	if err := cmp.Or(f.check(), checkDB(db), checkCtx(ctx)); err != nil {
		return err
	}
	if _, err := db.Exec(ctx, f.createSQL); err != nil {
		return fmt.Errorf("postgres: create fence table %s: %w", f.label, classify(err))
	}
	return nil
}

// Advance raises resource's fence to token, or returns a [*fence.StaleError]
// (Current filled) when it is already higher. Run it first in a transaction
// you manage yourself, as [Fences.RunInTx] does; the transaction must be
// rolled back when it fails. ctx bounds the call.
//
// Outside a transaction (db a pool or a connection in autocommit) the
// statement commits by itself, and a lost connection or a ctx that ended
// mid-request gives an error matching [fence.ErrUnknownOutcome], as for
// [Table.Update]. Inside the caller's pgx.Tx it is a definite failure: that
// transaction cannot commit any more.
func (f *Fences) Advance(ctx context.Context, db DB, resource string, token fence.Token) error {
	if err := cmp.Or(f.check(), checkWrite(ctx, db, resource, token)); err != nil {
		return err
	}
	return withConn(ctx, db, func(c DB) error {
		tag, err := c.Exec(ctx, f.advanceSQL, resource, int64(token), tagOf(c, int64(token), int64(token), pgtag.Entry(resource, int64(token))))
		if err != nil {
			return writeError(c, "advance fence", resource, token, err)
		}
		if tag.RowsAffected() == 0 {
			return f.stale(ctx, c, resource, token)
		}
		return nil
	})
}

// Current returns the highest token accepted for resource, or an error
// matching [fence.ErrNotFound] if none was. ctx bounds the call.
func (f *Fences) Current(ctx context.Context, db DB, resource string) (fence.Token, error) {
	if err := cmp.Or(f.check(), checkDB(db)); err != nil {
		return 0, err
	}
	if resource == "" {
		return 0, fmt.Errorf("%w: empty resource", fence.ErrInvalidKey)
	}
	if err := checkCtx(ctx); err != nil {
		return 0, err
	}
	var tok int64
	err := db.QueryRow(ctx, f.currentSQL, resource).Scan(&tok)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("%w: no fence for %q in %s", fence.ErrNotFound, resource, f.label)
	}
	if err != nil {
		return 0, fmt.Errorf("postgres: read fence %s: %w", resource, classify(err))
	}
	return fence.Token(tok), nil
}

// stale builds the error for a refused advance, reading the current token
// when it can.
func (f *Fences) stale(ctx context.Context, db DB, resource string, token fence.Token) error {
	se := &fence.StaleError{Resource: resource, Token: token}
	if cur, err := f.Current(ctx, db, resource); err == nil && cur > token {
		se.Current = cur
	}
	return se
}
