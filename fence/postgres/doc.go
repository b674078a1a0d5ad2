// Package postgres makes writes to PostgreSQL fenced: a write carrying an
// older [fence.Token] than one the database has already accepted is refused
// by PostgreSQL itself, atomically, however late it arrives.
//
// It offers four forms, all working with a *pgxpool.Pool, a *pgx.Conn or a
// pgx.Tx ([DB], [TxBeginner]):
//
//   - [Table.Update] and [Table.Upsert] write one row of your own table that
//     has a fence column, in one statement:
//     UPDATE t SET ..., fence = $token WHERE key = $k AND fence <= $token.
//   - [RunInTx] runs a function in a transaction that first raises the
//     resource's row in a fence table; a stale transaction is rolled back
//     before the function runs.
//   - [Exec] runs one INSERT, UPDATE or DELETE guarded by the fence table in
//     the same statement, saving the round trips of a transaction.
//   - [RunInTxAll] (and [RunInTxHeld], for a holder of several locks) is
//     RunInTx over several resources, each with its own token, as a
//     transfer between two accounts needs.
//
// Reads are fenced too: [Table.GetForUpdate] claims a row as it reads it
// (see "Reading before you write"), and [Add] changes a column in the
// server with no read at all. [Store] implements [fence.Store] and
// [fence.Updater] on a table of its own.
//
// Statements you write yourself, through sqlc or by hand, with the fence
// predicate in their own SQL, get this package's outcome rule from
// [WriteError]: a lost answer is [fence.ErrUnknownOutcome]
// (docs/sqlc.md has the pattern).
//
// [Outbox] records a critical section's side effects ([outbox.Effect]) in
// the fenced transaction itself ([Outbox.Record]), so that they exist if
// and only if its write lands, and is the [outbox.Log] a dispatcher
// delivers them from.
//
//	accounts, err := postgres.NewTable(pgx.Identifier{"accounts"}, postgres.WithKeyColumn("id"))
//	...
//	err = accounts.Update(ctx, pool, "acct-7", lock.Token(), postgres.Set("balance", 120))
//	switch {
//	case errors.Is(err, fence.ErrStale):
//		// A newer holder wrote first; nothing changed.
//	case errors.Is(err, postgres.ErrRowNotFound):
//		// No such account.
//	case errors.Is(err, fence.ErrUnknownOutcome):
//		// Read back before deciding.
//	}
//
//	err = postgres.RunInTx(ctx, pool, "invoice-42", lock.Token(), func(tx pgx.Tx) error {
//		_, err := tx.Exec(ctx, "UPDATE invoices SET paid = true WHERE id = $1", 42)
//		return err
//	}, postgres.WithIsolation(pgx.Serializable))
//
// # Reading before you write
//
// Fencing writes is not enough when what you write is computed from what
// you read. A newer holder that reads a row with a plain SELECT while an
// older holder's write is still to land (the older holder paused in its
// transaction, the row written and locked but not committed) reads the
// value from before that write; the older holder then commits,
// legitimately, since nothing newer has been written yet; and the newer
// holder writes back what it computed, over it. Both commit, and the older
// holder's acknowledged write is gone.
//
// So the first touch, read or write, claims the row: read it with
// [Table.GetForUpdate], in the transaction that writes. It raises the row's
// fence to your token as it reads (UPDATE ... SET fence = $token WHERE key
// = $key AND fence <= $token RETURNING ...): it waits for an older holder's
// uncommitted write and reads what that holder committed, refuses with
// [fence.ErrStale] when a newer holder is there, and keeps the row locked
// until your transaction ends. Outside a transaction, a row you claimed
// already (its fence is your token) costs a plain SELECT, with no write;
// the first claim there is that SELECT and the UPDATE. Where no read is
// needed, [Add] changes a column in the server (balance = balance + $1).
//
// A transfer between two accounts, each under its own lock (for an
// etcdlock MultiLock over both, pass it to [RunInTxHeld] instead of the
// claims):
//
//	from := fence.Claim{Resource: "acct-A", Token: lockA.Token()}
//	to := fence.Claim{Resource: "acct-B", Token: lockB.Token()}
//	err := postgres.RunInTxAll(ctx, pool, []fence.Claim{from, to}, func(tx pgx.Tx) error {
//		var balance int64
//		err := accounts.GetForUpdate(ctx, tx, from.Resource, from.Token, []string{"balance"}, &balance)
//		if err != nil {
//			return err // fence.ErrStale: a newer holder has the account
//		}
//		if balance < amount {
//			return errInsufficientFunds
//		}
//		if err := accounts.Update(ctx, tx, from.Resource, from.Token, postgres.Add("balance", -amount)); err != nil {
//			return err
//		}
//		return accounts.Update(ctx, tx, to.Resource, to.Token, postgres.Add("balance", amount))
//	})
//
// RunInTxAll raises both accounts' rows in the fence table before fn runs,
// in one fixed order, so that two transfers in opposite directions wait
// for each other instead of deadlocking, and fenced transactions on either
// account wait for this one. Each account's row is read and written with
// that account's token, so its fence column, the row's own floor, agrees
// with the fence table's.
//
// For the [Store], [Store.GetForUpdate] is the read that claims the key,
// and [Store.Update] the read-modify-write in one call:
//
//	err := store.Update(ctx, "visits", lock.Token(), func(old fence.Record) ([]byte, error) {
//		var n int64 // 0 while the key holds no value (old.Value nil)
//		if old.Value != nil {
//			var err error
//			if n, err = strconv.ParseInt(string(old.Value), 10, 64); err != nil {
//				return nil, err
//			}
//		}
//		return strconv.AppendInt(nil, n+1, 10), nil
//	})
//
// [Store.Get] and a plain SELECT claim nothing: use them for what no write
// of yours will follow.
//
// # Errors
//
// A refused write returns an error matching [fence.ErrStale]; errors.As
// finds a [*fence.StaleError] with the current token when it could be read.
// A write whose outcome cannot be known (the connection broke or the
// context ended after the statement or COMMIT was sent) matches
// [fence.ErrUnknownOutcome]. A statement sent through the caller's own
// pgx.Tx is the exception: it lands only if that transaction commits, and
// a transaction whose connection broke never can, so that failure is a
// definite one. Serialization failures and deadlocks match
// [ErrRetryable], and are never reported as success or as stale. Server
// errors stay reachable with errors.As(err, &pgErr) for a *pgconn.PgError.
// A nil context, handle or function (a typed nil such as a nil
// *pgxpool.Pool too) gives an error matching [ErrInvalidArgument], never a
// panic, before any I/O; so does other bad input (empty key, token <= 0,
// empty or over-long names, an ended context), with its own sentinel.
//
// # Schema
//
// [CreateSchema] creates the package's own tables; so does this SQL:
//
//	CREATE TABLE IF NOT EXISTS fencelock_fences (
//		resource text   PRIMARY KEY,
//		token    bigint NOT NULL CHECK (token > 0)
//	);
//	CREATE TABLE IF NOT EXISTS fencelock_store (
//		key   text   PRIMARY KEY,
//		token bigint NOT NULL CHECK (token > 0),
//		value bytea  -- NULL: a tombstone (Store.Delete)
//	);
//
// A table written through [Table] needs a unique key column and a fence
// column that starts below every token:
//
//	ALTER TABLE accounts ADD COLUMN fence bigint NOT NULL DEFAULT 0;
//
// Table and column names are quoted with pgx.Identifier; values are always
// sent as parameters.
//
// A Store's table may also record the issuer of each key's tokens
// ([IssuerColumn]: ALTER TABLE fencelock_store ADD COLUMN issuer text).
// Its Put, Delete, GetForUpdate and Update then refuse, with
// [fence.ErrIssuerMismatch], a token from another issuer than the key's
// ([fence.IssuerNamer]); a table without the column, a key whose issuer is
// NULL and a write that names none are not checked, unless the Store is
// made with [RequireIssuer], which refuses a write that names none before
// any I/O ([fence.ErrIssuerRequired]). The other forms (Table, RunInTx,
// Exec, Fences) do not check issuers.
//
// # One floor per resource
//
// Each form keeps its own floor: a [Table] row's fence column, or a fence
// table row per resource name for [RunInTx], [Exec] and [Fences.Advance].
// They do not know of each other: if a newer holder changes a Table's row
// with SQL inside RunInTx, the row's fence column stays where it was and an
// older holder's [Table.Update] still lands. So a row written through a Table
// must be written only through it (inside RunInTx too: pass the pgx.Tx to
// Table.Update with the same token), or the table must carry the trigger of
// [Table.CreateTrigger], which makes every INSERT or UPDATE inside a fenced
// transaction check and raise the row's fence column as well. Rows of other
// tables have the floor of the resource name their transactions use: use one
// name per resource.
//
// # Deleting
//
// A row's fence column is its floor, and a DELETE removes it with the row:
// after it, a stale [Table.Upsert] creates the row anew, as on a key never
// written. (A stale [Table.Update] finds no row and writes nothing.) So
// delete fenced rows softly: mark them with a Table.Update (a deleted_at or
// deleted column, which readers filter on) and remove them for good only
// once no holder that could write them with an older token is left. The
// [Store] does this itself: [Store.Delete] leaves a tombstone that keeps the
// floor and reads as not found. The same goes for a fence table's rows: a
// deleted resource row lets any token in again.
//
// # What a refused write leaves
//
// A refused write changes no row. What PostgreSQL still does for it:
//
//   - Statement-level triggers fire for every INSERT, UPDATE or DELETE
//     statement, even one that changes no row; an upsert (ON CONFLICT DO
//     UPDATE) fires both the INSERT and the UPDATE ones. A trigger that must
//     see only real changes should be a row-level trigger, or an AFTER
//     statement trigger that reads its transition table (REFERENCING NEW
//     TABLE) and does nothing when it is empty.
//   - A refused [Table.Update] fires no row-level trigger. A refused
//     [Table.Upsert] (and [Store.Put]) fires none and evaluates no column
//     default when its snapshot already shows the newer fence. When it does
//     not (the newer holder's write committed while the upsert waited for the
//     row, or created the row), PostgreSQL has already formed the candidate
//     row when ON CONFLICT refuses it: BEFORE INSERT row triggers ran and
//     defaults were evaluated.
//   - Sequences are not transactional: a nextval() (a serial or identity
//     column's default) is never given back, whether the statement was
//     refused, failed or was rolled back.
//
// [RunInTx] and [Exec] refuse before any statement of yours runs: the fence
// table's row is checked first.
//
// # A frozen holder
//
// A holder that freezes inside a fenced transaction (a GC pause, a stopped
// process, a suspended VM whose TCP connection stays up) keeps that
// transaction open, and with it the rows of its fences and every row it
// wrote. Its lease ends and the next holder gets the lock, but the next
// holder's guard (the statement that raises the same fences) waits on
// those rows for as long as the freeze lasts, for good if it never ends.
//
// So a statement that claims a fence (the guard of [RunInTx], [RunInTxAll]
// or [RunInTxHeld]; a [Table]'s Update, Upsert or GetForUpdate, and
// [Exec], in a transaction of yours or alone) that has waited 100 ms
// ([WithPreemptAfter]) looks, on a connection of its own, at the sessions
// blocking it (pg_blocking_pids), and ends with pg_terminate_backend each
// one that runs a fenced transaction of older tokens only: its transaction
// is rolled back, and the statement goes on. The
// next holder's transfer is delayed by that 100 ms and a round trip or
// two, not by the freeze. The older holder, once it runs again, gets an
// error matching [ErrTerminated] from its next statement; nothing of its
// transaction was written (if it was frozen with its COMMIT in flight,
// the error also matches [fence.ErrUnknownOutcome]). A transaction shows
// its tokens to the others as its session's application_name
// ("fencelock:t=MIN-MAX;HASH:TOKEN;…", each claim adding its resource's
// hash and token), set for the transaction alone.
//
// Which blockers are ended: a fenced transaction that claimed a resource
// the waiter claims with an older token, and none with the waiter's token
// or a newer one, whatever its other tokens; one whose tokens are all
// older than all of the waiter's; with [RunInTxHeld] over a holder that
// knows whether it still holds all its locks (an *etcdlock.MultiLock),
// also one older than the waiter's newest token whose range holds none of
// the waiter's tokens, while that holder still holds them. Never one that
// claimed a resource of the waiter's with the same token (the same
// holder's own transaction) or a newer one, or a transaction that is not
// fenced: a claim blocked by those waits for as long as ctx allows, and
// its error names the session it waited for. A [Store] write that names
// an issuer ([IssuerColumn]) ends blockers only while the key's committed
// issuer is its own: a tag shows tokens, not their issuer, and tokens of
// two issuers are not compared. A live holder is never ended for idling: only a newer token's
// guard that it blocks ends it, and while its lease is renewed there is
// none.
//
// The role of the waiting holder must be allowed to end the blocker's
// session: the same role, or a member of it, or of pg_signal_backend (a
// superuser's session only a superuser can end). Without that, the guard
// waits as before, and its error says so. [WithoutPreemption] turns the
// look off.
//
// A transaction of yours is a fenced one from its first claim on
// ([Table], [Fences.Advance], [Exec]): a row it writes before that, or
// without a claim, is an unfenced transaction's, and nobody ends it for
// that row. Rows belong to the tokens that claim them: a transaction of
// older tokens that holds a lock on a row a newer token claims (it wrote
// it, or read it FOR UPDATE or FOR SHARE) without claiming it itself, is
// ended by that claim, though its own lease may be alive (a FOR KEY SHARE,
// as a foreign key check takes, does not block a claim).
//
// A [Store] holds nothing across a pause: each of its writes is one
// statement of its own, and its Update's read and write are two.
//
// What it takes, and where it stops:
//
//   - The look needs one connection more than the one that waits: an idle
//     one of the pool the call was given, or else one dialed with the
//     waiting connection's config (through the pool's BeforeConnect, so a
//     rotated credential applies). A role at its connection limit has
//     none, and waits as before; its error says so.
//   - Behind a pooler that shows process ids of its own (PgBouncer), the
//     blocker is found by the claimed rows' xmax instead of
//     pg_blocking_pids: that finds a transaction holding a row that
//     existed before it, not one that inserted a resource's first row.
//   - A tag names each claim's resource (by 24 bits of its MD5) with its
//     token, as long as they fit in application_name's 63 bytes: two or
//     three claims of ten-digit tokens. Past that it keeps only the range
//     of its tokens, and a blocker whose range holds one of the waiter's
//     tokens (queued tokens of LockAll straddle each other) is taken for
//     possibly the same holder: the waiter waits.
//   - Each claim computes the transaction's new tag in the client, from
//     the application_name the server reports after every statement (a
//     ParameterStatus message), and the claim sets it only if the
//     session's name is still the one the tag was computed from; if not
//     (a pooler that does not pass those reports on), the server computes
//     the tag itself, at the cost of its regular expressions.
//   - Ending a session drops everything the session held: advisory locks,
//     LISTEN, temporary tables, prepared statements of that connection.
//   - A holder frozen while reading a large result is ended without a
//     message (its server process cannot send one): once it runs again it
//     sees the connection's end (unexpected EOF), not [ErrTerminated].
//   - The tag shows in pg_stat_activity and in log lines that print
//     application_name (%a).
//
// # Isolation
//
// Fenced writes are correct under READ COMMITTED, REPEATABLE READ and
// SERIALIZABLE. Under the latter two, a transaction that waited on a fence
// behind a concurrent one fails with [ErrRetryable] instead of reading past
// it; run it again.
//
// This package imports pgx v5 and the OpenTelemetry API and nothing else
// outside the standard library and package fence.
//
// # Telemetry
//
// Every fenced write (Table.Update, Table.Upsert, RunInTx, RunInTxAll,
// Exec, Store.Put, Store.Delete) is a span (postgres.update, ...: a child of the caller's
// context, with the token) and is counted in fencelock.writes and
// fencelock.write.duration by operation and outcome (accepted, stale,
// unknown, error); rollbacks that match [ErrRetryable] are counted in
// fencelock.postgres.retryable_errors. A call refused for its arguments
// before any I/O (an error matching [ErrInvalidArgument], [ErrInvalidOption],
// [ErrInvalidIdentifier], fence.ErrInvalidKey or fence.ErrInvalidToken, or
// a context that had ended) is neither traced nor counted. They go to the
// providers given to [NewTable], [NewFences] or [NewStore]
// ([WithMeterProvider], [WithTracerProvider]); by default, and always for
// the package-level [RunInTx] and [Exec], to the global OpenTelemetry
// providers, which record nothing until the application installs an SDK.
// RunInTxAll and RunInTxHeld report as the operation tx, with the first
// claim's token and every resource. The fenced reads ([Table.GetForUpdate],
// [Store.GetForUpdate]) and [Store.Update] are neither traced nor counted.
package postgres
