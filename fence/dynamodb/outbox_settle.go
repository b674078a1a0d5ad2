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

// opSettle and opRequeue name an Outbox's writes in errors.
const (
	opSettle  = "settle"
	opRequeue = "requeue"
)

// Settle records that each of done was delivered (its item replaced by
// a delivered marker, see [Outbox], if it is still recorded) or parked
// (its item marked, if it is still recorded and not delivered), in one
// TransactWriteItems fenced on by: its first item raises the floor item
// of by.Resource to by.Token on the condition
//
//	attribute_not_exists(floor) OR floor <= by.Token
//
// so when a higher token has settled the transaction is cancelled, marks
// nothing, and Settle returns a *[fence.StaleError]. With no effects it
// only raises the floor: a dispatcher's takeover. The floor is the
// dispatcher's own and has nothing to do with the tokens of the effects'
// writers. An effect already settled or no longer recorded is passed
// over (one parked then is dropped and the rest sent again); one given
// twice counts once.
//
// A transaction holds at most [MaxTxWrites] items, so more than
// MaxTxWrites - 1 effects are settled in several, in order, each fenced on
// the floor the same way: once a newer dispatcher has settled, the next
// one is refused and nothing more is marked, but those before it stay
// marked. Marking is idempotent and delivery at least once, so a
// dispatcher deposed midway leaves only effects the next one delivers
// again.
//
// When DynamoDB gives no answer the error matches
// [fence.ErrUnknownOutcome] (the one rule of [Store.Put]). It refuses an
// invalid by before any I/O. ctx bounds the requests.
func (o *Outbox) Settle(ctx context.Context, by fence.Claim, done []outbox.Settled) error {
	if err := o.check(ctx); err != nil {
		return err
	}
	if err := fence.CheckRead(ctx, by.Resource, by.Token); err != nil {
		return err
	}
	marks := o.marks(done)
	for first := true; first || len(marks) > 0; first = false {
		n := min(len(marks), MaxTxWrites-1)
		if err := o.settleChunk(ctx, by, marks[:n]); err != nil {
			return denied(err)
		}
		marks = marks[n:]
	}
	return nil
}

// marks returns the items that settle done, each effect once.
func (o *Outbox) marks(done []outbox.Settled) []types.TransactWriteItem {
	var out []types.TransactWriteItem
	for _, d := range outboxcodec.Unique(done) {
		e := d.Effect
		if d.Parked == "" {
			out = append(out, types.TransactWriteItem{Put: &types.Put{
				TableName: aws.String(o.table), Item: o.deliveredItem(e),
				ConditionExpression:      aws.String("attribute_exists(#pk)"),
				ExpressionAttributeNames: map[string]string{"#pk": obPK},
			}})
			continue
		}
		out = append(out, types.TransactWriteItem{Update: &types.Update{
			TableName: aws.String(o.table), Key: o.effectKey(e),
			UpdateExpression:         aws.String("SET #st = :x, #m = :m"),
			ConditionExpression:      aws.String("attribute_exists(#ord)"),
			ExpressionAttributeNames: map[string]string{"#st": obState, "#m": obMark, "#ord": obOrd},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":x": str(stateParked), ":m": &types.AttributeValueMemberB{Value: []byte(outboxcodec.EncodeMarker(d.Parked, d.Attempts))},
			},
		}})
	}
	return out
}

// settleChunk sends the floor's item and marks in one transaction; a
// mark of an effect no longer recorded cancels it, and it is sent again
// without that mark.
func (o *Outbox) settleChunk(ctx context.Context, by fence.Claim, marks []types.TransactWriteItem) error {
	for {
		id := writeID()
		items := append([]types.TransactWriteItem{o.floorItem(by)}, marks...)
		_, err := o.store.c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
			TransactItems: items, ClientRequestToken: aws.String(id),
		}, sendOnce)
		var tc *types.TransactionCanceledException
		if err == nil {
			return nil
		}
		if !errors.As(err, &tc) {
			return writeError(opSettle, by.Resource, by.Token, err)
		}
		rest, err := settleRefused(by, marks, tc)
		if err != nil {
			return err
		}
		marks = rest
	}
}

// floorItem raises by's floor to its token unless it is higher.
func (o *Outbox) floorItem(by fence.Claim) types.TransactWriteItem {
	return types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(o.table), Key: o.floorKey(by.Resource),
		UpdateExpression:                    aws.String("SET #f = :t"),
		ConditionExpression:                 aws.String(condFenced),
		ExpressionAttributeNames:            map[string]string{"#f": obFloor},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":t": tok(by.Token)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
}

// settleRefused reads the reasons of a cancelled Settle: the refusal of
// by by a higher floor; else, when marks of effects no longer recorded
// failed their condition, the marks without them; else the cancellation,
// nothing written.
func settleRefused(by fence.Claim, marks []types.TransactWriteItem, tc *types.TransactionCanceledException) ([]types.TransactWriteItem, error) {
	rs := tc.CancellationReasons
	if len(rs) > 0 && aws.ToString(rs[0].Code) == "ConditionalCheckFailed" {
		return nil, stale(by.Resource, by.Token, rs[0].Item)
	}
	var rest []types.TransactWriteItem
	for i, m := range marks {
		if i+1 < len(rs) && aws.ToString(rs[i+1].Code) == "ConditionalCheckFailed" {
			continue
		}
		rest = append(rest, m)
	}
	if len(rest) == len(marks) {
		return nil, fmt.Errorf("dynamofence: settle by %q with token %d: transaction cancelled, nothing marked: %w", by.Resource, by.Token, tc)
	}
	return rest, nil
}

// Requeue makes the parked effect e pending again, at its place in its
// resource's order (its item keeps its ord: only its state changes), in
// one conditional UpdateItem. An effect that is not parked, or no longer
// recorded, gets an error matching [fence.ErrNotFound] and nothing
// changes. It refuses an empty Resource, an invalid Token and a negative
// Seq before any I/O (only they name the effect). When DynamoDB gives no
// answer the error matches [fence.ErrUnknownOutcome]. ctx bounds the
// request.
func (o *Outbox) Requeue(ctx context.Context, e outbox.Effect) error {
	if err := o.check(ctx); err != nil {
		return err
	}
	if err := outboxcodec.CheckRequeue(ctx, e, ErrInvalidArgument); err != nil {
		return err
	}
	_, err := o.store.c.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(o.table), Key: o.effectKey(e),
		UpdateExpression:          aws.String("SET #st = :p"),
		ConditionExpression:       aws.String("#st = :x"),
		ExpressionAttributeNames:  map[string]string{"#st": obState},
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": str(statePending), ":x": str(stateParked)},
	}, sendOnce)
	var cf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return nil
	case errors.As(err, &cf):
		return fmt.Errorf("%w: dynamofence: effect %s on %q is not parked", fence.ErrNotFound, e.Key(), e.Resource)
	}
	return denied(writeError(opRequeue, e.Resource, e.Token, err))
}
