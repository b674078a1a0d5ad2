package dynamofence_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fencelock/fencelock/fence"
	dynamofence "github.com/fencelock/fencelock/fence/dynamodb"
	"github.com/fencelock/fencelock/internal/testkit/childtest"
	"github.com/fencelock/fencelock/internal/testkit/dynamotest"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// TestOnDynalite runs this package's tests again, in a child process,
// against dynalite: a second DynamoDB implementation, which enforces
// DynamoDB's validation and 400 KB item limit, keeps a new table CREATING
// for a moment, and returns no item with a failed condition (it found
// issue 51's double apply). Every test must pass there, or skip through
// dynamotest's Need, naming what dynalite lacks (dynamotest.Lacks, the
// one list); any other skip fails this test, except the long tier's under
// -short. Left out: the examples (they print what transactions write),
// and TestConformanceNarrowClient (the suite again, through a client of
// another shape: nothing of the server's).
func TestOnDynalite(t *testing.T) {
	testenv.Long(t, "the package's tests again, against dynalite (a node process): about 5 s")
	args := []string{"-test.count=1", "-test.v", "-test.skip=^(TestOnDynalite|TestConformanceNarrowClient|Example.*)$", "-test.timeout=5m"}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	out, err := childtest.Rerun(t.Context(), []string{dynamotest.EnvServer + "=dynalite", dynamotest.EnvEndpoint + "="}, args...)
	if strings.Contains(out, dynamotest.ErrNoDynalite.Error()) {
		testenv.Unavailable(t, "dynalite is not installed", dynamotest.HowToEnableDynalite)
	}
	if err != nil {
		t.Fatalf("the package's tests on dynalite: %v\n%s", err, out)
	}
	n := 0
	for skip := range unlisted(out) {
		t.Errorf("on dynalite, %s skipped for a reason dynamotest's Lacks does not list: %s", skip[0], skip[1])
		n++
	}
	t.Logf("on dynalite: %d tests passed, %d left out for what it lacks", strings.Count(out, "--- PASS"), strings.Count(out, "--- SKIP")-n)
}

// unlisted yields each test of out (go test -v's output) that skipped
// other than through dynamotest's Need or the long tier, with the reason:
// what it logged between its "=== RUN" and the next test's.
func unlisted(out string) func(yield func([2]string) bool) {
	return func(yield func([2]string) bool) {
		for line := range strings.Lines(out) {
			name, ok := strings.CutPrefix(strings.TrimSpace(line), "--- SKIP: ")
			if !ok {
				continue
			}
			name, _, _ = strings.Cut(name, " (")
			why := logged(out, name)
			if strings.Contains(why, dynamotest.SkipMark) || strings.Contains(why, "long tier, skipped under -short") {
				continue
			}
			if !yield([2]string{name, why}) {
				return
			}
		}
	}
}

// logged returns what test name logged in out, go test -v's output of
// tests that run one at a time.
func logged(out, name string) string {
	_, after, ok := strings.Cut(out, "=== RUN   "+name+"\n")
	if !ok {
		return ""
	}
	var b strings.Builder
	for line := range strings.Lines(after) {
		if strings.HasPrefix(strings.TrimSpace(line), "===") || strings.HasPrefix(strings.TrimSpace(line), "---") {
			break
		}
		b.WriteString(line)
	}
	return strings.TrimSpace(b.String())
}

// Each Lack the server is listed with is real, and each it is not listed
// with is not: the list in dynamotest stays true of minidyn and dynalite.
func TestServerLacks(t *testing.T) {
	srv := dynamotest.New(t)
	s := newStore(t)
	t.Run("transactions", func(t *testing.T) {
		k := prefix(t) + "k"
		err := s.UpdateAll(t.Context(), []fence.Claim{{Resource: k, Token: 1}},
			func(map[string]fence.Record) (map[string][]byte, error) {
				return map[string][]byte{k: []byte("v")}, nil
			})
		lacks := err != nil && strings.Contains(err.Error(), "UnknownOperationException")
		if lacks != srv.Lacks(&dynamotest.NoTransactions) {
			t.Fatalf("%s listed as lacking transactions: %v; UpdateAll got %v", srv.Name(), !lacks, err)
		}
		if lacks && errors.Is(err, fence.ErrUnknownOutcome) {
			t.Fatalf("UpdateAll refused for want of transactions: got %v, want a definite refusal", err)
		}
	})
	t.Run("item on a failed condition", func(t *testing.T) {
		k := prefix(t) + "k"
		mustPut(t, s, k, 5, "v")
		_, err := client(t).UpdateItem(t.Context(), &dynamodb.UpdateItemInput{
			TableName: aws.String(storeTable), Key: map[string]types.AttributeValue{dynamofence.DefaultKeyAttribute: &types.AttributeValueMemberS{Value: k}},
			UpdateExpression: aws.String("SET x = :x"), ConditionExpression: aws.String("attribute_not_exists(fence_floor)"),
			ExpressionAttributeValues:           map[string]types.AttributeValue{":x": &types.AttributeValueMemberS{Value: "x"}},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		var cf *types.ConditionalCheckFailedException
		if !errors.As(err, &cf) {
			t.Fatalf("UpdateItem on a condition that fails: got %v, want ConditionalCheckFailedException", err)
		}
		if lacks := len(cf.Item) == 0; lacks != srv.Lacks(&dynamotest.NoItemOnConditionFailure) {
			t.Fatalf("%s listed as returning no item with a failed condition: %v; got %d attributes", srv.Name(), !lacks, len(cf.Item))
		}
	})
}
