package sqlfence

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/fencelock/fencelock/fence/outbox"
)

// DefaultOutboxTable is the table [NewOutbox] keeps effects in unless
// [WithOutboxTable] names another, and the one [CreateOutboxSchema]
// creates.
const DefaultOutboxTable = "fencelock_outbox"

// DefaultMaxPayload is the largest [outbox.Effect] payload an [Outbox]
// records unless [WithMaxPayload] sets another: 1 MiB.
const DefaultMaxPayload = 1 << 20

// OutboxDB is what an [Outbox] needs from a database/sql handle: its
// statements, its queries of several rows, and the transactions
// [Outbox.Settle] fences. *sql.DB and *sql.Conn implement it.
type OutboxDB interface {
	DB
	TxBeginner
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

var (
	_ OutboxDB        = (*sql.DB)(nil)
	_ OutboxDB        = (*sql.Conn)(nil)
	_ outbox.Log      = (*Outbox)(nil)
	_ outbox.Checker  = (*Outbox)(nil)
	_ outbox.Requeuer = (*Outbox)(nil)
)

// Outbox is a table of side effects ([outbox.Effect]) recorded in the
// same fenced transaction as the state change they belong to
// ([Outbox.Record] inside [Fences.RunInTx]'s function), so that an effect
// exists if and only if its fenced write committed; and the [outbox.Log]
// an [outbox.Dispatcher] delivers them from. Its table has a row per
// effect (see [Outbox.CreateTable]): id (auto-increment: the recording
// order), resource, token, seq (unique together), hash ([outbox.Hash] of
// the resource, for a dispatcher's partition), destination, payload,
// recorded_at, and what a dispatcher settled: delivered_by (its token),
// settled_at, parked_reason, attempts.
//
// The dispatcher's own fence ([Outbox.Settle]) is a row of the same
// [Fences] table as the writes' fences. MySQL, MariaDB and SQLite have no
// notification of new rows, so an Outbox is no [outbox.Watcher]: the
// dispatcher polls.
//
// Create one with [NewOutbox]; the zero Outbox is not usable. An Outbox
// is safe for concurrent use when its handle is (a *sql.DB is).
type Outbox struct {
	db         OutboxDB
	f          *Fences
	d          Dialect
	name       string // quoted
	label      string // unquoted, for errors
	index      string // the pending index's name, quoted (SQLite: with the schema)
	indexOn    string // the table as CREATE INDEX names it, quoted
	maxPayload int
}

// OutboxOption configures an [Outbox]: [WithOutboxTable] or
// [WithMaxPayload]. The interface is sealed.
type OutboxOption interface{ applyOutbox(*outboxOptions) }

type outboxOptions struct {
	name       Identifier
	maxPayload int
}

type outboxOptionFunc func(*outboxOptions)

func (f outboxOptionFunc) applyOutbox(o *outboxOptions) { f(o) }

// WithOutboxTable names the table an [Outbox] keeps its effects in,
// possibly schema-qualified. Default [DefaultOutboxTable].
func WithOutboxTable(name Identifier) OutboxOption {
	return outboxOptionFunc(func(o *outboxOptions) { o.name = name })
}

// WithMaxPayload sets the largest payload, in bytes, [Outbox.Record]
// accepts: a larger one is refused with [outbox.ErrTooLarge] before any
// I/O. Default [DefaultMaxPayload] (1 MiB); n must be positive. The
// server's own limit (MySQL's max_allowed_packet) must leave room for it.
func WithMaxPayload(n int) OutboxOption {
	return outboxOptionFunc(func(o *outboxOptions) { o.maxPayload = n })
}

// NewOutbox returns the [Outbox] kept in its table ([WithOutboxTable]),
// read and written through db, whose effects belong to the fenced writes
// of f (and whose dispatchers fence themselves in f): its dialect is f's.
// It fails on a nil db or f ([ErrInvalidArgument]), an unusable table
// name ([ErrInvalidIdentifier]; in PostgreSQL and SQLite its last part
// followed by "_pending" names its index, within PostgreSQL's 63 bytes)
// or an invalid
// option ([ErrInvalidOption]), before any I/O.
func NewOutbox(db OutboxDB, f *Fences, opts ...OutboxOption) (*Outbox, error) {
	if err := checkDB(db); err != nil {
		return nil, err
	}
	if err := f.check(); err != nil {
		return nil, err
	}
	o := outboxOptions{name: Identifier{DefaultOutboxTable}, maxPayload: DefaultMaxPayload}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: nil OutboxOption", ErrInvalidOption)
		}
		opt.applyOutbox(&o)
	}
	if o.maxPayload <= 0 {
		return nil, fmt.Errorf("%w: WithMaxPayload(%d): want > 0", ErrInvalidOption, o.maxPayload)
	}
	d := f.d
	name, err := quoteName(d, "outbox table", o.name)
	if err != nil {
		return nil, err
	}
	ob := &Outbox{db: db, f: f, d: d, name: name, label: strings.Join(o.name, "."), indexOn: name, maxPayload: o.maxPayload}
	if err := ob.nameIndex(o.name); err != nil {
		return nil, err
	}
	return ob, nil
}

