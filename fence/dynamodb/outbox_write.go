package dynamofence

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/internal/outboxcodec"
)

// write sends the recording transaction of an Update or UpdateAll: one
// item per claim of set (in set's order, each fenced on its floor and the
// version got read, and setting its fence_outbox_pos), then one new item
// per effect. It returns nil when it landed, a *fence.StaleError when a
// floor was above its claim's token, ErrDuplicate when an effect was
// recorded already, and fence.ErrChanged when a record changed or another
// transaction was on its items.
func (o *Outbox) write(ctx context.Context, set []fence.Claim, got []claimed, next map[string][]byte, effects []outbox.Effect) error {
	if err := o.checkRecording(set, next, effects); err != nil {
		return err
	}
	last := make([]int64, len(got))
	for i, c := range got {
		last[i] = c.pos
	}
	pos, id := position(last...), writeID()
	items := make([]types.TransactWriteItem, 0, len(set)+len(effects))
	for i, c := range set {
		items = append(items, withPosition(o.store.txItem(c, got[i].version, next, id), pos))
	}
	for i, e := range effects {
		items = append(items, types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String(o.table), Item: o.effectItem(e, pos, i),
			ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
			ExpressionAttributeNames: map[string]string{"#pk": obPK},
		}})
	}
	_, err := o.store.c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: items, ClientRequestToken: aws.String(id),
	}, sendOnce)
	var tc *types.TransactionCanceledException
	switch {
	case err == nil:
		return nil
	case errors.As(err, &tc):
		return refusedRecording(set, next, effects, id, tc)
	}
	return writeError(opUpdate, fence.ClaimsLabel(set), set[0].Token, err)
}

// withPosition makes a claim's item of a write also set the record's
// outbox position: an Update keeps its condition and adds the SET; a
// ConditionCheck (a key claimed and not written) becomes an Update of the
// position alone, on the same condition, so that a later write to that
// key takes a higher position.
func withPosition(it types.TransactWriteItem, pos int64) types.TransactWriteItem {
	if u := it.Update; u != nil {
		u.UpdateExpression = aws.String(aws.ToString(u.UpdateExpression) + ", #op = :op")
		u.ExpressionAttributeNames["#op"], u.ExpressionAttributeValues[":op"] = attrOutboxPos, num(pos)
		return it
	}
	cc := it.ConditionCheck
	cc.ExpressionAttributeNames["#op"], cc.ExpressionAttributeValues[":op"] = attrOutboxPos, num(pos)
	return types.TransactWriteItem{Update: &types.Update{
		TableName: cc.TableName, Key: cc.Key, UpdateExpression: aws.String("SET #op = :op"),
		ConditionExpression: cc.ConditionExpression, ExpressionAttributeNames: cc.ExpressionAttributeNames,
		ExpressionAttributeValues: cc.ExpressionAttributeValues, ReturnValuesOnConditionCheckFailure: cc.ReturnValuesOnConditionCheckFailure,
	}}
}

// refusedRecording reads the reasons of a cancelled recording write: nil
// when it landed (a second copy was cancelled), a claim's refusal by a
// higher floor first, then ErrDuplicate for an effect already recorded,
// then fence.ErrChanged (read again) or the cancellation.
func refusedRecording(set []fence.Claim, next map[string][]byte, effects []outbox.Effect, id string, tc *types.TransactionCanceledException) error {
	ok, err := cancelled(set, next, id, tc)
	var stale *fence.StaleError
	switch {
	case ok:
		return nil
	case errors.As(err, &stale):
		return err
	}
	rs := tc.CancellationReasons
	for j, e := range effects {
		if k := len(set) + j; k < len(rs) && aws.ToString(rs[k].Code) == "ConditionalCheckFailed" {
			return fmt.Errorf("%w: %s (resource %q, token %d, seq %d); nothing written", outbox.ErrDuplicate, e.Key(), e.Resource, e.Token, e.Seq)
		}
	}
	if err != nil {
		return err
	}
	return fence.ErrChanged
}

// checkRecording refuses, before the write is sent, effects that are
// invalid or do not belong to set, a value too large for its item, and a
// write too large for one transaction.
func (o *Outbox) checkRecording(set []fence.Claim, next map[string][]byte, effects []outbox.Effect) error {
	if err := outbox.ValidateAll(effects, set); err != nil {
		return err
	}
	if n := len(set) + len(effects); n > MaxTxWrites {
		return fmt.Errorf("%w: dynamofence: %d keys and %d effects make %d items in one transaction, over DynamoDB's %d",
			outbox.ErrTooLarge, len(set), len(effects), n, MaxTxWrites)
	}
	size := 0
	for _, c := range set {
		v, ok := next[c.Resource]
		if !ok {
			continue
		}
		if err := o.store.checkSize(c.Resource, v); err != nil {
			return err
		}
		size += len(v) + len(c.Resource) + itemOverhead
	}
	for _, e := range effects {
		if len(e.Payload) > o.max {
			return fmt.Errorf("%w: dynamofence: effect %s: a %d-byte payload, over the limit of %d (WithMaxEffectPayload)",
				outbox.ErrTooLarge, e.Key(), len(e.Payload), o.max)
		}
		size += outboxcodec.Size(e) + len(o.prefix) + 3*keyLen + 64
	}
	if size > maxTxBytes {
		return fmt.Errorf("%w: dynamofence: the write of %q and %d effects holds about %d bytes, over DynamoDB's %d for a transaction",
			outbox.ErrTooLarge, fence.ClaimsLabel(set), len(effects), size, maxTxBytes)
	}
	return nil
}
