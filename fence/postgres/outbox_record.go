package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
)

// maxNotifyPayload bounds the notification Record sends; PostgreSQL's
// limit is 8000 bytes. Past it, the notification says "*": every watcher
// wakes.
const maxNotifyPayload = 4000

// Record records effects in tx, the caller's transaction, in one
// statement: they land if and only if tx commits. Call it in the function
// of the fenced transaction whose write they belong to ([RunInTx],
// [RunInTxAll], [RunInTxHeld], beside its [Table.Update]s):
//
//	err := postgres.RunInTx(ctx, pool, "acct-7", tok, func(tx pgx.Tx) error {
//		if err := accounts.Update(ctx, tx, "acct-7", tok, postgres.Add("balance", -20)); err != nil {
//			return err
//		}
//		return ob.Record(ctx, tx, outbox.Effect{Resource: "acct-7", Token: tok, Seq: 0,
//			Destination: "https://mail.example/send", Payload: receipt})
//	})
//
// The statement checks, in the server, that each effect's resource is
// claimed with the effect's token: its row in the fence table must carry
// exactly that token, and it is locked FOR SHARE until tx ends (a no-op
// when tx raised it itself), so that no newer holder can claim the
// resource before the effects commit. An effect whose resource's fence
// does not carry its token gets an error matching [ErrNotClaimed] (and
// [fence.ErrInvalidArgument]); when the fence is above the token, the
// error also wraps a [*fence.StaleError] (matching [fence.ErrStale]). An
// effect already recorded with the same Resource, Token and Seq gives an
// error matching [outbox.ErrDuplicate]. Each of these, like any failure of
// the statement, records none of effects and aborts tx (PostgreSQL accepts no more statements in it): return the
// error from the function, which rolls the transaction back.
//
// Record also notifies the outbox's channel (pg_notify), delivered when tx
// commits, so that a dispatcher in [Outbox.Watch] wakes.
//
// Invalid effects ([outbox.ValidateAll]), a payload over
// [MaxOutboxPayload] bytes ([outbox.ErrTooLarge]), a nil tx or ctx are
// refused before any I/O; no effects is a no-op. ctx bounds the call.
func (o *Outbox) Record(ctx context.Context, tx pgx.Tx, effects ...outbox.Effect) error {
	if err := cmp.Or(o.check(), checkDB(tx), checkCtx(ctx), checkEffects(effects)); err != nil {
		return err
	}
	if len(effects) == 0 {
		return nil
	}
	sql, args := o.recordStmt(effects)
	if _, err := tx.Exec(ctx, sql, args...); err != nil {
		return o.recordError(tx, effects[0], err)
	}
	return nil
}

// recordStmt is Record's statement for effects and its arguments: one
// effect with scalar parameters (cheaper to plan than the arrays of
// unnest), several with arrays.
func (o *Outbox) recordStmt(effects []outbox.Effect) (string, []any) {
	n := len(effects)
	res, toks, seqs, hashes := make([]string, n), make([]int64, n), make([]int64, n), make([]int64, n)
	dests, payloads := make([]string, n), make([][]byte, n)
	for i, e := range effects {
		res[i], toks[i], seqs[i], hashes[i] = e.Resource, int64(e.Token), e.Seq, int64(outbox.Hash(e.Resource))
		dests[i], payloads[i] = e.Destination, e.Payload
		if payloads[i] == nil {
			payloads[i] = append([]byte{}, payloads[i]...) // never NULL
		}
	}
	if n == 1 {
		return o.sql.recordOne, []any{res[0], toks[0], seqs[0], hashes[0], dests[0], payloads[0], o.channel, notification(hashes)}
	}
	return o.sql.record, []any{res, toks, seqs, hashes, dests, payloads, o.channel, notification(hashes)}
}

// checkEffects is Record's check before any I/O.
func checkEffects(effects []outbox.Effect) error {
	if err := outbox.ValidateAll(effects, nil); err != nil {
		return err
	}
	for _, e := range effects {
		if len(e.Payload) > MaxOutboxPayload {
			return fmt.Errorf("%w: effect %s on %q: payload of %d bytes, over PostgreSQL outbox's %d",
				outbox.ErrTooLarge, e.Key(), e.Resource, len(e.Payload), MaxOutboxPayload)
		}
	}
	return nil
}

// notification is the payload Record notifies: the distinct hashes of the
// effects' resources, comma-separated, for a watcher to tell its scope's;
// "*" when they are too many to list.
func notification(hashes []int64) string {
	h := slices.Clone(hashes)
	slices.Sort(h)
	h = slices.Compact(h)
	parts := make([]string, len(h))
	size := 0
	for i, v := range h {
		parts[i] = strconv.FormatInt(v, 10)
		if size += len(parts[i]) + 1; size > maxNotifyPayload {
			return "*"
		}
	}
	return strings.Join(parts, ",")
}

// recordError turns the error of Record's statement into the one to
// return.
func (o *Outbox) recordError(tx pgx.Tx, first outbox.Effect, err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return writeError(tx, "record effects on", first.Resource, first.Token, err)
	}
	if pgErr.Code == "23505" {
		return fmt.Errorf("%w: %s: %w", outbox.ErrDuplicate, o.label, err)
	}
	i := strings.Index(pgErr.Message, unclaimedMarker)
	if pgErr.Code != "22P02" || i < 0 {
		return writeError(tx, "record effects on", first.Resource, first.Token, err)
	}
	rest := strings.TrimSuffix(pgErr.Message[i+len(unclaimedMarker):], `"`)
	cur, rest, _ := strings.Cut(rest, "/")
	tok, resource, _ := strings.Cut(rest, "/")
	current, _ := strconv.ParseInt(cur, 10, 64)
	t, _ := strconv.ParseInt(tok, 10, 64)
	token := fence.Token(t)
	if fence.Token(current) > token {
		return fmt.Errorf("%w: effect on %q: %w", ErrNotClaimed, resource,
			&fence.StaleError{Resource: resource, Token: token, Current: fence.Token(current)})
	}
	how := "has no fence row"
	if current > 0 {
		how = "has fence " + cur
	}
	return fmt.Errorf("%w: effect on %q with token %d: the resource %s in %s (claim it in the transaction first: RunInTx, RunInTxAll)",
		ErrNotClaimed, resource, token, how, o.fences.label)
}
