package dynamofence

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/internal/nilcheck"
)

// Outbox records side effects (an [outbox.Effect]: an email, a webhook
// call) in the same TransactWriteItems as the fenced write of a [Store]'s
// record they belong to, so that an effect exists if and only if its
// write landed, and is the [outbox.Log] a dispatcher delivers them from.
// It implements [outbox.Requeuer]; it is no [outbox.Watcher] (DynamoDB
// Streams are another service, which no test server has): a dispatcher
// polls it.
//
// Its items live in a table of their own, which [CreateOutboxTable]
// creates: a Store's table has no sort key, and effects must be listed
// in order. TransactWriteItems spans tables, so the effects still land
// with the record, or not at all. The layout and the reasons for it are
// in outbox_layout.go. Several Outboxes share a table through
// [WithOutboxPrefix].
//
// An Outbox holds no state beyond its configuration: it is safe for
// concurrent use, and any number of Outboxes in any number of processes
// may share a table and prefix. The zero Outbox is not usable; create one
// with [NewOutbox].
type Outbox struct {
	store  *Store
	q      querier
	table  string
	prefix string
	shards int
	max    int // the largest payload
}

var (
	_ outbox.Log      = (*Outbox)(nil)
	_ outbox.Requeuer = (*Outbox)(nil)
)

// querier is what an Outbox lists effects with, beside a [Client]'s
// methods: a *dynamodb.Client has it.
type querier interface {
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// OutboxOption configures an [Outbox]; the interface is sealed, and
// [NewOutbox] checks each option, failing with [ErrInvalidOption].
type OutboxOption interface {
	applyOutbox(*Outbox)
}

type outboxOptionFunc func(*Outbox)

func (f outboxOptionFunc) applyOutbox(o *Outbox) { f(o) }

// WithOutboxPrefix sets the prefix of the partition keys of the Outbox's
// items, so that several Outboxes share one table. Default "". At most
// [MaxOutboxPrefix] bytes.
func WithOutboxPrefix(p string) OutboxOption {
	return outboxOptionFunc(func(o *Outbox) { o.prefix = p })
}

// WithOutboxShards sets how many partition keys the Outbox spreads its
// effects over, by [outbox.Hash] of their resource: each is a DynamoDB
// partition, with its own write throughput (about 1,000 small writes a
// second) and its own 10 GB limit on what is recorded and not yet settled
// (that of a local secondary index's item collection). [Outbox.Pending]
// queries each shard its scope may fall in: with a number of shards that
// is a multiple of the dispatchers' partitions, only its own. Default 1;
// n must be between 1 and 1024, and every Outbox of one table and prefix
// must use the same.
func WithOutboxShards(n int) OutboxOption {
	return outboxOptionFunc(func(o *Outbox) { o.shards = n })
}

// WithMaxEffectPayload sets the largest payload, in bytes, one effect may
// have: a bigger one is refused with an error matching
// [outbox.ErrTooLarge] before the write is sent. Default and most
// [MaxEffectPayload], what an item of DynamoDB's 400 KB holds beside the
// largest resource, destination and parking reason.
func WithMaxEffectPayload(n int) OutboxOption {
	return outboxOptionFunc(func(o *Outbox) { o.max = n })
}

// NewOutbox returns an Outbox that records effects beside store's records
// and keeps them in table, which must have [CreateOutboxTable]'s layout.
// It does no I/O. It fails with an error matching [ErrInvalidArgument]
// for a nil or zero store, one whose client cannot Query (a
// *dynamodb.Client can), or an empty table name, and with
// [ErrInvalidOption] for an invalid option.
func NewOutbox(store *Store, table string, opts ...OutboxOption) (*Outbox, error) {
	if store == nil || nilcheck.IsNil(store.c) {
		return nil, fmt.Errorf("%w: NewOutbox: a nil or zero Store", ErrInvalidArgument)
	}
	q, ok := store.c.(querier)
	if !ok {
		return nil, fmt.Errorf("%w: NewOutbox: the Store's client (%T) has no Query method", ErrInvalidArgument, store.c)
	}
	if table == "" {
		return nil, fmt.Errorf("%w: NewOutbox: empty table name", ErrInvalidArgument)
	}
	o := &Outbox{store: store, q: q, table: table, shards: 1, max: MaxEffectPayload}
	for _, opt := range opts {
		if nilcheck.IsNil(opt) {
			return nil, fmt.Errorf("%w: nil OutboxOption", ErrInvalidOption)
		}
		opt.applyOutbox(o)
	}
	switch {
	case len(o.prefix) > MaxOutboxPrefix:
		return nil, fmt.Errorf("%w: WithOutboxPrefix: %d bytes, over %d", ErrInvalidOption, len(o.prefix), MaxOutboxPrefix)
	case o.shards < 1 || o.shards > maxShards:
		return nil, fmt.Errorf("%w: WithOutboxShards(%d): want 1 to %d", ErrInvalidOption, o.shards, maxShards)
	case o.max < 1 || o.max > MaxEffectPayload:
		return nil, fmt.Errorf("%w: WithMaxEffectPayload(%d): want 1 to %d", ErrInvalidOption, o.max, MaxEffectPayload)
	}
	return o, nil
}

// Table returns the Outbox's table.
func (o *Outbox) Table() string { return o.table }

// Prefix returns the prefix of the partition keys of the Outbox's items
// ([WithOutboxPrefix]).
func (o *Outbox) Prefix() string { return o.prefix }

// MaxPayload returns the largest payload one effect may have
// ([WithMaxEffectPayload]).
func (o *Outbox) MaxPayload() int { return o.max }

// check refuses a nil or zero Outbox and a nil or ended context.
func (o *Outbox) check(ctx context.Context) error {
	if o == nil || o.store == nil {
		return fmt.Errorf("%w: a nil or zero Outbox; create one with NewOutbox", ErrInvalidArgument)
	}
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	return ctx.Err()
}

// CreateOutboxTable creates a table for an [Outbox], unless it exists,
// and waits until it is usable: on-demand capacity, a partition key pk
// and a sort key sk (both S), and a local secondary index "ord" on
// (pk, ord S) with every attribute projected. c must be a
// *dynamodb.Client.
func CreateOutboxTable(ctx context.Context, c *dynamodb.Client, table string) error {
	if c == nil || ctx == nil || table == "" {
		return fmt.Errorf("%w: CreateOutboxTable: nil client or context, or empty name", ErrInvalidArgument)
	}
	s := types.ScalarAttributeTypeS
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(obPK), AttributeType: s},
			{AttributeName: aws.String(obSK), AttributeType: s},
			{AttributeName: aws.String(obOrd), AttributeType: s},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(obPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(obSK), KeyType: types.KeyTypeRange},
		},
		LocalSecondaryIndexes: []types.LocalSecondaryIndex{{
			IndexName: aws.String(obIndex),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(obPK), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(obOrd), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		}},
		BillingMode: types.BillingModePayPerRequest,
	})
	var exists *types.ResourceInUseException
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("dynamofence: creating outbox table %s: %w", table, err)
	}
	return waitUsableKey(ctx, c, table, map[string]types.AttributeValue{
		obPK: &types.AttributeValueMemberS{Value: "fencelock-probe"}, obSK: &types.AttributeValueMemberS{Value: "-"},
	})
}
