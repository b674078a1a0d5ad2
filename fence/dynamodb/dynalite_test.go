package dynamofence_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fencelock/fencelock/fence"
	dynamofence "github.com/fencelock/fencelock/fence/dynamodb"
	"github.com/fencelock/fencelock/internal/testkit/childtest"
	"github.com/fencelock/fencelock/internal/testkit/dynamotest"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
	"github.com/fencelock/fencelock/internal/testkit/trypage"
)

// TestOnDynalite runs this package's tests again, in a child process,
// against dynalite: a second DynamoDB implementation, which enforces
// DynamoDB's validation and 400 KB item limit, keeps a new table CREATING
// for a moment, and returns no item with a failed condition (it found
// issue 51's double apply). Every test must pass there, or skip through
// dynamotest's Need, naming what dynalite lacks (dynamotest.Lacks, the
// one list); any other skip fails this test, except the long tier's under
// -short. Left out: the examples (they print what transactions write),
// TestPageTryIt (it starts a dynalite of its own),
// TestConformanceNarrowClient (the suite again, through a client of
// another shape: nothing of the server's) and TestLargeReplyNotLost (the
// race it guards against needs a reply that comes within microseconds of
// the request's last byte, a server in the process: on dynalite its
// control sees none in 5,000 claims).
func TestOnDynalite(t *testing.T) {
	testenv.Long(t, "the package's tests again, against dynalite (a node process): about 5 s")
	args := []string{"-test.count=1", "-test.v", "-test.skip=^(TestOnDynalite|TestPageTryIt|TestConformanceNarrowClient|TestLargeReplyNotLost|Example.*)$", "-test.timeout=5m"}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	if raceEnabled {
		// The race detector makes the whole run take 20 s, and finds
		// nothing of the server's: the library's races are the same on
		// minidyn. The race build runs the suite and the safety tests.
		args = append(args, "-test.run=^(TestConformance|TestUpdateDeliveredTwiceAppliesOnce|TestReviewNoItemOnConditionFailure|TestTooLarge|TestServerLacks)$")
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

// unlisted finds a skip that is neither Need's nor the long tier's, and
// only that one (the control of TestOnDynalite's check).
func TestUnlistedSkips(t *testing.T) {
	out := "=== RUN   TestA\n    a_test.go:1: " + dynamotest.SkipMark + " (dynalite): no TransactWriteItems\n--- SKIP: TestA (0.00s)\n" +
		"=== RUN   TestB\n    b_test.go:1: long tier, skipped under -short: x\n--- SKIP: TestB (0.00s)\n" +
		"=== RUN   TestC\n=== RUN   TestC/sub\n    c_test.go:1: no server\n--- PASS: TestC (0.00s)\n    --- SKIP: TestC/sub (0.00s)\n"
	var got []string
	for skip := range unlisted(out) {
		got = append(got, skip[0]+": "+skip[1])
	}
	if want := "TestC/sub: c_test.go:1: no server"; len(got) != 1 || got[0] != want {
		t.Fatalf("unlisted: got %q, want [%q]", got, want)
	}
}

// Each Lack the server is listed with is real, and each it is not listed
// with is not: the list in dynamotest stays true of minidyn and dynalite.
func TestServerLacks(t *testing.T) {
	srv := dynamotest.New(t)
	s := newStore(t)
	t.Run("transactions", func(t *testing.T) {
		k := fencewant.Prefix(t) + "k"
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
		k := fencewant.Prefix(t) + "k"
		fencewant.Put(t, s, k, 5, "v")
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

// docs/dynamodb.md's "Try it on your machine" works as the page says: its
// shell line starts dynalite (on a free port rather than 8000), and the
// page's client, newClient, creates a Store's table there, writes with a
// token, and sees an older token refused.
func TestPageTryIt(t *testing.T) {
	testenv.Long(t, "starts dynalite (a node process) as docs/dynamodb.md does")
	if _, _, err := dynamotest.FindDynalite(); err != nil {
		testenv.Unavailable(t, err.Error(), dynamotest.HowToEnableDynalite)
	}
	var ddb *dynamodb.Client
	trypage.Start(t, trypage.Run{
		Line: trypage.Line(t, "docs/dynamodb.md", "dynalite"),
		Port: "8000",
		Ready: func(ctx context.Context, port int) error {
			if ddb == nil {
				ddb = newClient("http://127.0.0.1:" + strconv.Itoa(port))
			}
			_, err := ddb.ListTables(ctx, &dynamodb.ListTablesInput{})
			return err
		},
	})
	if err := dynamofence.CreateStoreTable(t.Context(), ddb, "fences", dynamofence.DefaultKeyAttribute); err != nil {
		t.Fatal(err)
	}
	s, err := dynamofence.New(ddb, "fences")
	if err != nil {
		t.Fatal(err)
	}
	fencewant.Put(t, s, "k", 34, "b")
	fencewant.Stale(t, s.Put(t.Context(), "k", 33, []byte("a")), 33, 0) // dynalite returns no floor
	fencewant.Record(t, s, "k", 34, "b")
}
