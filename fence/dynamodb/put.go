package dynamofence

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fencelock/fencelock/fence"
)

// tableWait bounds CreateStoreTable's wait for the table.
const tableWait = 2 * time.Minute

// condFenced is the condition of every write: no floor yet, or one no
// higher than the token.
const condFenced = "attribute_not_exists(#f) OR #f <= :t"

// Put stores value under key with token, unless DynamoDB holds a higher
// token for key: then it returns a *[fence.StaleError] (matching
// [fence.ErrStale], with the floor as Current when DynamoDB returned the
// item) and changes nothing. A token equal to the floor is accepted. It is
// one UpdateItem whose condition DynamoDB checks atomically with the
// write:
//
//	SET fence_floor = :t, fence_token = :t, fence_value = :v, fence_version = fence_version + 1
//	IF attribute_not_exists(fence_floor) OR fence_floor <= :t
//
// Put returns an error matching [fence.ErrInvalidKey] or
// [fence.ErrInvalidToken] before any I/O, and [ErrNoTable] for a table
// that does not exist. The request is sent once, with the SDK's retries off
// for it: when no answer comes (a broken connection, a timeout, the
// context ending) or DynamoDB answers 5xx, the error is a
// *[fence.UnknownOutcomeError] matching [fence.ErrUnknownOutcome], and the
// item holds the old record or the new one, whole. Any other error is
// DynamoDB's refusal (4xx), and nothing was written. A value that would
// make the item larger than DynamoDB's 400 KB ([MaxItemSize]) is refused
// with [ErrTooLarge] before it is sent.
func (s *Store) Put(ctx context.Context, key string, token fence.Token, value []byte) error {
	if err := s.checkWrite(ctx, key, token); err != nil {
		return err
	}
	if err := s.checkSize(key, value); err != nil {
		return err
	}
	if value == nil {
		value = []byte{}
	}
	return s.write(ctx, opPut, key, token, &dynamodb.UpdateItemInput{
		UpdateExpression: aws.String("SET #f = :t, #tok = :t, #v = :v, #ver = if_not_exists(#ver, :zero) + :one"),
		ExpressionAttributeNames: map[string]string{
			"#f": attrFloor, "#tok": attrToken, "#v": attrValue, "#ver": attrVersion,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":t": tok(token), ":v": &types.AttributeValueMemberB{Value: value}, ":zero": num(0), ":one": num(1),
		},
	})
}

// Delete removes the record under key, fenced like [Store.Put]: unless
// DynamoDB holds a higher token for key, it sets the record's attributes to
// NULL and raises the floor to token, in one UpdateItem. The item stays with its floor:
// [Store.Get] then reports [fence.ErrNotFound], and a later Put with a
// lower token is refused. Deleting the item by other means (DeleteItem, a
// TTL) removes the floor: the next Put lands whatever its token. Results
// and errors are those of Put.
func (s *Store) Delete(ctx context.Context, key string, token fence.Token) error {
	if err := s.checkWrite(ctx, key, token); err != nil {
		return err
	}
	return s.write(ctx, opDelete, key, token, &dynamodb.UpdateItemInput{
		// The record's attributes are set to NULL rather than removed:
		// one SET, which every DynamoDB-compatible server tested applies
		// (minidyn 0.8.2 leaves attributes a REMOVE names in place).
		UpdateExpression:         aws.String("SET #f = :t, #tok = :null, #v = :null, #ver = if_not_exists(#ver, :zero) + :one"),
		ExpressionAttributeNames: map[string]string{"#f": attrFloor, "#tok": attrToken, "#v": attrValue, "#ver": attrVersion},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":t": tok(token), ":zero": num(0), ":one": num(1), ":null": &types.AttributeValueMemberNULL{Value: true},
		},
	})
}

// write sends a fenced write: in's update, on key's item, if condFenced.
func (s *Store) write(ctx context.Context, what, key string, token fence.Token, in *dynamodb.UpdateItemInput) error {
	ctx, w := s.tel.Op(what).Start(ctx, token)
	if w.Recording() {
		w.SetResource(key)
	}
	in.TableName, in.Key = aws.String(s.table), s.itemKey(key)
	in.ConditionExpression = aws.String(condFenced)
	in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	_, err := s.c.UpdateItem(ctx, in, sendOnce)
	err = s.result(what, key, token, err)
	w.End(err)
	return err
}

// result is the error of a fenced write's reply: a failed condition is
// the refusal by a higher floor.
func (s *Store) result(what, key string, token fence.Token, err error) error {
	if err == nil {
		return nil
	}
	var cf *types.ConditionalCheckFailedException
	if errors.As(err, &cf) {
		return stale(key, token, cf.Item)
	}
	return writeError(what, key, token, err)
}

// stale is the refusal of token by the item's floor (item: as DynamoDB
// returned it with the refusal, or nil).
func stale(key string, tk fence.Token, item map[string]types.AttributeValue) error {
	floor, err := tokenAttr(key, attrFloor, item)
	if err != nil {
		return err
	}
	return &fence.StaleError{Resource: key, Token: tk, Current: floor}
}
