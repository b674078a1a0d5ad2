package dynamofence_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fencelock/fencelock/fence"
	dynamofence "github.com/fencelock/fencelock/fence/dynamodb"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
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

// dupClient returns a client whose requests go through d, then through
// noItem when bare (a server that returns no item on a failed condition).
func dupClient(t *testing.T, d *dup, bare bool) *dynamodb.Client {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	d.next = tr
	if bare {
		d.next = noItem{tr}
	}
	return client(t, func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: d} })
}

// Update's write delivered twice (a proxy that resends: its first copy
// lands, the client gets the second copy's reply, a failed condition on
// the version the first copy moved) applies fn once, whether the server
// returns the item with the refusal (minidyn, DynamoDB) or not (dynalite,
// and minidyn through noItem): without the item, Update reads it back to
// find its own write's id. Without that read it applied fn a second time
// (issue 51: the counter at 2 on dynalite).
func TestUpdateDeliveredTwiceAppliesOnce(t *testing.T) {
	for _, tt := range []struct {
		name string
		bare bool
	}{{"item returned", false}, {"no item returned", true}} {
		t.Run(tt.name, func(t *testing.T) {
			var d dup
			s := mustNew(t, dupClient(t, &d, tt.bare))
			k := fencewant.Prefix(t) + "counter"
			fencewant.Put(t, s, k, 5, "0")
			var calls int
			err := s.Update(t.Context(), k, 5, func(old fence.Record) ([]byte, error) {
				calls++
				if calls == 1 {
					d.armed.Store(true) // the next request is this attempt's write
				}
				n, _ := strconv.Atoi(string(old.Value))
				return []byte(strconv.Itoa(n + 1)), nil
			})
			if err != nil {
				t.Fatalf("Update delivered twice: got %v, want nil", err)
			}
			if calls != 1 {
				t.Errorf("fn called %d times, want 1", calls)
			}
			fencewant.Record(t, s, k, 5, "1")
		})
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

// failGets fails every GetItem while on, as a connection that drops each
// read would; other requests pass.
type failGets struct {
	next http.RoundTripper
	on   *atomic.Bool
}

func (f failGets) RoundTrip(r *http.Request) (*http.Response, error) {
	if f.on.Load() && r.Header.Get("X-Amz-Target") == "DynamoDB_20120810.GetItem" {
		return nil, errors.New("connection reset (test)")
	}
	return f.next.RoundTrip(r)
}

// The same twice-delivered write on a server that returns no item, whose
// read back then fails too: Update cannot tell its own landed copy from a
// change, so it says it cannot tell (ErrUnknownOutcome), never runs fn
// again, and never calls the write refused; the first copy's value stands.
func TestUpdateDeliveredTwiceReadBackLost(t *testing.T) {
	var d dup
	var gets atomic.Bool
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	d.next = failGets{noItem{tr}, &gets}
	s := mustNew(t, client(t, func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: &d} }))
	k := fencewant.Prefix(t) + "counter"
	fencewant.Put(t, s, k, 5, "0")
	var calls int
	err := s.Update(t.Context(), k, 5, func(old fence.Record) ([]byte, error) {
		calls++
		d.armed.Store(true) // the next request is this attempt's write
		gets.Store(true)    // and the read back after its refusal fails
		n, _ := strconv.Atoi(string(old.Value))
		return []byte(strconv.Itoa(n + 1)), nil
	})
	gets.Store(false)
	if !errors.Is(err, fence.ErrUnknownOutcome) || errors.Is(err, fence.ErrStale) {
		t.Fatalf("Update delivered twice, read back lost: got %v, want ErrUnknownOutcome", err)
	}
	if calls != 1 {
		t.Errorf("fn called %d times, want 1", calls)
	}
	fencewant.Record(t, s, k, 5, "1")
}
