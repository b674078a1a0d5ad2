package sqlfence

import (
	"database/sql"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencelock/fencelock/internal/nilcheck"
)

// Option configures a [Table], [Fences] or [Store]. Create one with
// [WithRetries], [WithoutPrepare], [WithMeterProvider] or
// [WithTracerProvider]; the interface is sealed. The constructor checks every
// option and fails, with an error matching [ErrInvalidOption], on the
// first invalid one.
type Option interface {
	TableOption
	apply(*options)
}

// TableOption configures a [Table]: [WithKeyColumn], [WithFenceColumn],
// or any [Option].
type TableOption interface{ applyTable(*tableOptions) }

// TxOption configures one fenced transaction ([Fences.RunInTx]). Create
// one with [WithTxOptions], [WithPreemptAfter] or [WithoutPreemption].
type TxOption interface{ applyTx(*txConfig) }

// txConfig is one fenced transaction's configuration.
type txConfig struct {
	sql sql.TxOptions
	// preemptAfter is how long a fence's statement waits before older
	// tokens' transactions that block it are ended; 0 never.
	preemptAfter time.Duration
	invalid      error // an option's invalid value
}

type options struct {
	retries     int
	noPrepare   bool
	meters      metric.MeterProvider // nil: the global one
	tracers     trace.TracerProvider // nil: the global one
	nilProvider bool                 // a provider option was given nil
}

type tableOptions struct {
	key, fence string
	options
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options)           { f(o) }
func (f optionFunc) applyTable(o *tableOptions) { f(&o.options) }

type tableOptionFunc func(*tableOptions)

func (f tableOptionFunc) applyTable(o *tableOptions) { f(o) }

type txOptionFunc func(*txConfig)

func (f txOptionFunc) applyTx(o *txConfig) { f(o) }

// defaultRetries is how often a write the server rolled back for a
// deadlock or a busy lock is tried again.
const defaultRetries = 20

// WithRetries sets how many times a write that the server rolled back
// without writing anything ([ErrRetryable]: a deadlock, SQLITE_BUSY) is
// tried again, after a short pause that grows, when that is safe: a
// single-statement write outside the caller's transaction, or a fenced
// transaction before its function ran. Default 20; 0 tries once and
// returns the error. Negative makes the constructor fail.
func WithRetries(n int) Option { return optionFunc(func(o *options) { o.retries = n }) }

// WithKeyColumn names the column that identifies a row of a [Table]. It
// must be unique by itself (the primary key, or a unique index on it
// alone). Default "key".
func WithKeyColumn(name string) TableOption {
	return tableOptionFunc(func(o *tableOptions) { o.key = name })
}

// WithFenceColumn names the BIGINT column of a [Table] that holds the
// highest token written to each row; declare it NOT NULL DEFAULT 0.
// Default "fence". The key column's name makes [NewTable] fail.
func WithFenceColumn(name string) TableOption {
	return tableOptionFunc(func(o *tableOptions) { o.fence = name })
}

// WithTxOptions sets the options a fenced transaction begins with, as
// database/sql's BeginTx takes them. Default: the server's defaults
// (REPEATABLE READ in MySQL and MariaDB, READ COMMITTED in PostgreSQL,
// SERIALIZABLE in SQLite). ReadOnly is refused: a fenced transaction
// writes its fence first.
func WithTxOptions(opts sql.TxOptions) TxOption {
	return txOptionFunc(func(o *txConfig) { o.sql = opts })
}

// WithPreemptAfter sets how long a fenced transaction's statement raising a
// fence waits on another transaction before it looks at what blocks it,
// and ends the connection of a blocker that raised the same fence to an
// older token (MySQL and MariaDB: see "A frozen holder" in the package
// doc). It is looked at again every 250 ms until the statement returns.
// Default 100 ms. d must be positive.
func WithPreemptAfter(d time.Duration) TxOption {
	return txOptionFunc(func(o *txConfig) {
		o.preemptAfter = d
		if d <= 0 {
			o.invalid = fmt.Errorf("%w: WithPreemptAfter(%v): want > 0 (WithoutPreemption turns preemption off)", ErrInvalidOption, d)
		}
	})
}

// WithoutPreemption makes a fenced transaction wait for whatever blocks its
// fences for as long as ctx allows (and the server's lock wait timeout,
// after which the transaction is tried again), ending nothing: the
// behaviour before preemption. A holder frozen with its transaction open
// then stalls the next one for as long as it stays frozen. Default:
// preemption on ([WithPreemptAfter]).
func WithoutPreemption() TxOption {
	return txOptionFunc(func(o *txConfig) { o.preemptAfter = 0 })
}

