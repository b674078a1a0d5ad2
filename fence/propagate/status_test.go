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

// A Fencing-Token set by hand under a key Go does not canonicalize (the
// map written directly, as code ported from HTTP/2's lower-case names
// does) is replaced by the context's like any other: the server sees one
// token, the context's. Kept, it would go out as a second header, and the
// server would refuse the call as invalid. The control sets it the usual
// way.
func TestTransportReplacesHandSetHeaderOfAnyCase(t *testing.T) {
	srv, _ := echoServer(t)
	client := &http.Client{Transport: &propagate.Transport{}}
	for _, key := range []string{"fencing-token", "FENCING-TOKEN", propagate.Header} {
		t.Run(key, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(withFencing(t, propagate.Fencing{Name: "acct-7", Token: 812}), http.MethodGet, srv.URL, nil)
			req.Header[key] = []string{`name="acct-7"; token=3`}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK || string(b) != "acct-7 812" {
				t.Fatalf("got %s %q, want 200 \"acct-7 812\"", resp.Status, b)
			}
			if got := req.Header[key]; len(got) != 1 {
				t.Fatalf("caller's request after RoundTrip: got %q under %s, want it kept", got, key)
			}
		})
	}
}
