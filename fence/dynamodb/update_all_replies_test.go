package dynamofence_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fencelock/fencelock/fence"
)

// isTransact reports whether r is a TransactWriteItems request.
func isTransact(r *http.Request) bool {
	return strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".TransactWriteItems")
}

// inProgress is a RoundTripper that delivers each TransactWriteItems to the
// server and answers the caller as DynamoDB answers a second copy of a
// request whose first copy (same client request token) is still running:
// 400 TransactionInProgressException. That is what a proxy or load
// balancer that resends a request whose connection broke hands back.
type inProgress struct{ next http.RoundTripper }

func (p inProgress) RoundTrip(r *http.Request) (*http.Response, error) {
	if !isTransact(r) {
		return p.next.RoundTrip(r)
	}
	resp, err := p.next.RoundTrip(r) // the first copy: it runs, and lands
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	body := `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionInProgressException","Message":"Transaction is ongoing for the transaction token"}`
	return &http.Response{
		StatusCode: 400, Status: "400 Bad Request", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}, "X-Amzn-Requestid": {"review"}},
		Body:   io.NopCloser(bytes.NewReader([]byte(body))), ContentLength: int64(len(body)), Request: r,
	}, nil
}

// TransactionInProgressException is DynamoDB's answer to a request whose
// client request token belongs to a transaction that is still running:
// another copy of this very write is in flight and may commit. It is an
// unknown outcome (or, once read back, success), not a refusal: here the
// write landed.
func TestUpdateAllTransactionInProgressIsUnknown(t *testing.T) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	s := mustNew(t, client(t, func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: inProgress{tr}} }))
	a, b := twoAccounts(t, s)
	err := s.UpdateAll(t.Context(), both(a, b, 7), move(a, b, 10, nil))
	wantRecord(t, newStore(t), a, 7, "90") // the write landed
	wantRecord(t, newStore(t), b, 7, "110")
	if err != nil && !isUnknown(err) {
		t.Fatalf("UpdateAll answered TransactionInProgressException for a write that landed: got %v, want nil or an error matching fence.ErrUnknownOutcome", err)
	}
}

func isUnknown(err error) bool {
	var u *fence.UnknownOutcomeError
	return err != nil && errors.As(err, &u)
}
