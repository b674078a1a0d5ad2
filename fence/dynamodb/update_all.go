package dynamofence

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fencelock/fencelock/fence"
)

// opUpdateAll is the operation telemetry names UpdateAll.
const opUpdateAll = "update_all"

// UpdateHeld is [Store.UpdateAll] over h.Claims(): one claim per resource
// h holds, such as an *etcdlock.MultiLock's locks, each with its own token
// (see [fence.UpdateHeld]). A nil h (a typed nil too) is refused with an
// error matching [fence.ErrInvalidArgument] before any I/O, and an h that
// knows its locks are lost or past their validity with
// [fence.ErrLockLost], nothing sent ([fence.HeldClaims]).
func (s *Store) UpdateHeld(ctx context.Context, h fence.Claimer, fn fence.UpdateAllFunc) error {
	claims, err := fence.HeldClaims(h)
	if err != nil {
		return err
	}
	return s.UpdateAll(ctx, claims, fn)
}

// UpdateAll is [Store.Update] over several keys, each claimed with its own
// token, written all or nothing (see [fence.AllUpdater]): a transfer
// between two accounts. It claims every key as [Store.GetForUpdate] does,
// with one consistent BatchGetItem (when the client has it, as a
// *dynamodb.Client does), and an UpdateItem for each key whose floor is
// below its token (a holder's first touch), sent at once; a higher floor on any key gives a
// *[fence.StaleError] naming the first such key (in the order of
// [fence.SortClaims]), and fn is not called. The other keys' claims stay,
// as an Update's claim does: DynamoDB has no atomic read of several items
// that also writes, and a claim only raises a floor to a token its holder
// holds.
//
// It calls fn with the records (the zero Record for a key with no value)
// and writes fn's values in one TransactWriteItems, one Update per key
// written and one ConditionCheck per key left out, each on the condition
// that the item's floor is its token and its version the one read: every
// item lands, or none. On a change by a writer with the same token, or a
// conflict with another transaction on the items (at the write, or at a
// claim's UpdateItem: TransactionConflictException, nothing written),
// UpdateAll reads again and calls fn again, up to [fence.UpdateAttempts]
// times in all, then returns an error matching [fence.ErrConflict]; a
// higher floor at the write gives a *[fence.StaleError] naming that key,
// and nothing of fn's lands.
//
// fn's error is returned as it is, and a panic in fn is passed on;
// nothing is written either way, though the claims stay; so is a value
// of fn's too large for an item ([ErrTooLarge], nothing sent). UpdateAll
// refuses before any I/O what [fence.CheckUpdateAll] refuses (no claims,
// a key claimed with two tokens, an empty key, a token that is not
// positive, a nil fn, a nil or ended ctx) and more than [MaxTxWrites]
// keys. Each request is sent once (the SDK's retries off); a lost reply
// gives a *[fence.UnknownOutcomeError] (Resource lists the keys, Token is
// the first one's) matching [fence.ErrUnknownOutcome]: the items hold the
// records read or fn's, all of them, once. The write carries a client
// request token, so DynamoDB applies a copy of it delivered twice once,
// and a copy delivered after a newer write fails its conditions. ctx
// bounds the whole call.
func (s *Store) UpdateAll(ctx context.Context, claims []fence.Claim, fn fence.UpdateAllFunc) error {
	if s == nil || s.c == nil {
		return fmt.Errorf("%w: a nil or zero Store; create one with New", ErrInvalidArgument)
	}
	return fence.RunUpdateAll(ctx, (*rounds)(s), claims, fn)
}

// CheckUpdateAll refuses, before any I/O, more than MaxTxWrites keys.
func (r *rounds) CheckUpdateAll(set []fence.Claim) error {
	if len(set) > MaxTxWrites {
		return fmt.Errorf("%w: UpdateAll of %d keys, more than MaxTxWrites (%d)", ErrInvalidArgument, len(set), MaxTxWrites)
	}
	return nil
}

// StartUpdateAll starts an UpdateAll's span.
func (r *rounds) StartUpdateAll(ctx context.Context, set []fence.Claim) (context.Context, fence.UpdateSpan) {
	return r.tel.Op(opUpdateAll).StartUpdateAll(ctx, set)
}

// ClaimReadAll claims every key of set; a transaction writing one of
// them is a change: read again.
func (r *rounds) ClaimReadAll(ctx context.Context, set []fence.Claim) (map[string]fence.Record, []claimed, error) {
	got, err := (*Store)(r).claimAll(ctx, set)
	switch {
	case txConflict(err):
		return nil, nil, fmt.Errorf("%w: %w", fence.ErrChanged, err)
	case err != nil:
		return nil, nil, err
	}
	old := make(map[string]fence.Record, len(set))
	for i, c := range set {
		old[c.Resource] = got[i].rec
	}
	return old, got, nil
}

