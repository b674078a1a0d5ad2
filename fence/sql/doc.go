// Package sqlfence makes writes through database/sql fenced: a write
// carrying an older [fence.Token] than one the database has already
// accepted is refused by the database itself, atomically, however late it
// arrives. It is fence/postgres for any *sql.DB, in three dialects:
// [MySQL] (MySQL and MariaDB), [SQLite] and [PostgreSQL] (through a
// database/sql driver such as pgx's stdlib).
//
// It offers the forms fence/postgres has, all working with a *sql.DB, a
// *sql.Conn or (for the row writes) a *sql.Tx ([DB], [TxBeginner]):
//
//   - [Table.Update] and [Table.Upsert] write one row of your own table
//     that has a fence column, in one statement:
//     UPDATE t SET ..., fence = ? WHERE key = ? AND fence <= ?; [Set]
//     assigns a value, [Add] adds to the column (balance = balance + ?).
//     [Table.GetForUpdate] reads the row before a write, raising its
//     fence as it reads.
//   - [Fences.RunInTx] runs a function in a transaction that first raises
//     the resource's row in a fence table; a stale transaction is rolled
//     back before the function runs. [Fences.RunInTxAll] (and
//     [Fences.RunInTxHeld], for an etcdlock *MultiLock) does it for
//     several resources, each with its token. [Fences.Exec] is RunInTx
//     for one statement.
//
// [Store] implements [fence.Store] and [fence.Updater] on a table of its
// own.
//
//	accounts, err := sqlfence.NewTable(sqlfence.MySQL, sqlfence.Identifier{"accounts"}, sqlfence.WithKeyColumn("id"))
//	...
//	err = accounts.Update(ctx, db, "acct-7", lock.Token(), sqlfence.Set("balance", 120))
//	switch {
//	case errors.Is(err, fence.ErrStale):
//		// A newer holder wrote first; nothing changed.
//	case errors.Is(err, sqlfence.ErrRowNotFound):
//		// No such account.
//	case errors.Is(err, fence.ErrUnknownOutcome):
//		// Read back before deciding.
//	}
//
// # Where the servers differ
//
// Each difference below has a test against the real server that fails
// without the handling described.
//
//   - MySQL's affected-rows count is rows changed, not rows matched,
//     unless the client sets clientFoundRows: a refused update and a
//     rewrite of identical values with the same token both count 0, and
//     INSERT ... ON DUPLICATE KEY UPDATE counts 1 for an insert, 2 for an
//     update and 0 (or 1 with clientFoundRows) for a row left as it was.
//     A [Table] write that does not count as landed is read back (is the
//     row at this token, with these values?) before it is called refused;
//     the [Store] and the fence table, which have no AUTO_INCREMENT
//     column, have a refusal report the row's fence as the statement's
//     insert id (LAST_INSERT_ID(fence)) and need no read back. Either way
//     it works whichever the DSN says.
//   - MySQL's default isolation is REPEATABLE READ: a plain SELECT in the
//     caller's transaction reads the snapshot of its first read, while
//     UPDATE reads the newest row. The read back is a locking read (FOR
//     UPDATE), which sees a newer holder's committed fence; a plain one
//     could show the old row and call a refused write accepted.
//   - MySQL's upserts take gap and next-key locks on a key not yet there;
//     upserts waiting on a row whose insert is rolled back deadlock, and
//     the server rolls one back (error 1213). SQLite has one writer: a
//     writer that finds the lock taken gets SQLITE_BUSY at once unless the
//     connection has a busy_timeout. Both leave nothing written, so a
//     single-statement write outside the caller's transaction, and a
//     fenced transaction before its function runs, are tried again
//     ([WithRetries]); elsewhere the error matches [ErrRetryable].
//   - SQLite's upsert (ON CONFLICT DO UPDATE) needs 3.24.0, and the
//     fenced reads ([Table.GetForUpdate], [Store.GetForUpdate],
//     [Store.Update]) need RETURNING (3.35.0); writes need no RETURNING.
//     On an older SQLite they fail with [ErrUnsupported], naming the
//     version.
//   - MySQL and MariaDB have no UPDATE ... RETURNING: a first claim by a
//     fenced read there is the fence's UPDATE, then a locking SELECT ...
//     FOR UPDATE (two round trips, after the read that found the fence
//     below the token). And a trigger on the table that inserts resets what
//     LAST_INSERT_ID reports for the statement, so [Table] statements do
//     not rely on it; only the package's own tables (the [Store]'s, the
//     fence table) do.
//   - SQLite reads a double-quoted name that names no column as a string
//     literal: the columns a fenced read returns are qualified with the
//     table's name, so that an unknown one is [ErrSchema] rather than its
//     own name read back as the value.
//   - MySQL's default collations compare case-insensitively and ignore
//     trailing spaces; the key columns this package creates (the
//     [Store]'s, the fence table's) are VARBINARY, so "a", "A" and "a "
//     are three keys with three floors. A [Table]'s key column is yours:
//     its collation decides which keys are one row.
//   - In MySQL, ON DUPLICATE KEY UPDATE fires on any unique index: a
//     [Table] written with Upsert must have no other unique index a new
//     row could collide on, or the upsert may update that other row.
//
// # Reading before you write
//
// Fencing the writes alone does not keep an update computed from a read.
// A newer holder that reads a row while an older holder's write to it is
// still to land (the older one paused, or its transaction not yet
// committed) and then writes what it computed, writes over the older
// write, which passed its fence since nothing newer had been written yet:
// an acknowledged update is lost, and neither side sees an error. So the
// first touch claims the resource: read with your token, and the read
// raises the floor, so that no write below your token lands after it.
//
//   - [Table.GetForUpdate] reads columns of a row of your table and
//     raises its fence column in the same step (UPDATE ... RETURNING;
//     in MySQL, the UPDATE and then SELECT ... FOR UPDATE). In your
//     transaction the row then stays locked until the end; a read that
//     finds an older holder's uncommitted write waits for its commit and
//     reads what it wrote. A row the holder claimed already (its fence
//     is the token) costs a read, with no write: outside a transaction
//     everywhere, and in a MySQL one (SELECT ... FOR UPDATE).
//   - [Add] needs no read at all: balance = balance + ?.
//   - [Fences.RunInTxAll] raises every resource's fence before your
//     function runs, in name order, so that transfers in opposite
//     directions queue instead of deadlocking; what the function then
//     reads of rows that only such transactions write is fenced too.
//   - [Store.GetForUpdate] and [Store.Update] are the [fence.Updater] of
//     the Store: a read that claims, and a read-modify-write.
//
// A transfer between two accounts of your table, each with its own lock
// (read the rows in key order, as RunInTxAll does, or two transfers in
// opposite directions may deadlock on the row locks):
//
//	tx, err := db.BeginTx(ctx, nil)
//	if err != nil {
//		return err
//	}
//	defer tx.Rollback()
//	var a, b int64
//	if err := accounts.GetForUpdate(ctx, tx, "acct-A", tokA, []string{"balance"}, &a); err != nil {
//		return err // fence.ErrStale: a newer holder has claimed A
//	}
//	if err := accounts.GetForUpdate(ctx, tx, "acct-B", tokB, []string{"balance"}, &b); err != nil {
//		return err
//	}
//	if err := accounts.Update(ctx, tx, "acct-A", tokA, sqlfence.Set("balance", a-100)); err != nil {
//		return err
//	}
//	if err := accounts.Update(ctx, tx, "acct-B", tokB, sqlfence.Set("balance", b+100)); err != nil {
//		return err
//	}
//	return tx.Commit()
//
// The same with the fence table, every writer of the accounts going
// through it, and a counter in the Store:
//
//	err := fences.RunInTxHeld(ctx, db, multiLock, func(tx *sql.Tx) error {
//		// UPDATE accounts SET balance = balance - 100 WHERE id = 'acct-A'; ...
//	})
//	err = store.Update(ctx, "hits", token, func(old fence.Record) ([]byte, error) {
//		n, _ := strconv.Atoi(string(old.Value)) // no value: 0
//		return strconv.AppendInt(nil, int64(n+1), 10), nil
//	})
//
// A plain SELECT, or [Store.Get], claims nothing: use it only for what no
// write of yours will follow.
//
// # A frozen holder
//
// A holder that freezes inside a fenced transaction (a GC pause, a stopped
// process, a suspended VM whose TCP connection stays up) keeps that
// transaction open, and with it its fences' rows. Its lease ends and the
// next holder gets the lock, but the next holder's statement raising the
// same fence waits on the row for as long as the freeze lasts (in MySQL
// and MariaDB up to innodb_lock_wait_timeout, 50 s by default, and then
// again, as the transaction is tried again).
//
// On MySQL and MariaDB, a statement of [Fences.RunInTx], [Fences.RunInTxAll]
// or [Fences.RunInTxHeld] raising a fence that has waited 100 ms
// ([WithPreemptAfter]) looks, on another connection of the pool, at the
// transaction holding the fence's row (information_schema.INNODB_LOCK_WAITS),
// reads the row as that transaction left it (READ UNCOMMITTED) and as
// committed, and when that transaction raised the fence to a token older
// than the waiter's, ends its connection (KILL CONNECTION): it is rolled
// back, and the statement goes on. The older holder, once it runs again,
// gets an error matching [ErrTerminated] from its next statement, and
// nothing of its transaction is written. A transaction that holds the row
// without having raised it (not a fenced one), one of the same token (the
// same holder's own) and one of a newer token are left alone: the waiter
// waits for as long as ctx allows, and its error names the connection it
// waited for. A live holder is never ended for idling: only a newer
// token's statement that it blocks ends it.
//
// The user needs PROCESS (to read the lock waits) and, if holders connect
// as several users, CONNECTION ADMIN (SUPER before MariaDB 10.5) to end
// another user's connection. db must be a *sql.DB with a connection to
// spare (not a pool of one, whose connection the transaction holds): on a
// *sql.Conn, or a pool at its limit, there is no other connection to look
// from, and the statement waits as before.
// [WithoutPreemption] turns the look off.
//
// On PostgreSQL the same holds, with the tokens read from the blocker's
// tag (its session's application_name, "fencelock:t=MIN-MAX;HASH:TOKEN;…", set for the
// transaction by each statement raising a fence) and the session ended
// with pg_terminate_backend (the role needs to be the blocker's, or
// pg_signal_backend). database/sql does not tell the waiter's process id,
// so the holder is found by the fence row's xmax: a transaction holding a
// row that existed before it, not one that inserted a resource's first
// row (fence/postgres finds that one too).
//
// [Fences.Advance] on a *sql.DB is watched the same way; in your own
// transaction it is not (there is no pool to look from).
//
// Limits on MariaDB: a refused attempt (an older token) holds the fence's
// row until its rollback without having raised it, and is not told from
// an unfenced transaction: a newer holder waits for it as long as it is
// frozen before that rollback. A resource's first claim, under REPEATABLE
// READ, takes a gap lock that InnoDB reports on the next row, so another
// resource's first claim that waits on that gap is not matched. KILL has
// no condition: between the check that the connection still runs the
// blocking transaction and the KILL, the blocker may commit and its
// connection start another holder's transaction, which the KILL then ends
// (that holder gets [ErrTerminated]; nothing stale lands).
//
// Not covered yet: MySQL 8, which moved the lock waits to
// performance_schema.data_lock_waits (the waiter's error says so);
// [Table] claims in a transaction of your own. SQLite has one
// writer at a time, and no other process can take the database's lock from
// a process that holds it: a frozen writer blocks every writer until it
// runs again or its process ends.
//
// # Errors
//
// A refused write returns an error matching [fence.ErrStale]; errors.As
// finds a [*fence.StaleError] with the current token. A write whose
// outcome cannot be known (the connection broke or the context ended
// after the statement or COMMIT was sent) matches
// [fence.ErrUnknownOutcome]. A statement run through the caller's own
// *sql.Tx lands only if that transaction commits, and after such a
// failure it cannot (database/sql rolls back a transaction whose context
// ended; a broken connection cannot commit): that failure is a definite
// one. Deadlocks, serialization failures and busy locks match
// [ErrRetryable]; missing tables and columns [ErrSchema]; a statement
// refused by a server of another dialect than the one given (a MySQL Table
// on SQLite) [ErrDialect], naming both, and nothing was written. The driver's
// error stays reachable with errors.As (*mysql.MySQLError,
// *sqlite.Error, *pgconn.PgError). Bad input (a nil context or handle, a
// typed nil *sql.DB too, an empty key, a token <= 0, an unusable name, an
// unknown [Dialect]) gives an error matching [ErrInvalidArgument] (and
// fence.ErrInvalidArgument) before any I/O, never a panic; so does a value
// or key the driver cannot convert (a struct, a channel), which fails
// before the statement runs.
//
// # Schema
//
// [CreateSchema] creates the package's own tables; in MySQL:
//
//	CREATE TABLE IF NOT EXISTS fencelock_fences (
//		resource VARBINARY(767) NOT NULL PRIMARY KEY,
//		token    BIGINT NOT NULL CHECK (token > 0)) ENGINE=InnoDB;
//	CREATE TABLE IF NOT EXISTS fencelock_store (
//		`key`    VARBINARY(767) NOT NULL PRIMARY KEY,
//		token    BIGINT NOT NULL CHECK (token > 0),
//		value    LONGBLOB) ENGINE=InnoDB; -- NULL: a tombstone (Store.Delete)
//
// and in SQLite and PostgreSQL the same with TEXT keys and a BLOB (BYTEA)
// value. A table written through [Table] needs a unique key column and a
// fence column that starts below every token:
//
//	ALTER TABLE accounts ADD COLUMN fence BIGINT NOT NULL DEFAULT 0;
//
// Table and column names are quoted for the dialect (backticks in MySQL,
// double quotes in SQLite and PostgreSQL, the quote character doubled
// inside); values are always sent as parameters.
//
// # One floor per resource
//
// Each form keeps its own floor: a [Table] row's fence column, or a fence
// table row per resource name for [Fences.RunInTx], [Fences.Exec] and
// [Fences.Advance]. They do not know of each other: if a newer holder
// changes a Table's row with SQL inside RunInTx, the row's fence column
// stays where it was and an older holder's [Table.Update] still lands. So
// a row written through a Table must be written only through it (inside
// RunInTx too: pass the *sql.Tx to Table.Update with the same token).
// Rows of other tables have the floor of the resource name their
// transactions use: use one name per resource. A DELETE of a fenced row
// removes its floor with it; delete softly, as [Store.Delete]'s tombstone
// does.
//
// # What a refused write leaves
//
// A refused write changes no row, but not nothing. In MySQL a refused
// [Table.Upsert] fires the table's BEFORE INSERT, BEFORE UPDATE and AFTER
// UPDATE row triggers and takes an AUTO_INCREMENT value; a refused
// [Table.Update] fires none. In SQLite neither fires a trigger or takes an
// id. PostgreSQL's statement triggers fire for every statement, and a
// sequence's nextval() is never given back. [Fences.RunInTx] refuses on
// the fence table, before any statement of yours. docs/sql.md in the
// repository has the table for every store, binary logs included.
//
// # SQLite driver
//
// The tests use modernc.org/sqlite: SQLite translated to Go, so it needs
// no cgo and no C toolchain, cross-compiles, and links into static
// CGO_ENABLED=0 binaries (the edge and single-node tools SQLite serves).
// mattn/go-sqlite3 needs cgo; ncruces/go-sqlite3 is cgo-free too, but runs
// SQLite as WebAssembly in an embedded runtime. This package imports no
// SQLite driver: it reads SQLite's result codes through the error's
// Code() method, so any driver that has one fits. Open the database in
// WAL mode with a busy_timeout (and _txlock=immediate for your own
// transactions) so that plain writes wait for the lock as fenced ones do.
//
// # Prepared statements
//
// In SQLite and MySQL/MariaDB, a [Table] or [Fences] keeps each fenced
// statement prepared, per pool and connection, rather than sending it
// for parsing on every write: in SQLite that saves the parse, and with the
// MySQL driver's defaults (which prepare and close every statement with
// arguments on the server) a round trip per write. The statement and its
// arguments are the same either way. A write inside your own *sql.Tx is
// sent unprepared (the package does not know its pool); [Fences.RunInTx]
// prepares its fence's statement before the transaction begins, since
// nothing may be prepared while a transaction holds a connection of the
// pool (in a pool of one it would wait forever). PostgreSQL
// statements are sent as database/sql sends them (pgx keeps its own cache).
// A statement the server refuses to prepare (MySQL's
// max_prepared_stmt_count reached) is sent unprepared, as it would be
// without the cache; a pool that was closed has its statements dropped.
// [WithoutPrepare] turns this off, e.g. behind a proxy without
// server-side prepared statements.
//
// # Telemetry
//
// Every fenced write is a span (sql.update, sql.upsert, sql.tx, sql.exec,
// sql.put, sql.delete) and is counted in fencelock.writes and
// fencelock.write.duration with fencelock.adapter "sql", as fence/postgres
// and fence/s3 count theirs; rollbacks the server asked to retry are
// counted in fencelock.sql.retryable_errors. They go to OpenTelemetry's
// global providers unless [WithMeterProvider] and [WithTracerProvider]
// name others; until an SDK is installed they cost about a microsecond
// per write. [Fences.RunInTxAll] is an sql.tx span too. The fenced reads
// ([Table.GetForUpdate], [Store.GetForUpdate]) and [Store.Update] have
// no span or count of their own; their rollbacks the server asked to retry
// are counted with the others.
//
// Outside the standard library and package fence, this package imports
// go-sql-driver/mysql, for its error type, and the OpenTelemetry API.
package sqlfence
