package dynamofence

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/nilcheck"
	"github.com/fencelock/fencelock/internal/tel"
	"github.com/fencelock/fencelock/internal/tokentext"
)

// Table fences updates of items of your own table: each item keeps, in an
// attribute you name (the token attribute, a string of 19 digits), the
// highest token that
// has written or claimed it, and every write is a conditional UpdateItem
// (or a TransactWriteItems) whose condition is that attribute, so DynamoDB
// refuses a stale token atomically. The other attributes, the key schema
// and the table are yours.
//
//	accounts, err := dynamofence.NewTable(ddb, "accounts", "fence")
//	err = accounts.Update(ctx, key, token, expression.Set(expression.Name("balance"), expression.Value(70)))
//
// A Table holds no state beyond its configuration and is safe for
// concurrent use. The zero Table is not usable; create one with
// [NewTable].
type Table struct {
	c    Client
	name string
	attr string
	tel  *tel.Recorder
}

// NewTable returns a Table for table, whose items keep their token in the
// attribute tokenAttr. It does no I/O. It fails, before any I/O, for a nil
// client (a typed nil too) or an empty name ([ErrInvalidArgument]), or an
// invalid option ([ErrInvalidOption]).
func NewTable(c Client, table, tokenAttr string, opts ...Option) (*Table, error) {
	if nilcheck.IsNil(c) {
		return nil, fmt.Errorf("%w: NewTable: nil client (%T)", ErrInvalidArgument, c)
	}
	if table == "" || tokenAttr == "" {
		return nil, fmt.Errorf("%w: NewTable: empty table or token attribute name", ErrInvalidArgument)
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	r, err := tel.New("dynamodb", instrumentationName, o.meters, o.tracers, opTableUpdate, opTableGetForUpdate, opTransact)
	if err != nil {
		return nil, fmt.Errorf("%w: creating instruments: %w", ErrInvalidOption, err)
	}
	return &Table{c: c, name: table, attr: tokenAttr, tel: r}, nil
}

// Name returns the table's name ("" for a nil Table).
func (t *Table) Name() string {
	if t == nil {
		return ""
	}
	return t.name
}

// TokenAttribute returns the name of the attribute that holds each item's
// token ("" for a nil Table).
func (t *Table) TokenAttribute() string {
	if t == nil {
		return ""
	}
	return t.attr
}

// Update applies update to the item key (all of the table's key
// attributes) with token, and sets the item's token attribute to token,
// unless the item's token attribute holds a higher token: then it returns
// a *[fence.StaleError] (Current is that token) and changes nothing. One
// UpdateItem: DynamoDB checks the condition and writes atomically. An item
// that does not exist is created, as UpdateItem does.
//
// update is built with github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression
// (expression.Set, Add, Remove, Delete) and must not name the token
// attribute. Update refuses, before any I/O, an empty key, a key or update
// that names the token attribute, a token that is not positive, and a nil
// or ended ctx. A table that does not exist gives [ErrNoTable]. The
// request is sent once; errors for a lost reply and for DynamoDB's
// refusals are those of [Store.Put].
func (t *Table) Update(ctx context.Context, key map[string]types.AttributeValue, token fence.Token, update expression.UpdateBuilder) error {
	res, err := t.check(ctx, key, token)
	if err != nil {
		return err
	}
	in, err := t.updateInput(key, token, update)
	if err != nil {
		return err
	}
	ctx, w := t.tel.Op(opTableUpdate).Start(ctx, token)
	if w.Recording() {
		w.SetResource(res)
	}
	in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	_, err = t.c.UpdateItem(ctx, in, sendOnce)
	err = t.result(opTableUpdate, res, token, err)
	w.End(err)
	return err
}

// GetForUpdate returns the item key as it was, claiming it for token:
// unless its token attribute holds a higher token, one UpdateItem sets it
// to token and returns the item as it was before (ReturnValues ALL_OLD),
// so from then on an Update with a lower token is refused. An item that
// does not exist is created with its key and token attribute, and the map
// is empty. A higher token refuses the claim with a *[fence.StaleError]
// and changes nothing. Arguments and errors are those of [Table.Update].
func (t *Table) GetForUpdate(ctx context.Context, key map[string]types.AttributeValue, token fence.Token) (map[string]types.AttributeValue, error) {
	res, err := t.check(ctx, key, token)
	if err != nil {
		return nil, err
	}
	in, err := t.updateInput(key, token, expression.UpdateBuilder{})
	if err != nil {
		return nil, err
	}
	ctx, w := t.tel.Op(opTableGetForUpdate).Start(ctx, token)
	if w.Recording() {
		w.SetResource(res)
	}
	in.ReturnValues = types.ReturnValueAllOld
	in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	out, err := t.c.UpdateItem(ctx, in, sendOnce)
	err = t.result(opTableGetForUpdate, res, token, err)
	w.End(err)
	if err != nil {
		return nil, err
	}
	item := out.Attributes
	if item == nil {
		item = map[string]types.AttributeValue{}
	}
	return item, nil
}

// TxWrite is one item of a [Transact]: an update of the item Key of
// Table with Token, fenced as [Table.Update] is.
type TxWrite struct {
	Table  *Table
	Key    map[string]types.AttributeValue
	Token  fence.Token
	Update expression.UpdateBuilder
}

// MaxTxWrites is the most items one [Transact] writes: DynamoDB's limit
// for TransactWriteItems.
const MaxTxWrites = 100

// Transact applies every write, each to its own item with its own token,
// all or none, in one TransactWriteItems: each item's update lands only if
// its token attribute holds no higher token than its write's. When one
// does, nothing is written and the error is a *[fence.StaleError] for the
// first such item (its Resource names the table and key), matching
// [fence.ErrStale]. A transaction DynamoDB cancels for another reason (a
// conflict with another transaction on the same items, throttling) wrote
// nothing, and its error wraps DynamoDB's.
//
// The writes are sent through the first write's Table's client, once (the
// SDK's retries off); a lost reply gives [fence.ErrUnknownOutcome]: all
// of them landed, or none. Transact refuses, before any I/O, no writes,
// more than [MaxTxWrites], a nil Table, and each write's bad arguments as
// Update does.
func Transact(ctx context.Context, writes ...TxWrite) error {
	if len(writes) == 0 || len(writes) > MaxTxWrites {
		return fmt.Errorf("%w: Transact: %d writes, want 1 to %d", ErrInvalidArgument, len(writes), MaxTxWrites)
	}
	items := make([]types.TransactWriteItem, len(writes))
	res := make([]string, len(writes))
	for i, wr := range writes {
		if wr.Table == nil || nilcheck.IsNil(wr.Table.c) {
			return fmt.Errorf("%w: Transact: write %d: nil or zero Table", ErrInvalidArgument, i)
		}
		r, err := wr.Table.check(ctx, wr.Key, wr.Token)
		if err != nil {
			return fmt.Errorf("dynamofence: Transact: write %d: %w", i, err)
		}
		in, err := wr.Table.updateInput(wr.Key, wr.Token, wr.Update)
		if err != nil {
			return fmt.Errorf("dynamofence: Transact: write %d: %w", i, err)
		}
		res[i] = r
		items[i] = types.TransactWriteItem{Update: &types.Update{
			TableName: in.TableName, Key: in.Key, UpdateExpression: in.UpdateExpression,
			ConditionExpression: in.ConditionExpression, ExpressionAttributeNames: in.ExpressionAttributeNames,
			ExpressionAttributeValues:           in.ExpressionAttributeValues,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}}
	}
	t := writes[0].Table
	ctx, w := t.tel.Op(opTransact).Start(ctx, writes[0].Token)
	if w.Recording() {
		w.SetResource(strings.Join(res, " "))
	}
	_, err := t.c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items}, sendOnce)
	err = txResult(writes, res, err)
	w.End(err)
	return err
}

