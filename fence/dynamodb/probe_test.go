package dynamofence_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	dynamofence "github.com/fencelock/fencelock/fence/dynamodb"
)

// dropConditions is a proxy that ignores conditions: it strips
// ConditionExpression from every request, as a server that does not
// honour them would.
type dropConditions struct{ next http.RoundTripper }

func (d dropConditions) RoundTrip(r *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if json.Unmarshal(body, &m) == nil {
		delete(m, "ConditionExpression")
		body, _ = json.Marshal(m)
	}
	r2 := r.Clone(r.Context())
	r2.Body, r2.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	return d.next.RoundTrip(r2)
}

// CheckConditions passes on the test server and catches one that ignores
// conditions.
func TestCheckConditions(t *testing.T) {
	if err := newStore(t).CheckConditions(t.Context()); err != nil {
		t.Fatalf("CheckConditions on the test server: %v", err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	c := client(t, func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: dropConditions{tr}} })
	if err := mustNew(t, c).CheckConditions(t.Context()); !errors.Is(err, dynamofence.ErrConditionsUnsupported) {
		t.Fatalf("CheckConditions through a proxy that drops conditions: got %v, want ErrConditionsUnsupported", err)
	}
}
