package postgres

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence/outbox"
)

// DefaultOutboxTable is the table an [Outbox] keeps its effects in unless
// [WithOutboxTable] names another.
const DefaultOutboxTable = "fencelock_outbox"

// MaxOutboxPayload is the largest [outbox.Effect] Payload an [Outbox]
// records, in bytes; a larger one is refused with [outbox.ErrTooLarge]
// before any I/O.
const MaxOutboxPayload = 1 << 20

// OutboxDB is what an [Outbox] needs from a pgx handle: statements, and
// transactions for [Outbox.Settle]. *pgxpool.Pool and *pgx.Conn implement
// it (so does a pgx.Tx, Settle then using a savepoint). [Outbox.Watch]
// needs a *pgxpool.Pool or a *pgx.Conn.
type OutboxDB interface {
	DB
	TxBeginner
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Outbox is a fenced outbox in a PostgreSQL table: the effects of a
// critical section ([outbox.Effect]) are recorded with [Outbox.Record] in
// the same transaction as the fenced state change they belong to
// ([RunInTx], [RunInTxAll], [RunInTxHeld]), so that they exist if and only
// if that transaction commits. A dispatcher (outbox.NewDispatcher) reads
// and settles them through the [outbox.Log] it implements, and the
// optional [outbox.Watcher], [outbox.Checker] and [outbox.Requeuer].
//
// One row per effect (see [Outbox.CreateTable]):
//
//	id bigserial PRIMARY KEY,           -- the order effects were recorded in
//	resource text, token bigint, seq bigint, UNIQUE (resource, token, seq),
//	hash bigint,                         -- outbox.Hash(resource), for partitions
//	destination text, payload bytea,
//	recorded_at timestamptz DEFAULT now(),
//	delivered_by bigint,                 -- the token of the dispatcher that settled it
//	settled_at timestamptz,              -- NULL while pending
//	parked_reason text,                  -- set when parked rather than delivered
//	attempts int
//
// The dispatcher's own fence is a row of the same fence table the writes
// use ([WithOutboxFences], default the [DefaultFenceTable]).
//
// Create one with [NewOutbox]; the zero Outbox is not usable (its methods
// fail with [ErrInvalidArgument]). An Outbox is safe for concurrent use
// when its handle is (a *pgxpool.Pool is; a *pgx.Conn is not).
type Outbox struct {
	db      OutboxDB
	fences  *Fences
	label   string // the table's name, unquoted, for errors
	channel string // the NOTIFY channel
	sql     outboxSQL
}

var (
	_ outbox.Log      = (*Outbox)(nil)
	_ outbox.Watcher  = (*Outbox)(nil)
	_ outbox.Checker  = (*Outbox)(nil)
	_ outbox.Requeuer = (*Outbox)(nil)
)

// OutboxOption configures [NewOutbox]. Create one with [WithOutboxTable],
// [WithOutboxFences] or [WithOutboxChannel]; the interface is sealed.
type OutboxOption interface{ applyOutbox(*outboxOptions) }

type outboxOptions struct {
	table   pgx.Identifier
	fences  *Fences
	channel *string
}

type outboxOptionFunc func(*outboxOptions)

func (f outboxOptionFunc) applyOutbox(o *outboxOptions) { f(o) }

// WithOutboxTable names the table the effects are kept in,
// schema-qualified or not. Default [DefaultOutboxTable]. An unusable name
// makes [NewOutbox] fail with [ErrInvalidIdentifier].
func WithOutboxTable(name pgx.Identifier) OutboxOption {
	return outboxOptionFunc(func(o *outboxOptions) { o.table = name })
}

// WithOutboxFences sets the fence table whose claims [Outbox.Record]
// checks and on which [Outbox.Settle] fences the dispatcher: the one the
// fenced writes use. Default: the [DefaultFenceTable] ([RunInTx]'s). A nil
// or zero Fences makes [NewOutbox] fail.
func WithOutboxFences(f *Fences) OutboxOption {
	return outboxOptionFunc(func(o *outboxOptions) { o.fences = f })
}

// WithOutboxChannel sets the channel [Outbox.Record] notifies (pg_notify)
// and [Outbox.Watch] listens on. Default: the last part of the table's
// name. Empty, or longer than 63 bytes, makes [NewOutbox] fail.
func WithOutboxChannel(name string) OutboxOption {
	return outboxOptionFunc(func(o *outboxOptions) { o.channel = &name })
}

// NewOutbox returns the [Outbox] in the table of [WithOutboxTable] (create
// it with [Outbox.CreateTable]), read and written through db. It fails,
// before any I/O, on a nil db or option ([ErrInvalidArgument]), an
// unusable table or channel name ([ErrInvalidIdentifier]) or a nil Fences
// ([ErrInvalidOption]).
func NewOutbox(db OutboxDB, opts ...OutboxOption) (*Outbox, error) {
	if err := checkDB(db); err != nil {
		return nil, err
	}
	o := outboxOptions{table: pgx.Identifier{DefaultOutboxTable}}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: nil OutboxOption", ErrInvalidOption)
		}
		opt.applyOutbox(&o)
	}
	q, err := quoteName("outbox table", o.table)
	if err != nil {
		return nil, err
	}
	if o.fences == nil {
		o.fences = defaultFences()
	} else if err := o.fences.check(); err != nil {
		return nil, fmt.Errorf("%w: WithOutboxFences: %w", ErrInvalidOption, err)
	}
	channel := o.table[len(o.table)-1]
	if o.channel != nil {
		channel = *o.channel
	}
	if err := checkIdent("outbox channel", channel); err != nil {
		return nil, err
	}
	return &Outbox{db: db, fences: o.fences, label: strings.Join(o.table, "."), channel: channel,
		sql: newOutboxSQL(q, o.table[len(o.table)-1], o.fences.quoted)}, nil
}

// CreateTable creates the outbox table, and its index of pending effects,
// if they do not exist, and the fence table too ([Fences.CreateTable]).
// ctx bounds the call. Run it once, at deployment: concurrent CREATE TABLE
// IF NOT EXISTS can fail in PostgreSQL.
func (o *Outbox) CreateTable(ctx context.Context) error {
	if err := cmp.Or(o.check(), checkCtx(ctx)); err != nil {
		return err
	}
	if err := o.fences.CreateTable(ctx, o.db); err != nil {
		return err
	}
	for _, stmt := range []string{o.sql.create, o.sql.createIndex} {
		if _, err := o.db.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("postgres: create outbox table %s: %w", o.label, classify(err))
		}
	}
	return nil
}

// check refuses a nil or zero Outbox, which would otherwise panic.
func (o *Outbox) check() error {
	if o == nil || o.db == nil {
		return fmt.Errorf("%w: a nil or zero Outbox; create one with NewOutbox", ErrInvalidArgument)
	}
	return nil
}