// WithoutPrepare makes a [Table], [Fences] or [Store] send each fenced
// statement unprepared, as database/sql's ExecContext does, rather than
// keeping it prepared per connection. By default the statements are kept
// prepared in SQLite and MySQL/MariaDB (never in PostgreSQL, where pgx
// keeps its own statement cache, under the exec mode the application
// chose): in SQLite that saves parsing each one again, and with the MySQL
// driver's defaults, which prepare and close every statement with
// arguments on the server, a round trip per write. Use it when no
// server-side prepared statements may be used at all: behind a proxy that
// does not support them, or where the DSN sets interpolateParams for that
// reason (interpolateParams alone affects only statements sent
// unprepared, so this package's would stay prepared).
func WithoutPrepare() Option { return optionFunc(func(o *options) { o.noPrepare = true }) }

// WithMeterProvider sets the OpenTelemetry meter provider for the metrics
// of the writes of a [Table], [Fences] or [Store]: fencelock.writes and
// fencelock.write.duration (attributes fencelock.adapter "sql",
// fencelock.operation update, upsert, tx, exec, put or delete,
// fencelock.outcome accepted, stale, unknown or error), as fence/postgres
// and fence/s3 report theirs, and fencelock.sql.retryable_errors: each
// fenced statement or fenced transaction's COMMIT the server rolled back
// and asked to retry ([ErrRetryable]), whether or not it was retried, in
// the caller's transaction too (the statements of RunInTx's function are
// the caller's own, not counted). A write refused for its arguments, before any I/O, is not
// counted. Default: the global provider (otel.GetMeterProvider), which
// records nothing until the application installs an SDK. nil (a typed nil
// too) makes the constructor fail, and so does a provider that fails to
// create an instrument.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(o *options) { o.meters, o.nilProvider = mp, o.nilProvider || nilcheck.IsNil(mp) })
}

// WithTracerProvider sets the OpenTelemetry tracer provider for the span of
// each fenced write of a [Table], [Fences] or [Store] (sql.update,
// sql.upsert, sql.tx, sql.exec, sql.put, sql.delete: children of the
// caller's context, with the token and the resource as attributes).
// Default: the global provider. nil (a typed nil too) makes the
// constructor fail.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(o *options) { o.tracers, o.nilProvider = tp, o.nilProvider || nilcheck.IsNil(tp) })
}

func (o options) check() error {
	if o.nilProvider {
		return fmt.Errorf("%w: nil meter or tracer provider", ErrInvalidOption)
	}
	if o.retries < 0 {
		return fmt.Errorf("%w: WithRetries(%d): want 0 or more", ErrInvalidOption, o.retries)
	}
	return nil
}

func newOptions(opts []Option) (options, error) {
	o := options{retries: defaultRetries}
	for _, opt := range opts {
		if opt == nil {
			return o, fmt.Errorf("%w: nil Option", ErrInvalidOption)
		}
		opt.apply(&o)
	}
	return o, o.check()
}

func newTableOptions(d Dialect, opts []TableOption) (tableOptions, error) {
	o := tableOptions{key: "key", fence: "fence", options: options{retries: defaultRetries}}
	for _, opt := range opts {
		if opt == nil {
			return o, fmt.Errorf("%w: nil TableOption", ErrInvalidOption)
		}
		opt.applyTable(&o)
	}
	if err := checkIdent(d, "key column", o.key); err != nil {
		return o, fmt.Errorf("%w: WithKeyColumn: %w", ErrInvalidOption, err)
	}
	if err := checkIdent(d, "fence column", o.fence); err != nil {
		return o, fmt.Errorf("%w: WithFenceColumn: %w", ErrInvalidOption, err)
	}
	if o.key == o.fence {
		return o, fmt.Errorf("%w: key and fence column are both %q", ErrInvalidOption, o.key)
	}
	return o, o.check()
}

func newTxOptions(opts []TxOption) (*txConfig, error) {
	o := txConfig{preemptAfter: defaultPreemptAfter}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: nil TxOption", ErrInvalidOption)
		}
		opt.applyTx(&o)
		if o.invalid != nil {
			return nil, o.invalid
		}
	}
	if o.sql.ReadOnly {
		return nil, fmt.Errorf("%w: read-only transaction: a fenced transaction writes its fence", ErrInvalidOption)
	}
	return &o, nil
}
