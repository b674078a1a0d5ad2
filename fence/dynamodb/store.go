package dynamofence

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/nilcheck"
	"github.com/fencelock/fencelock/internal/tel"
	"github.com/fencelock/fencelock/internal/tokentext"
)

// The attributes of a Store's item, besides its key.
const (
	attrFloor   = "fence_floor"   // the highest token accepted or claimed
	attrToken   = "fence_token"   // the token of the write that stored the value
	attrValue   = "fence_value"   // the record's value (B)
	attrVersion = "fence_version" // a count of the writes, which Update compares
	attrWrite   = "fence_write"   // the id of the Update write that stored the record
	// attrOutboxPos is the position (microseconds, outbox_layout.go) of
	// the last write of an Outbox that claimed the item.
	attrOutboxPos = "fence_outbox_pos"
)

// The operations telemetry names.
const (
	opPut               = "put"
	opDelete            = "delete"
	opGetForUpdate      = "get_for_update"
	opUpdate            = "update"
	opTableUpdate       = "table_update"
	opTableGetForUpdate = "table_get_for_update"
	opTransact          = "transact"
	instrumentationName = "github.com/fencelock/fencelock/fence/dynamodb"
)

// Store is a [fence.Store] whose records are items of one DynamoDB table:
// resource key K is the item whose partition key (a string attribute,
// [WithKeyAttribute]) is K, with the attributes fence_floor (the highest
// token accepted or claimed), fence_token and fence_value (the record),
// and fence_version (a count of the writes). Every write is one
// conditional UpdateItem, so DynamoDB, not the Store, decides it. See the
// package documentation.
//
// A Store holds no state of its own beyond its configuration and is safe
// for concurrent use. The zero Store is not usable; create one with [New].
type Store struct {
	c     Client
	table string
	key   string
	tel   *tel.Recorder
}

var (
	_ fence.Store   = (*Store)(nil)
	_ fence.Updater = (*Store)(nil)
)

// New returns a Store on table, through c. The table must exist, with a
// partition key of type S named by [WithKeyAttribute] and no sort key
// ([CreateStoreTable] creates one). New does no I/O. It fails, before any
// I/O, for a nil client (a typed nil too) or an empty table name
// ([ErrInvalidArgument]), or an invalid option ([ErrInvalidOption]).
func New(c Client, table string, opts ...Option) (*Store, error) {
	if nilcheck.IsNil(c) {
		return nil, fmt.Errorf("%w: New: nil client (%T)", ErrInvalidArgument, c)
	}
	if table == "" {
		return nil, fmt.Errorf("%w: New: empty table name", ErrInvalidArgument)
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	r, err := tel.New("dynamodb", instrumentationName, o.meters, o.tracers, opPut, opDelete, opGetForUpdate, opUpdate, opUpdateAll)
	if err != nil {
		return nil, fmt.Errorf("%w: creating instruments: %w", ErrInvalidOption, err)
	}
	return &Store{c: c, table: table, key: o.keyAttr, tel: r}, nil
}

// CreateStoreTable creates a table for a [Store] (on demand capacity, a
// partition key of type S named keyAttr), unless it exists, and waits
// until it is active. c must be a *dynamodb.Client.
func CreateStoreTable(ctx context.Context, c *dynamodb.Client, table, keyAttr string) error {
	if c == nil || ctx == nil || table == "" || keyAttr == "" {
		return fmt.Errorf("%w: CreateStoreTable: nil client or context, or empty name", ErrInvalidArgument)
	}
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(keyAttr), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(keyAttr), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	var exists *types.ResourceInUseException
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("dynamofence: creating table %s: %w", table, err)
	}
	return waitUsable(ctx, c, table, keyAttr)
}

// waitUsable waits, up to tableWait, until a read of the table succeeds:
// DynamoDB refuses one (ResourceNotFoundException) while a new table is
// CREATING. A read rather than DescribeTable's status, which not every
// DynamoDB-compatible server reports.
func waitUsable(ctx context.Context, c *dynamodb.Client, table, keyAttr string) error {
	return waitUsableKey(ctx, c, table, map[string]types.AttributeValue{keyAttr: &types.AttributeValueMemberS{Value: "fencelock-probe"}})
}

