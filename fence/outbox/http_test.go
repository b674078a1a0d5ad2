package outbox_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/fence/propagate"
)

func TestHTTPSender(t *testing.T) {
	var got http.Header
	status, extra := http.StatusOK, http.Header{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		for k, v := range extra {
			w.Header()[k] = v
		}
		w.WriteHeader(status)
		w.Write([]byte("answer"))
	}))
	defer srv.Close()
	s, err := outbox.NewHTTPSender(outbox.WithHTTPClient(srv.Client()), outbox.WithContentType("application/json"))
	if err != nil {
		t.Fatal(err)
	}
	e := outbox.Effect{Resource: "order-7", Token: 42, Seq: 3, Destination: srv.URL + "/mail", Payload: []byte(`{}`)}
	if err := s.Send(t.Context(), e); err != nil {
		t.Fatalf("Send: got %v, want nil", err)
	}
	f, err := propagate.Parse(got.Get(propagate.Header))
	if got.Get(outbox.IdempotencyHeader) != e.Key() || err != nil || f.Name != "order-7" || f.Token != 42 || got.Get("Content-Type") != "application/json" {
		t.Fatalf("headers: got %v, want Idempotency-Key %s and Fencing-Token order-7/42", got, e.Key())
	}
	for _, c := range []struct {
		status    int
		header    http.Header
		permanent bool
	}{
		{http.StatusBadRequest, nil, true},
		{http.StatusNotFound, nil, true},
		{http.StatusConflict, http.Header{propagate.RefusedHeader: {"stale"}}, true},
		{http.StatusConflict, http.Header{"Retry-After": {"1"}}, false},
		{http.StatusTooManyRequests, nil, false},
		{http.StatusServiceUnavailable, nil, false},
	} {
		status, extra = c.status, c.header
		err := s.Send(t.Context(), e)
		if err == nil || outbox.IsPermanent(err) != c.permanent {
			t.Errorf("answer %d %v: got %v, want permanent %v", c.status, c.header, err, c.permanent)
		}
	}
	for _, dest := range []string{"mailto:x@example.com", "not a url", "http://"} {
		e.Destination = dest
		if err := s.Send(t.Context(), e); !outbox.IsPermanent(err) {
			t.Errorf("destination %q: got %v, want a permanent error", dest, err)
		}
	}
	if _, err := outbox.NewHTTPSender(outbox.WithHTTPClient(nil)); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Errorf("nil client: got %v, want fence.ErrInvalidArgument", err)
	}
	if _, err := outbox.NewHTTPSender(outbox.WithMethod("")); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Errorf("empty method: got %v, want fence.ErrInvalidArgument", err)
	}
}
