package dynamofence

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/internal/outboxcodec"
)

// pageSize is how many items one Query of Pending or Parked reads.
const pageSize = 256

// listed is an effect's item as Pending and Parked read it.
type listed struct {
	ord  string
	e    outbox.Effect
	item map[string]types.AttributeValue
}

// Pending returns up to limit recorded effects in scope that are neither
// settled nor parked and whose resource is not in skip, in recording
// order ([outbox.Log]; the order is described in outbox_layout.go). It
// queries, with strongly consistent reads of the local secondary index
// "ord", each shard the scope may fall in (see [WithOutboxShards]), in
// pages, until each has given limit effects or ended, and merges them: no
// Scan, and its cost grows with the effects not yet settled (parked ones
// included: the query filters them out), not with those delivered. It
// refuses a limit below 1 and an invalid scope with an error matching
// [fence.ErrInvalidArgument], and returns [ErrCorrupt] for an item this
// package did not write. ctx bounds the reads.
func (o *Outbox) Pending(ctx context.Context, scope outbox.Scope, skip []string, limit int) ([]outbox.Effect, error) {
	got, err := o.list(ctx, scope, statePending, limit, func(e outbox.Effect) bool { return !slices.Contains(skip, e.Resource) })
	if err != nil {
		return nil, denied(err)
	}
	out := make([]outbox.Effect, len(got))
	for i, l := range got {
		out[i] = l.e
	}
	return out, nil
}

// Parked returns up to limit parked effects in scope, in recording order,
// with the reason and attempts their dispatcher settled them with
// ([outbox.Requeuer]). Its arguments, reads and errors are
// [Outbox.Pending]'s.
func (o *Outbox) Parked(ctx context.Context, scope outbox.Scope, limit int) ([]outbox.Parked, error) {
	got, err := o.list(ctx, scope, stateParked, limit, nil)
	if err != nil {
		return nil, denied(err)
	}
	out := make([]outbox.Parked, len(got))
	for i, l := range got {
		reason, n, err := decodeMark(l.item)
		if err != nil {
			return nil, err
		}
		out[i] = outbox.Parked{Effect: l.e, Reason: reason, Attempts: n}
	}
	return out, nil
}

// list returns the first limit effects in state and scope that keep
// accepts (nil: all), in recording order, from every shard scope may
// fall in.
func (o *Outbox) list(ctx context.Context, scope outbox.Scope, state string, limit int, keep func(outbox.Effect) bool) ([]listed, error) {
	if err := o.check(ctx); err != nil {
		return nil, err
	}
	if err := outboxcodec.CheckList(scope, limit, ErrInvalidArgument); err != nil {
		return nil, err
	}
	var all []listed
	for _, shard := range o.shardsOf(scope) {
		got, err := o.queryShard(ctx, shard, state, limit, func(e outbox.Effect) bool {
			return scope.Has(e.Resource) && (keep == nil || keep(e))
		})
		if err != nil {
			return nil, err
		}
		all = append(all, got...)
	}
	slices.SortFunc(all, func(a, b listed) int { return strings.Compare(a.ord, b.ord) })
	return all[:min(limit, len(all))], nil
}

// shardsOf returns the shards scope's effects may fall in: those whose
// number is its index modulo its partitions when the shards are a
// multiple of them (a resource's shard, its hash modulo the shards, then
// tells its partition), else all.
func (o *Outbox) shardsOf(scope outbox.Scope) []string {
	if scope == (outbox.Scope{}) {
		scope = outbox.All
	}
	var out []string
	for i := range o.shards {
		if o.shards%scope.Partitions != 0 || i%scope.Partitions == scope.Index {
			out = append(out, o.prefix+"e#"+strconv.Itoa(i))
		}
	}
	return out
}

// queryShard returns the first limit effects of shard in state that keep
// accepts, in order, reading pages of the index until it has them or the
// shard ends.
func (o *Outbox) queryShard(ctx context.Context, shard, state string, limit int, keep func(outbox.Effect) bool) ([]listed, error) {
	in := &dynamodb.QueryInput{
		TableName: aws.String(o.table), IndexName: aws.String(obIndex), ConsistentRead: aws.Bool(true),
		KeyConditionExpression:   aws.String("#pk = :pk"),
		FilterExpression:         aws.String("#st = :st"),
		ExpressionAttributeNames: map[string]string{"#pk": obPK, "#st": obState},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": str(shard), ":st": str(state),
		},
		Limit: aws.Int32(pageSize),
	}
	var out []listed
	for {
		page, err := o.q.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("dynamofence: reading the outbox %s in %s: %w", shard, o.table, err)
		}
		for _, item := range page.Items {
			e, err := decodeEffectItem(item)
			if err != nil {
				return nil, err
			}
			if !keep(e) {
				continue
			}
			ord, _ := item[obOrd].(*types.AttributeValueMemberS)
			if ord == nil {
				return nil, fmt.Errorf("%w: outbox item %s: no %s", ErrCorrupt, e.Key(), obOrd)
			}
			if out = append(out, listed{ord: ord.Value, e: e, item: item}); len(out) == limit {
				return out, nil
			}
		}
		if len(page.LastEvaluatedKey) == 0 {
			return out, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}