// txResult is the error of a Transact's reply.
func txResult(writes []TxWrite, res []string, err error) error {
	if err == nil {
		return nil
	}
	var tc *types.TransactionCanceledException
	if errors.As(err, &tc) {
		for i, r := range tc.CancellationReasons {
			if i < len(writes) && aws.ToString(r.Code) == "ConditionalCheckFailed" {
				return writes[i].Table.stale(res[i], writes[i].Token, r.Item)
			}
		}
		return fmt.Errorf("dynamofence: transaction cancelled, nothing written: %w", err)
	}
	return writeError(opTransact, strings.Join(res, " "), writes[0].Token, err)
}

// updateInput builds the fenced UpdateItem of key: update, and the token
// attribute set to token, if it holds no higher one.
func (t *Table) updateInput(key map[string]types.AttributeValue, token fence.Token, update expression.UpdateBuilder) (*dynamodb.UpdateItemInput, error) {
	if topLevel(update)[t.attr] {
		return nil, fmt.Errorf("%w: the update names the token attribute %q", ErrInvalidArgument, t.attr)
	}
	tokenName := expression.NameNoDotSplit(t.attr) // a name with a dot is one attribute
	value := expression.Value(tokentext.Pad(token))
	cond := expression.Or(expression.AttributeNotExists(tokenName), tokenName.LessThanEqual(value))
	expr, err := expression.NewBuilder().
		WithUpdate(update.Set(tokenName, value)).
		WithCondition(cond).
		Build()
	if err != nil {
		return nil, fmt.Errorf("%w: the update: %w", ErrInvalidArgument, err)
	}
	return &dynamodb.UpdateItemInput{
		TableName: aws.String(t.name), Key: key,
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	}, nil
}