// WriteAllIf is the TransactWriteItems of fn's values.
func (r *rounds) WriteAllIf(ctx context.Context, set []fence.Claim, got []claimed, next map[string][]byte) error {
	for _, c := range set {
		if v, ok := next[c.Resource]; ok {
			if err := (*Store)(r).checkSize(c.Resource, v); err != nil {
				return err
			}
		}
	}
	ok, err := (*Store)(r).writeAll(ctx, set, got, next)
	if !ok && err == nil {
		return fence.ErrChanged
	}
	return err
}

// writeAll writes next in one TransactWriteItems if every item's floor is
// its token and its version the one read. It reports false, with no
// error, when one changed.
func (s *Store) writeAll(ctx context.Context, set []fence.Claim, got []claimed, next map[string][]byte) (bool, error) {
	id := writeID()
	items := make([]types.TransactWriteItem, len(set))
	for i, c := range set {
		items[i] = s.txItem(c, got[i].version, next, id)
	}
	_, err := s.c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: items, ClientRequestToken: aws.String(id),
	}, sendOnce)
	var tc *types.TransactionCanceledException
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &tc):
		return cancelled(set, next, id, tc)
	}
	return false, writeError(opUpdateAll, fence.ClaimsLabel(set), set[0].Token, err)
}

// txItem is c's part of an UpdateAll's write, its condition that the floor
// is c's token and the version the one read: an Update when next has a
// value for it, a ConditionCheck when not.
func (s *Store) txItem(c fence.Claim, version int64, next map[string][]byte, id string) types.TransactWriteItem {
	cond := "#f = :t AND #ver = :rv"
	names := map[string]string{"#f": attrFloor, "#ver": attrVersion}
	values := map[string]types.AttributeValue{":t": tok(c.Token), ":rv": num(version)}
	if version == 0 {
		cond = "#f = :t AND attribute_not_exists(#ver)"
		delete(values, ":rv")
	}
	v, ok := next[c.Resource]
	if !ok {
		return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
			TableName: aws.String(s.table), Key: s.itemKey(c.Resource), ConditionExpression: aws.String(cond),
			ExpressionAttributeNames: names, ExpressionAttributeValues: values,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}}
	}
	if v == nil {
		v = []byte{}
	}
	names["#tok"], names["#v"], names["#w"] = attrToken, attrValue, attrWrite
	values[":v"], values[":nv"], values[":w"] = &types.AttributeValueMemberB{Value: v}, num(version+1), &types.AttributeValueMemberS{Value: id}
	return types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(s.table), Key: s.itemKey(c.Resource),
		UpdateExpression:    aws.String("SET #tok = :t, #v = :v, #ver = :nv, #w = :w"),
		ConditionExpression: aws.String(cond), ExpressionAttributeNames: names, ExpressionAttributeValues: values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
}

// cancelled reads the reasons of a cancelled UpdateAll write: true if an
// item written carries the write's id already (this write landed,
// and the cancellation is of a second copy of it); the refusal of the
// first item whose floor is above its token; false, with no error, when
// an item changed or another transaction was on one (read again); and an
// error wrapping DynamoDB's for any other reason, with nothing written.
func cancelled(set []fence.Claim, next map[string][]byte, id string, tc *types.TransactionCanceledException) (bool, error) {
	rs := tc.CancellationReasons
	if landed(set, next, id, rs) {
		return true, nil
	}
	retry := false
	for i, r := range rs {
		switch code := aws.ToString(r.Code); {
		case i >= len(set), code == "None", code == "":
		case code == "ConditionalCheckFailed":
			if floor, err := tokenAttr(set[i].Resource, attrFloor, r.Item); err != nil || floor > set[i].Token {
				return false, stale(set[i].Resource, set[i].Token, r.Item)
			}
			retry = true
		case code == "TransactionConflict":
			retry = true
		default:
			return false, fmt.Errorf("dynamofence: UpdateAll of %q: transaction cancelled, nothing written: %w", fence.ClaimsLabel(set), tc)
		}
	}
	if !retry {
		return false, fmt.Errorf("dynamofence: UpdateAll of %q: transaction cancelled, nothing written: %w", fence.ClaimsLabel(set), tc)
	}
	return false, nil
}

// landed reports whether any item next writes holds the write id in the
// reasons of a cancellation (each one's item as it was): the transaction
// writes its items all or none, so one item with the id proves it
// committed, and the cancellation is of a second copy of it. Wanting the
// id on every item would miss the commit once the same holder has written
// one of them since, or when the server (minidyn) returns no item past the
// first failed one.
func landed(set []fence.Claim, next map[string][]byte, id string, rs []types.CancellationReason) bool {
	for i, c := range set {
		if _, ok := next[c.Resource]; !ok || i >= len(rs) {
			continue
		}
		if w, ok := rs[i].Item[attrWrite].(*types.AttributeValueMemberS); ok && w.Value == id {
			return true
		}
	}
	return false
}

var _ fence.AllUpdater = (*Store)(nil)
