package dynamofence

import (
	"errors"
	"fmt"

	"github.com/aws/smithy-go"

	"github.com/fencelock/fencelock/fence/outbox"
)

// denied makes DynamoDB's refusal of the caller's credentials
// (AccessDeniedException: IAM grants no dynamodb:Query, TransactWriteItems
// or UpdateItem on the outbox table) match [outbox.ErrNotPermitted], so
// that a dispatcher without the grants ends at its start and says why,
// DynamoDB's words kept, instead of retrying forever. Any other error is
// returned as it is.
func denied(err error) error {
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "AccessDeniedException" {
		return fmt.Errorf("%w: %w", outbox.ErrNotPermitted, err)
	}
	return err
}