// topLevel returns the top-level attributes update writes: the first
// element of each document path it names ("profile" of profile.fence), so
// that an update of a map's field named like the token attribute is not
// taken for one of the token attribute. (None for an empty update.)
func topLevel(update expression.UpdateBuilder) map[string]bool {
	expr, err := expression.NewBuilder().WithUpdate(update).Build()
	if err != nil {
		return nil // empty, or invalid: Build reports it with the token's Set
	}
	names, top := expr.Names(), map[string]bool{}
	// A path in the built expression is #alias, then .#alias or [n] for
	// each further element; an alias that follows a dot is no top level.
	for _, m := range pathRe.FindAllStringSubmatchIndex(*expr.Update(), -1) {
		alias := (*expr.Update())[m[2]:m[3]]
		if m[0] > 0 && (*expr.Update())[m[0]-1] == '.' {
			continue
		}
		top[names[alias]] = true
	}
	return top
}

// pathRe matches an alias of an expression's names.
var pathRe = regexp.MustCompile(`(#[0-9A-Za-z_]+)`)

// result is the error of a Table's UpdateItem.
func (t *Table) result(what, res string, token fence.Token, err error) error {
	if err == nil {
		return nil
	}
	var cf *types.ConditionalCheckFailedException
	if errors.As(err, &cf) {
		return t.stale(res, token, cf.Item)
	}
	return writeError(what, res, token, err)
}

// stale is the refusal of token by an item's token attribute.
func (t *Table) stale(res string, token fence.Token, item map[string]types.AttributeValue) error {
	current, err := tokenAttr(res, t.attr, item)
	if err != nil {
		return err
	}
	return &fence.StaleError{Resource: res, Token: token, Current: current}
}

// check validates a call before any I/O, and returns the resource name of
// key: the table, then the key's attributes.
func (t *Table) check(ctx context.Context, key map[string]types.AttributeValue, token fence.Token) (string, error) {
	switch {
	case t == nil || nilcheck.IsNil(t.c):
		return "", fmt.Errorf("%w: a nil or zero Table; create one with NewTable", ErrInvalidArgument)
	case len(key) == 0:
		return "", fmt.Errorf("%w: empty item key", fence.ErrInvalidKey)
	case token <= 0:
		return "", fmt.Errorf("%w: token %d", fence.ErrInvalidToken, token)
	case ctx == nil:
		return "", fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if _, ok := key[t.attr]; ok {
		return "", fmt.Errorf("%w: the key names the token attribute %q", fence.ErrInvalidKey, t.attr)
	}
	for k, v := range key {
		if nilcheck.IsNil(v) {
			return "", fmt.Errorf("%w: key attribute %q is nil", fence.ErrInvalidKey, k)
		}
	}
	parts := []string{t.name}
	for _, k := range slices.Sorted(maps.Keys(key)) {
		parts = append(parts, k+"="+attrString(key[k]))
	}
	return strings.Join(parts, "/"), ctx.Err()
}

// attrString shows a key attribute's value.
func attrString(v types.AttributeValue) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		if v != nil {
			return v.Value
		}
	case *types.AttributeValueMemberN:
		if v != nil {
			return v.Value
		}
	case *types.AttributeValueMemberB:
		if v != nil {
			return fmt.Sprintf("%x", v.Value)
		}
	}
	return fmt.Sprintf("%T", v)
}
