package dynamofence_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"

	"github.com/fencelock/fencelock/fence"
	dynamofence "github.com/fencelock/fencelock/fence/dynamodb"
	"github.com/fencelock/fencelock/fence/outbox"
)

// denying is a client whose credentials IAM refuses the outbox's reads
// and writes, as DynamoDB answers them (no test server enforces IAM).
type denying struct{ *dynamodb.Client }

var accessDenied = &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "User: arn:aws:iam::1:user/dispatcher is not authorized to perform: dynamodb:Query", Fault: smithy.FaultClient}

func (denying) Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return nil, accessDenied
}

func (denying) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return nil, accessDenied
}

// TestOutboxNotPermitted: DynamoDB's AccessDeniedException matches
// outbox.ErrNotPermitted, so a dispatcher without the grants ends at its
// start, saying why; control: with the grants, it runs until its context
// ends.
func TestOutboxNotPermitted(t *testing.T) {
	_, granted := newOutbox(t) // the tables, and the control's outbox
	s, err := dynamofence.New(denying{client(t)}, storeTable)
	if err != nil {
		t.Fatal(err)
	}
	o, err := dynamofence.NewOutbox(s, granted.Table(), dynamofence.WithOutboxPrefix(granted.Prefix()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Pending(t.Context(), outbox.All, nil, 10); !errors.Is(err, outbox.ErrNotPermitted) {
		t.Errorf("Pending: got %v, want an error matching outbox.ErrNotPermitted", err)
	}
	err = o.Settle(t.Context(), fence.Claim{Resource: "dispatcher", Token: 1}, nil)
	var ae smithy.APIError
	if !errors.Is(err, outbox.ErrNotPermitted) || !errors.As(err, &ae) {
		t.Errorf("Settle: got %v, want an error matching outbox.ErrNotPermitted with DynamoDB's error kept", err)
	}
	run := func(o *dynamofence.Outbox) error {
		d, err := outbox.NewDispatcher(o, outbox.SenderFunc(func(context.Context, outbox.Effect) error { return nil }), outbox.WithPollInterval(20*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		return d.Run(ctx, held{token: 1}, outbox.All)
	}
	if err := run(o); !errors.Is(err, outbox.ErrNotPermitted) {
		t.Errorf("Run without grants: got %v, want an error matching outbox.ErrNotPermitted", err)
	}
	if err := run(granted); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Run with grants (control): got %v, want it to run until its context ends", err)
	}
}
