package dynamofence_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// noItem strips the Item from every ConditionalCheckFailed reply, as a
// server without ReturnValuesOnConditionCheckFailure would send it.
type noItem struct{ next http.RoundTripper }

func (n noItem) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := n.next.RoundTrip(r)
	if err != nil || resp.StatusCode != 400 {
		return resp, err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if bytes.Contains(b, []byte("ConditionalCheckFailed")) {
		b = []byte(`{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"The conditional request failed"}`)
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	resp.ContentLength = int64(len(b))
	resp.Header.Del("Content-Length")
	resp.Header.Del("X-Amz-Crc32")
	return resp, nil
}

func TestReviewNoItemOnConditionFailure(t *testing.T) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	s := mustNew(t, client(t, func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: noItem{tr}} }))
	other := newStore(t)
	k := fencewant.Prefix(t) + "k"
	fencewant.Put(t, s, k, 5, "a")
	fencewant.Put(t, other, k, 9, "b")
	fencewant.Stale(t, s.Put(t.Context(), k, 7, []byte("x")), 7, 0)
	k2 := fencewant.Prefix(t) + "k2"
	fencewant.Put(t, s, k2, 5, "a")
	calls := 0
	err := s.Update(t.Context(), k2, 7, func(fence.Record) ([]byte, error) {
		calls++
		if calls == 1 {
			fencewant.Put(t, other, k2, 9, "b")
		}
		return []byte("u"), nil
	})
	fencewant.Stale(t, err, 7, 9) // the floor read back
	if calls != 1 {
		t.Fatalf("fn called %d times", calls)
	}
	fencewant.Record(t, other, k2, 9, "b")
}
