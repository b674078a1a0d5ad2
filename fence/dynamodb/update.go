package dynamofence

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fencelock/fencelock/fence"
)

// GetForUpdate returns the record under key, claiming key for token (see
// [fence.Updater]): unless DynamoDB holds a higher token for key, one
// UpdateItem raises the floor to token and returns the item as it was
// (ReturnValues ALL_OLD), so from then on every write with a lower token is
// refused. The record has token as its Token. A key with no value is
// claimed too (the item is created with its floor), and the error matches
// [fence.ErrNotFound]. A higher floor refuses the claim with a
// *[fence.StaleError] and changes nothing. Errors are those of
// [Store.Put]: a lost reply gives [fence.ErrUnknownOutcome], since the
// floor may have been raised.
func (s *Store) GetForUpdate(ctx context.Context, key string, token fence.Token) (fence.Record, error) {
	if err := s.checkWrite(ctx, key, token); err != nil {
		return fence.Record{}, err
	}
	ctx, w := s.tel.Op(opGetForUpdate).Start(ctx, token)
	if w.Recording() {
		w.SetResource(key)
	}
	c, err := s.claim(ctx, key, token)
	if errors.Is(err, fence.ErrNotFound) {
		w.End(nil)
	} else {
		w.End(err)
	}
	return c.rec, err
}

type claimed struct {
	rec     fence.Record
	version int64
	pos     int64 // the item's fence_outbox_pos: the last outbox position of its effects (0: none)
}

func (s *Store) claim(ctx context.Context, key string, token fence.Token) (claimed, error) {
	out, err := s.c.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: s.itemKey(key),
		UpdateExpression:                    aws.String("SET #f = :t"),
		ConditionExpression:                 aws.String(condFenced),
		ExpressionAttributeNames:            map[string]string{"#f": attrFloor},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":t": tok(token)},
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, sendOnce)
	if err != nil {
		return claimed{}, s.result(opGetForUpdate, key, token, err)
	}
	c, err := readItem(key, token, out.Attributes)
	if err == nil && c.rec.Value == nil {
		return c, fmt.Errorf("%w: %q (claimed with token %d)", fence.ErrNotFound, key, token)
	}
	return c, err
}

// Update is a read-modify-write of key with token (see [fence.Updater]):
// it claims key and reads its record as [Store.GetForUpdate] does, calls
// fn with it (the zero Record when key holds no value), and writes fn's
// result with token in a second UpdateItem whose condition is that the
// floor is still token and the version is the one read. An older holder's
// late write is refused by that floor, and one with the same token changes
// the version. On such a change, or when the claim meets a transaction
// writing the item (TransactionConflictException, nothing written),
// Update reads again and calls fn again, up to [fence.UpdateAttempts]
// times in all, then returns an error matching [fence.ErrConflict]. A higher floor, at the read or at the write, gives a
// *[fence.StaleError]; at the read, fn is not called.
//
// fn's error is returned as it is, and a panic in fn is passed on: nothing
// is written either way, though the claim stays; so is a value of fn's
// too large for an item ([ErrTooLarge], refused before it is sent). When
// a reply is lost, the error matches [fence.ErrUnknownOutcome]: the item holds the record read
// or fn's, once. Each request is sent once. ctx bounds the whole call.
//
// Each write carries an id of its own, so a copy of it delivered twice
// (the first lands, the second is refused) is recognised and fn is not
// called again: the id is read from the item DynamoDB returns with the
// refusal or, from a server that returns none (dynalite), from the item
// read back with one consistent GetItem. A write with the same token that
// lands between the two copies (another goroutine of the same holder)
// replaces the id: the refusal then looks like that write's change, and
// fn is called again on a record that holds both writes. Writes with a
// newer token in between do not repeat fn: the id stays (a Put sets none),
// or the newer floor gives a *[fence.StaleError].
func (s *Store) Update(ctx context.Context, key string, token fence.Token, fn fence.UpdateFunc) error {
	if err := s.checkWrite(ctx, key, token); err != nil {
		return err
	}
	return fence.RunUpdate(ctx, (*rounds)(s), key, token, fn)
}

