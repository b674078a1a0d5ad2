package dynamofence_test

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fencelock/fencelock/fence"
	dynamofence "github.com/fencelock/fencelock/fence/dynamodb"
)

// dup is a transport that, when armed, sends the next request twice (as a
// proxy or load balancer that retries an upstream whose reply it lost
// would) and gives the client the second copy's reply.
type dup struct {
	next  http.RoundTripper
	armed atomic.Bool
}

func (d *dup) RoundTrip(r *http.Request) (*http.Response, error) {
	if !d.armed.Swap(false) {
		return d.next.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	r.Body.Close()
	send := func() (*http.Response, error) {
		c := r.Clone(r.Context())
		c.Body = io.NopCloser(bytes.NewReader(body))
		return d.next.RoundTrip(c)
	}
	first, err := send()
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, first.Body)
	first.Body.Close()
	return send()
}

func dupClient(t *testing.T, d *dup) *dynamodb.Client {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	d.next = tr
	return client(t, func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: d} })
}

// Update's write delivered twice (its first copy lands, the client gets the
// second copy's reply, a failed condition on the version the first copy
// moved): Update reads again and applies fn a second time, though the doc
// says "the item holds the record read or fn's, once".
func TestReviewUpdateDuplicatedWriteAppliesFnTwice(t *testing.T) {
	var d dup
	s := mustNew(t, dupClient(t, &d))
	k := prefix(t) + "counter"
	mustPut(t, s, k, 5, "0")
	var calls int
	var once sync.Once
	err := s.Update(t.Context(), k, 5, func(old fence.Record) ([]byte, error) {
		calls++
		once.Do(func() { d.armed.Store(true) }) // the next request is this attempt's write
		n, _ := strconv.Atoi(string(old.Value))
		return []byte(strconv.Itoa(n + 1)), nil
	})
	r, gerr := s.Get(t.Context(), k)
	if gerr != nil {
		t.Fatal(gerr)
	}
	if string(r.Value) != "1" {
		t.Fatalf("one Update of +1 (err %v, fn called %d times): counter is %q, want \"1\" (or an unknown outcome)", err, calls, r.Value)
	}
}

// A key attribute given as a typed nil pointer panics in Table.Update's
// argument check (attrString), before any I/O.
func TestReviewTableTypedNilKeyPanics(t *testing.T) {
	tb := accounts(t, client(t))
	key := map[string]types.AttributeValue{"tenant": (*types.AttributeValueMemberS)(nil), "id": &types.AttributeValueMemberN{Value: "1"}}
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("Table.Update with a typed-nil key attribute panicked: %v", p)
		}
	}()
	err := tb.Update(t.Context(), key, 5, setBalance(1))
	t.Logf("err: %v", err)
}

// An update of a nested path of another attribute whose last element
// happens to share the token attribute's name ("profile.fence") is not the
// token attribute, yet Table.Update refuses it.
func TestReviewTableNestedNameFalseRefusal(t *testing.T) {
	c := client(t)
	tb := accounts(t, c)
	k := account(t, 7)
	if err := tb.Update(t.Context(), k, 5, expression.Set(expression.Name("profile"), expression.Value(map[string]string{"fence": "garden"}))); err != nil {
		t.Fatal(err)
	}
	err := tb.Update(t.Context(), k, 5, expression.Set(expression.Name("profile.fence"), expression.Value("picket")))
	if err != nil {
		t.Fatalf("update of profile.fence (token attribute is top-level \"fence\"): got %v, want nil", err)
	}
}

// A token attribute whose name contains a dot (a legal DynamoDB attribute
// name) is taken by the expression builder as a nested path: the first
// Update of an item fails.
func TestReviewTableDottedTokenAttribute(t *testing.T) {
	c := client(t)
	accounts(t, c) // creates the table
	tb, err := dynamofence.NewTable(c, "fencelock_test_accounts", "fence.v1")
	if err != nil {
		t.Fatal(err)
	}
	k := account(t, 8)
	if err := tb.Update(t.Context(), k, 5, setBalance(1)); err != nil {
		t.Fatalf("first Update with token attribute %q: %v", tb.TokenAttribute(), err)
	}
	out, err := c.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String("fencelock_test_accounts"), Key: k, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := out.Item["fence.v1"]; !ok {
		t.Fatalf("no attribute named %q on the item: %v", "fence.v1", out.Item)
	}
}

// Methods of a nil Store or Table that panic.
func TestReviewNilReceiverAccessors(t *testing.T) {
	for name, f := range map[string]func(){
		"(*Store)(nil).Table":          func() { _ = (*dynamofence.Store)(nil).Table() },
		"(*Table)(nil).Name":           func() { _ = (*dynamofence.Table)(nil).Name() },
		"(*Table)(nil).TokenAttribute": func() { _ = (*dynamofence.Table)(nil).TokenAttribute() },
	} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s panicked: %v", name, p)
				}
			}()
			f()
		}()
	}
}
