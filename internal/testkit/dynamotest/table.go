package dynamotest

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fencelock/fencelock/internal/testkit/poll"
)

// CreateTable creates the table in describes, unless it exists, and waits
// until DescribeTable reports it ACTIVE: DynamoDB and dynalite keep a new
// table CREATING for a moment, refusing its reads and writes
// (ResourceNotFoundException); minidyn's is usable at once, and reports
// no status.
// It fails t on any other error.
func CreateTable(t testing.TB, c *dynamodb.Client, in *dynamodb.CreateTableInput) {
	t.Helper()
	_, err := c.CreateTable(t.Context(), in)
	var exists *types.ResourceInUseException
	if err != nil && !errors.As(err, &exists) {
		t.Fatalf("dynamotest: creating table %s: %v", aws.ToString(in.TableName), err)
	}
	poll.Until(t, "table "+aws.ToString(in.TableName)+" ACTIVE", func() bool {
		out, err := c.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: in.TableName})
		if err != nil {
			t.Fatalf("dynamotest: describing table %s: %v", aws.ToString(in.TableName), err)
		}
		// minidyn reports no status: its tables are usable at once.
		return out.Table.TableStatus == types.TableStatusActive || out.Table.TableStatus == ""
	})
}
