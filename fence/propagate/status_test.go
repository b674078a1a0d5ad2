package propagate_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/propagate"
)

// A gateway calls a fenced service B; B refuses the call as stale, and the
// gateway copies B's response headers into its own answer, as forwarding
// code often does, but then takes the write another way (queues it) and
// answers 202 Accepted. The client must not read that as fence.ErrStale
// ("changed nothing"): the status says the write was taken, the header
// says it was refused, so the outcome is unknown. The control is B's own
// 409, which is fence.ErrStale.
func TestCheckResponseStatusDisagrees(t *testing.T) {
	b, err := propagate.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		propagate.WriteStale(w, &fence.StaleError{Resource: "acct-7", Token: 5, Current: 9})
	}))
	if err != nil {
		t.Fatal(err)
	}
	srvB := httptest.NewServer(b)
	defer srvB.Close()
	toB := &http.Client{Transport: &propagate.Transport{}}
	gateway, err := propagate.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, srvB.URL, nil)
		resp, err := toB.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(http.StatusAccepted) // not B's refusal: the gateway queued the write
		fmt.Fprintln(w, "queued")
	}))
	if err != nil {
		t.Fatal(err)
	}
	srvA := httptest.NewServer(gateway)
	defer srvA.Close()
	client := &http.Client{Transport: &propagate.Transport{}}
	ctx := withFencing(t, propagate.Fencing{Name: "acct-7", Token: 5})
	tests := []struct {
		name      string
		url       string
		wantStale bool
	}{
		{"gateway answers 202 with B's header", srvA.URL, false},
		{"control: B's own 409", srvB.URL, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, _ := get(t, ctx, client, tt.url)
			err := propagate.CheckResponse(resp)
			if stale := errors.Is(err, fence.ErrStale); stale != tt.wantStale {
				t.Fatalf("CheckResponse of %s: got %v, want ErrStale %v", resp.Status, err, tt.wantStale)
			}
			if !tt.wantStale && !errors.Is(err, fence.ErrUnknownOutcome) {
				t.Fatalf("CheckResponse of %s: got %v, want fence.ErrUnknownOutcome", resp.Status, err)
			}
		})
	}
}