// rounds is a Store's [fence.UpdateRounds] and [fence.UpdateAllRounds]:
// its Update and UpdateAll are fence's loop over them.
type rounds Store

// StartUpdate starts an Update's span.
func (r *rounds) StartUpdate(ctx context.Context, key string, token fence.Token) (context.Context, fence.UpdateSpan) {
	return r.tel.Op(opUpdate).StartUpdate(ctx, key, token)
}

// ClaimRead is the claiming UpdateItem; a transaction writing the item
// (TransactionConflictException, nothing written) is a change: read
// again.
func (r *rounds) ClaimRead(ctx context.Context, key string, token fence.Token) (fence.Record, int64, error) {
	c, err := (*Store)(r).claim(ctx, key, token)
	if txConflict(err) {
		return fence.Record{}, 0, fmt.Errorf("%w: %w", fence.ErrChanged, err)
	}
	return c.rec, c.version, err
}

// WriteIf is the conditional UpdateItem: it lands only if the floor is
// still token and the version the one read.
func (r *rounds) WriteIf(ctx context.Context, key string, token fence.Token, version int64, v []byte) error {
	s := (*Store)(r)
	if err := s.checkSize(key, v); err != nil {
		return err
	}
	if v == nil {
		v = []byte{}
	}
	// The write carries an id of its own: a copy of it delivered twice (a
	// proxy that resends) finds the version moved by the first, and its
	// refusal must not send fn round again.
	id := writeID()
	cond := "#f = :t AND #ver = :rv"
	values := map[string]types.AttributeValue{
		":t": tok(token), ":v": &types.AttributeValueMemberB{Value: v}, ":rv": num(version), ":nv": num(version + 1),
		":w": &types.AttributeValueMemberS{Value: id},
	}
	if version == 0 {
		cond = "#f = :t AND attribute_not_exists(#ver)"
		delete(values, ":rv")
	}
	_, err := s.c.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: s.itemKey(key),
		UpdateExpression:                    aws.String("SET #tok = :t, #v = :v, #ver = :nv, #w = :w"),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            map[string]string{"#f": attrFloor, "#tok": attrToken, "#v": attrValue, "#ver": attrVersion, "#w": attrWrite},
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, sendOnce)
	var cf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return nil
	case errors.As(err, &cf):
		item, err := s.refusedItem(ctx, key, token, cf)
		if err != nil {
			return err
		}
		return refusedWrite(key, token, id, item)
	}
	return writeError(opUpdate, key, token, err)
}

// refusedItem is the item as it was when an Update's write was refused:
// the one DynamoDB returned with the refusal, or, from a server that
// returns none (dynalite), the item read back
// with a consistent read. Without it, a second copy of a write that
// landed could not be told from a change, and fn would run again. The
// read sees the item at least as new as at the refusal; only a write by
// the same holder in between hides the id, as it does in the returned
// item.
func (s *Store) refusedItem(ctx context.Context, key string, token fence.Token, cf *types.ConditionalCheckFailedException) (map[string]types.AttributeValue, error) {
	if len(cf.Item) > 0 {
		return cf.Item, nil
	}
	out, err := s.c.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: s.itemKey(key), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, &fence.UnknownOutcomeError{Resource: key, Token: token, Err: err}
	}
	return out.Item, nil
}

// refusedWrite is the error of an Update's write whose condition failed,
// item as it was then: nil if it carries the write's id (it landed: the
// refusal is of a second copy of it), a *[fence.StaleError] for a higher
// floor, else [fence.ErrChanged] (the record changed).
func refusedWrite(key string, token fence.Token, id string, item map[string]types.AttributeValue) error {
	if w, ok := item[attrWrite].(*types.AttributeValueMemberS); ok && w.Value == id {
		return nil
	}
	floor, err := tokenAttr(key, attrFloor, item)
	switch {
	case err != nil:
		return err
	case floor > token:
		return &fence.StaleError{Resource: key, Token: token, Current: floor}
	}
	return fence.ErrChanged
}

// writeID returns a fresh id for a write.
func writeID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
