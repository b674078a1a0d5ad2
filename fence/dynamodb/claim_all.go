package dynamofence

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fencelock/fencelock/fence"
)

// batchGetter is the optional method of a [Client] an UpdateAll reads
// several items with in one request: a *dynamodb.Client has it. A Client
// without it is read one GetItem per key.
type batchGetter interface {
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// claimAll claims every key of set and returns what each read, or the
// error of the first claim (in set's order) that failed. A consistent
// read finds the keys whose floor is their token already (a holder's
// second touch: a read, not a write); the others are claimed as
// [Store.claim] does, at once.
func (s *Store) claimAll(ctx context.Context, set []fence.Claim) ([]claimed, error) {
	items, err := s.readItems(ctx, set)
	if err != nil {
		return nil, err
	}
	got := make([]claimed, len(set))
	errs := make([]error, len(set))
	var wg sync.WaitGroup
	for i, c := range set {
		floor, err := tokenAttr(c.Resource, attrFloor, items[i])
		switch {
		case err != nil:
			errs[i] = err
		case floor > c.Token:
			errs[i] = &fence.StaleError{Resource: c.Resource, Token: c.Token, Current: floor}
		case floor == c.Token:
			got[i], errs[i] = readItem(c.Resource, c.Token, items[i])
		default:
			wg.Go(func() { got[i], errs[i] = s.claim(ctx, c.Resource, c.Token) })
		}
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, fence.ErrNotFound) {
			return nil, err
		}
	}
	return got, nil
}

// readItems reads set's items, consistently: nil for one that is not
// there, or that a BatchGetItem left unprocessed (its claim reads it).
func (s *Store) readItems(ctx context.Context, set []fence.Claim) ([]map[string]types.AttributeValue, error) {
	items := make([]map[string]types.AttributeValue, len(set))
	bg, ok := s.c.(batchGetter)
	if !ok {
		for i, c := range set {
			out, err := s.c.GetItem(ctx, &dynamodb.GetItemInput{
				TableName: aws.String(s.table), Key: s.itemKey(c.Resource), ConsistentRead: aws.Bool(true),
			})
			if err != nil {
				return nil, fmt.Errorf("dynamofence: get %q for update: %w", c.Resource, err)
			}
			items[i] = out.Item
		}
		return items, nil
	}
	keys := make([]map[string]types.AttributeValue, len(set))
	at := make(map[string]int, len(set))
	for i, c := range set {
		keys[i], at[c.Resource] = s.itemKey(c.Resource), i
	}
	out, err := bg.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
		RequestItems: map[string]types.KeysAndAttributes{s.table: {Keys: keys, ConsistentRead: aws.Bool(true)}},
	})
	if err != nil {
		return nil, fmt.Errorf("dynamofence: get %q for update: %w", fence.ClaimsLabel(set), err)
	}
	for _, item := range out.Responses[s.table] {
		if k, ok := item[s.key].(*types.AttributeValueMemberS); ok {
			if i, ok := at[k.Value]; ok {
				items[i] = item
			}
		}
	}
	return items, nil
}

// readItem is the claim of key for token that read item (as it was
// before the claim, or with its floor token already): the zero Record
// when it holds none.
func readItem(key string, token fence.Token, item map[string]types.AttributeValue) (claimed, error) {
	version, err := number(key, attrVersion, item)
	if err != nil {
		return claimed{}, err
	}
	pos, err := number(key, attrOutboxPos, item)
	if err != nil {
		return claimed{}, err
	}
	rec, err := record(key, item)
	if errors.Is(err, fence.ErrNotFound) {
		return claimed{version: version, pos: pos}, nil
	}
	if err != nil {
		return claimed{}, err
	}
	rec.Token = token
	return claimed{rec: rec, version: version, pos: pos}, nil
}