// waitUsableKey is waitUsable, reading the item key.
func waitUsableKey(ctx context.Context, c *dynamodb.Client, table string, key map[string]types.AttributeValue) error {
	ctx, cancel := context.WithTimeout(ctx, tableWait)
	defer cancel()
	probe := &dynamodb.GetItemInput{TableName: aws.String(table), Key: key}
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, 2*time.Second) {
		_, err := c.GetItem(ctx, probe)
		var nf *types.ResourceNotFoundException
		if !errors.As(err, &nf) {
			if err != nil {
				return fmt.Errorf("dynamofence: table %s: %w", table, err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("dynamofence: table %s not usable: %w", table, ctx.Err())
		case <-time.After(delay): // poll: a table's creation has no event to wait on
		}
	}
}

// Table returns the store's table ("" for a nil Store).
func (s *Store) Table() string {
	if s == nil {
		return ""
	}
	return s.table
}

func (s *Store) itemKey(key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{s.key: &types.AttributeValueMemberS{Value: key}}
}

// Get returns the record under key: its value and the token of the write
// that stored it, with a strongly consistent read. It returns an error
// matching [fence.ErrNotFound] if key has never been written or was
// deleted, [ErrNoTable] for a table that does not exist, [ErrCorrupt] for
// an item this package did not write, and one matching
// [fence.ErrInvalidKey] for an empty key, before any I/O. It claims
// nothing: read with [Store.GetForUpdate] what a write of yours will
// follow.
func (s *Store) Get(ctx context.Context, key string) (fence.Record, error) {
	if err := s.checkCall(ctx, key); err != nil {
		return fence.Record{}, err
	}
	out, err := s.c.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: s.itemKey(key), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		var nf *types.ResourceNotFoundException
		if errors.As(err, &nf) {
			return fence.Record{}, fmt.Errorf("%w: get %q: %w", ErrNoTable, key, err)
		}
		return fence.Record{}, fmt.Errorf("dynamofence: get %q: %w", key, err)
	}
	return record(key, out.Item)
}

// record reads the record of an item (nil: none).
func record(key string, item map[string]types.AttributeValue) (fence.Record, error) {
	v, ok := item[attrValue]
	if _, deleted := v.(*types.AttributeValueMemberNULL); !ok || deleted {
		return fence.Record{}, fmt.Errorf("%w: %q", fence.ErrNotFound, key)
	}
	b, ok := v.(*types.AttributeValueMemberB)
	if !ok {
		return fence.Record{}, fmt.Errorf("%w: %q: %s is a %T, not binary", ErrCorrupt, key, attrValue, v)
	}
	tk, err := tokenAttr(key, attrToken, item)
	if err != nil {
		return fence.Record{}, err
	}
	if tk <= 0 {
		return fence.Record{}, fmt.Errorf("%w: %q: no %s", ErrCorrupt, key, attrToken)
	}
	value := b.Value
	if value == nil {
		value = []byte{}
	}
	return fence.Record{Token: tk, Value: value}, nil
}

// number reads a numeric attribute of item: 0 when it is not there.
func number(key, name string, item map[string]types.AttributeValue) (int64, error) {
	v, ok := item[name]
	if !ok {
		return 0, nil
	}
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("%w: %q: %s is a %T, not a number", ErrCorrupt, key, name, v)
	}
	i, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %q: %s %q: %w", ErrCorrupt, key, name, n.Value, err)
	}
	return i, nil
}

// checkCall validates the Store, a call's key and its context before any
// I/O.
func (s *Store) checkCall(ctx context.Context, key string) error {
	if s == nil || nilcheck.IsNil(s.c) {
		return fmt.Errorf("%w: a nil or zero Store; create one with New", ErrInvalidArgument)
	}
	if key == "" {
		return fmt.Errorf("%w: empty key", fence.ErrInvalidKey)
	}
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	return ctx.Err()
}

func (s *Store) checkWrite(ctx context.Context, key string, token fence.Token) error {
	if token <= 0 {
		return fmt.Errorf("%w: token %d for %q", fence.ErrInvalidToken, token, key)
	}
	return s.checkCall(ctx, key)
}

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// tok is a token as stored: a string of 19 digits (tokentext), which
// DynamoDB compares byte by byte, exactly. A number would do on DynamoDB,
// whose numbers are exact to 38 digits, but not on every compatible
// server: minidyn compares numbers as float64, equal above 2^53.
func tok(t fence.Token) types.AttributeValue {
	return &types.AttributeValueMemberS{Value: tokentext.Pad(t)}
}

// tokenAttr reads a token attribute of item: 0 when it is not there.
func tokenAttr(key, name string, item map[string]types.AttributeValue) (fence.Token, error) {
	v, ok := item[name]
	if !ok {
		return 0, nil
	}
	s, ok := v.(*types.AttributeValueMemberS)
	if !ok {
		return 0, fmt.Errorf("%w: %q: %s is a %T, not a token", ErrCorrupt, key, name, v)
	}
	t, ok := tokentext.Parse(s.Value)
	if !ok {
		return 0, fmt.Errorf("%w: %q: %s %q, not a token", ErrCorrupt, key, name, s.Value)
	}
	return t, nil
}