// nameIndex names the index of pending effects after the table: SQLite
// puts the schema on the index's name and none on its table's,
// PostgreSQL the reverse; MySQL's index names are the table's own.
func (o *Outbox) nameIndex(name Identifier) error {
	base := name[len(name)-1]
	if o.d == MySQL {
		base = "fencelock"
	}
	idx, err := quoteIdent(o.d, "outbox index", base+"_pending")
	if err != nil {
		return err
	}
	o.index = idx
	if o.d == SQLite && len(name) > 1 {
		schema, _ := quoteName(o.d, "outbox table", name[:len(name)-1])
		o.index = schema + "." + idx
		o.indexOn, _ = quoteIdent(o.d, "outbox table", base)
	}
	return nil
}

// check refuses a nil or zero Outbox, which would otherwise panic.
func (o *Outbox) check() error {
	if o == nil || o.f == nil {
		return fmt.Errorf("%w: a nil or zero Outbox; create one with NewOutbox", ErrInvalidArgument)
	}
	return nil
}

// CreateTable creates the outbox's table and its index of pending effects
// if they do not exist. ctx bounds the call.
func (o *Outbox) CreateTable(ctx context.Context) error {
	if err := o.check(); err != nil {
		return err
	}
	if err := checkCtx(ctx); err != nil {
		return err
	}
	for _, ddl := range o.ddl() {
		if _, err := o.db.ExecContext(ctx, ddl); err != nil {
			return fmt.Errorf("sqlfence: create outbox table %s: %w", o.label, o.d.classify(err))
		}
	}
	return nil
}

// ddl is CreateTable's statements, in o's dialect.
func (o *Outbox) ddl() []string {
	switch o.d {
	case MySQL:
		return []string{"CREATE TABLE IF NOT EXISTS " + o.name + " (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY," +
			" resource VARBINARY(767) NOT NULL, token BIGINT NOT NULL, seq BIGINT NOT NULL, hash BIGINT NOT NULL," +
			" destination VARBINARY(2048) NOT NULL, payload LONGBLOB NOT NULL," +
			" recorded_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), delivered_by BIGINT NULL," +
			" settled_at DATETIME(6) NULL, parked_reason TEXT NULL, attempts INT NOT NULL DEFAULT 0," +
			" UNIQUE KEY (resource, token, seq), KEY " + o.index + " (settled_at, id)) ENGINE=InnoDB"}
	case SQLite:
		return []string{"CREATE TABLE IF NOT EXISTS " + o.name + " (id INTEGER PRIMARY KEY AUTOINCREMENT," +
			" resource TEXT NOT NULL, token INTEGER NOT NULL, seq INTEGER NOT NULL, hash INTEGER NOT NULL," +
			" destination TEXT NOT NULL, payload BLOB NOT NULL," +
			" recorded_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')), delivered_by INTEGER," +
			" settled_at TEXT, parked_reason TEXT, attempts INTEGER NOT NULL DEFAULT 0, UNIQUE (resource, token, seq))",
			"CREATE INDEX IF NOT EXISTS " + o.index + " ON " + o.indexOn + " (id) WHERE settled_at IS NULL"}
	}
	return []string{"CREATE TABLE IF NOT EXISTS " + o.name + " (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY," +
		" resource TEXT NOT NULL, token BIGINT NOT NULL, seq BIGINT NOT NULL, hash BIGINT NOT NULL," +
		" destination TEXT NOT NULL, payload BYTEA NOT NULL, recorded_at TIMESTAMPTZ NOT NULL DEFAULT now()," +
		" delivered_by BIGINT, settled_at TIMESTAMPTZ, parked_reason TEXT, attempts INTEGER NOT NULL DEFAULT 0," +
		" UNIQUE (resource, token, seq))",
		"CREATE INDEX IF NOT EXISTS " + o.index + " ON " + o.indexOn + " (id) WHERE settled_at IS NULL"}
}

// now is the dialect's current time, as settled_at holds it.
func (d Dialect) now() string {
	switch d {
	case MySQL:
		return "CURRENT_TIMESTAMP(6)"
	case SQLite:
		return "strftime('%Y-%m-%d %H:%M:%f', 'now')"
	}
	return "now()"
}

// CreateOutboxSchema creates the [DefaultFenceTable] and the
// [DefaultOutboxTable] in dialect d if they do not exist. ctx bounds the
// call. Run it once, at deployment.
func CreateOutboxSchema(ctx context.Context, db OutboxDB, d Dialect) error {
	f, err := NewFences(d, Identifier{DefaultFenceTable})
	if err != nil {
		return err
	}
	o, err := NewOutbox(db, f)
	if err != nil {
		return err
	}
	if err := checkCtx(ctx); err != nil {
		return err
	}
	if err := f.CreateTable(ctx, db); err != nil {
		return err
	}
	return o.CreateTable(ctx)
}
