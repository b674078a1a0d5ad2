package propagate_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/propagate"
	"github.com/fencelock/fencelock/internal/testkit/nilchecktest"
)

// echoServer serves a handler, wrapped by NewHandler with opts, that
// answers the Fencing of its request's context ("none" without one) and
// counts its calls.
func echoServer(t *testing.T, opts ...propagate.Option) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	h, err := propagate.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		f, ok := propagate.FromContext(r.Context())
		if !ok {
			fmt.Fprint(w, "none")
			return
		}
		fmt.Fprintf(w, "%s %d", f.Name, f.Token)
	}), opts...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, &calls
}

// get sends a GET through client with ctx, setting the Fencing-Token
// headers given, and returns the response with its body read.
func get(t *testing.T, ctx context.Context, client *http.Client, url string, headers ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range headers {
		req.Header.Add(propagate.Header, h)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, strings.TrimSpace(string(b))
}

func withFencing(t *testing.T, f propagate.Fencing) context.Context {
	t.Helper()
	ctx, err := propagate.NewContext(t.Context(), f)
	if err != nil {
		t.Fatal(err)
	}
	return ctx
}

// The client's Transport sends the context's Fencing, and the server's
// handler finds it in its own context.
func TestTransportToHandler(t *testing.T) {
	srv, _ := echoServer(t)
	client := &http.Client{Transport: &propagate.Transport{}}
	ctx := withFencing(t, propagate.Fencing{Name: "acct;7", Token: 812})
	resp, body := get(t, ctx, client, srv.URL, `name="stale"; token=1`) // the context's replaces it
	if resp.StatusCode != http.StatusOK || body != "acct;7 812" {
		t.Fatalf("got %s %q, want 200 \"acct;7 812\"", resp.Status, body)
	}
	if err := propagate.CheckResponse(resp); err != nil {
		t.Fatalf("CheckResponse of a 200: got %v, want nil", err)
	}
}

// The handler's context names the call's issuer, so a store that checks
// issuers checks the caller's: one that requires them takes the write
// that carries one and refuses the one that does not (the control: the
// same write, its Fencing without the issuer). FencingOf takes the issuer
// from the holder.
func TestHandlerCarriesIssuer(t *testing.T) {
	store := fence.NewMemoryStore(fence.RequireIssuer())
	h, err := propagate.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, _ := propagate.FromContext(r.Context())
		if err := store.Put(r.Context(), "k", f.Token, []byte(f.Name)); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, fence.IssuerFromContext(r.Context()))
	}))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: &propagate.Transport{}}
	holder, err := fence.NewHolder(5, make(chan struct{}), fence.WithIssuer("etcd-prod"))
	if err != nil {
		t.Fatal(err)
	}
	var nilLock *etcdlockLike
	if _, err := propagate.NewContext(t.Context(), propagate.FencingOf("job", nilLock)); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Fatalf("FencingOf a nil holder: NewContext got %v, want ErrInvalidArgument", err)
	}
	f := propagate.FencingOf("job", holder)
	if f != (propagate.Fencing{Name: "job", Token: 5, Issuer: "etcd-prod"}) {
		t.Fatalf("FencingOf: got %+v", f)
	}
	resp, body := get(t, withFencing(t, f), client, srv.URL)
	if resp.StatusCode != http.StatusOK || body != "etcd-prod" {
		t.Fatalf("with the issuer: got %s %q, want 200 \"etcd-prod\"", resp.Status, body)
	}
	// A caller's context naming another issuer is no help: the call's
	// Fencing is what counts.
	ctx := fence.ContextWithIssuer(withFencing(t, propagate.Fencing{Name: "job", Token: 6}), "etcd-prod")
	resp, body = get(t, ctx, client, srv.URL)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "names no issuer") {
		t.Fatalf("without the issuer: got %s %q, want 400 saying the write names no issuer", resp.Status, body)
	}
	if rec, err := store.Get(t.Context(), "k"); err != nil || rec.Token != 5 {
		t.Fatalf("store: got %+v, %v; want token 5", rec, err)
	}
}

// Refusals come before the handler runs: it is never called.
func TestHandlerRefuses(t *testing.T) {
	tests := []struct {
		name    string
		headers []string
		why     string
		wantErr error
	}{
		{"missing", nil, "missing", propagate.ErrMissing},
		{"invalid", []string{`name="a"; token=0`}, "invalid", propagate.ErrInvalidHeader},
		{"not a value", []string{"812"}, "invalid", propagate.ErrInvalidHeader},
		{"twice", []string{`name="a"; token=1`, `name="a"; token=2`}, "invalid", propagate.ErrInvalidHeader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, calls := echoServer(t)
			resp, body := get(t, t.Context(), srv.Client(), srv.URL, tt.headers...)
			if resp.StatusCode != http.StatusBadRequest || resp.Header.Get(propagate.RefusedHeader) != tt.why || calls.Load() != 0 {
				t.Fatalf("got %s, %s %q, %d handler calls (%q); want 400, %q, none",
					resp.Status, propagate.RefusedHeader, resp.Header.Get(propagate.RefusedHeader), calls.Load(), body, tt.why)
			}
			if err := propagate.CheckResponse(resp); !errors.Is(err, tt.wantErr) {
				t.Fatalf("CheckResponse: got %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// WithRequired(false) lets a call without a token through, but not one
// whose token does not parse.
func TestHandlerOptional(t *testing.T) {
	srv, calls := echoServer(t, propagate.WithRequired(false))
	if resp, body := get(t, t.Context(), srv.Client(), srv.URL); resp.StatusCode != http.StatusOK || body != "none" {
		t.Fatalf("no token: got %s %q, want 200 \"none\"", resp.Status, body)
	}
	if resp, _ := get(t, t.Context(), srv.Client(), srv.URL, "token=x"); resp.StatusCode != http.StatusBadRequest || calls.Load() != 1 {
		t.Fatalf("bad token: got %s and %d handler calls, want 400 and 1 (the call without)", resp.Status, calls.Load())
	}
}

// A context without a Fencing sends the request as it is, and the
// caller's request is never modified.
func TestTransportLeavesRequest(t *testing.T) {
	srv, _ := echoServer(t, propagate.WithRequired(false))
	client := &http.Client{Transport: &propagate.Transport{Base: http.DefaultTransport}}
	if _, body := get(t, t.Context(), client, srv.URL, `name="by-hand"; token=5`); body != "by-hand 5" {
		t.Fatalf("no Fencing in the context: got %q, want the header set by hand (by-hand 5)", body)
	}
	req, _ := http.NewRequestWithContext(withFencing(t, propagate.Fencing{Name: "a", Token: 1}), http.MethodGet, srv.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := req.Header.Get(propagate.Header); got != "" {
		t.Fatalf("caller's request after RoundTrip: got header %q, want none", got)
	}
}

func TestWriteStaleAndCheckResponse(t *testing.T) {
	tests := []struct {
		name        string
		err         error
		wantWritten bool
		wantCurrent fence.Token
	}{
		{"stale error with current", fmt.Errorf("ledger: %w", &fence.StaleError{Resource: "r", Token: 5, Current: 9}), true, 9},
		{"bare sentinel", fence.ErrStale, true, 0},
		{"other error", errors.New("disk full"), false, 0},
		{"nil", nil, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := propagate.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !propagate.WriteStale(w, tt.err) {
					w.WriteHeader(http.StatusNoContent)
				}
			}))
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			client := &http.Client{Transport: &propagate.Transport{}}
			resp, _ := get(t, withFencing(t, propagate.Fencing{Name: "acct-7", Token: 5}), client, srv.URL)
			err = propagate.CheckResponse(resp)
			if written := resp.StatusCode == propagate.StatusStale; written != tt.wantWritten {
				t.Fatalf("status: got %s, want 409 %v", resp.Status, tt.wantWritten)
			}
			var se *fence.StaleError
			switch {
			case !tt.wantWritten && err != nil:
				t.Fatalf("CheckResponse: got %v, want nil", err)
			case tt.wantWritten && (!errors.As(err, &se) || se.Token != 5 || se.Resource != "acct-7" || se.Current != tt.wantCurrent):
				t.Fatalf("CheckResponse: got %#v, want a *fence.StaleError for acct-7, token 5, current %d", err, tt.wantCurrent)
			}
		})
	}
}

func TestInvalidArguments(t *testing.T) {
	tests := []struct {
		name string
		call func() error
	}{
		{"NewContext nil context", func() error {
			//lint:ignore SA1012 the nil context is the point
			_, err := propagate.NewContext(nil, propagate.Fencing{Name: "a", Token: 1})
			return err
		}},
		{"NewContext invalid token", func() error { _, err := propagate.NewContext(t.Context(), propagate.Fencing{Name: "a"}); return err }},
		{"NewContext invalid name", func() error {
			_, err := propagate.NewContext(t.Context(), propagate.Fencing{Name: "a\x00", Token: 1})
			return err
		}},
		{"NewHandler nil handler", func() error { _, err := propagate.NewHandler(nil); return err }},
		{"NewHandler typed nil handler", func() error { _, err := propagate.NewHandler((http.HandlerFunc)(nil)); return err }},
		{"NewHandler nil option", func() error { _, err := propagate.NewHandler(http.NotFoundHandler(), nil); return err }},
		{"CheckResponse nil", func() error { return propagate.CheckResponse(nil) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := nilchecktest.NoPanic(tt.call); !errors.Is(err, fence.ErrInvalidArgument) {
				t.Fatalf("got %v, want fence.ErrInvalidArgument", err)
			}
		})
	}
	//lint:ignore SA1012 the nil context is the point
	if _, ok := propagate.FromContext(nil); ok {
		t.Fatal("FromContext(nil): got ok, want none")
	}
}

// etcdlockLike is a holder type whose nil pointer FencingOf must not call.
type etcdlockLike struct{ fence.Holder }

// A request without a Fencing-Token, let through by WithRequired(false),
// names no issuer and carries no Fencing, whatever the context it is
// served in: here the server's base context names an issuer and carries
// a Fencing (as a service's own lock might put there, or a caller serving
// the handler in-process with its own context). The control: the same
// context with the header sent, naming no issuer, is cleared too.
func TestHandlerOptionalClearsContext(t *testing.T) {
	h, err := propagate.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := propagate.FromContext(r.Context())
		fmt.Fprintf(w, "%q %v %d", fence.IssuerFromContext(r.Context()), ok, f.Token)
	}), propagate.WithRequired(false))
	if err != nil {
		t.Fatal(err)
	}
	base := fence.ContextWithIssuer(withFencing(t, propagate.Fencing{Name: "own", Token: 77, Issuer: "etcd-prod"}), "etcd-prod")
	srv := httptest.NewUnstartedServer(h)
	srv.Config.BaseContext = func(net.Listener) context.Context { return base }
	srv.Start()
	t.Cleanup(srv.Close)
	if _, body := get(t, t.Context(), srv.Client(), srv.URL, `name="job"; token=5`); body != `"" true 5` {
		t.Fatalf("control, a token naming no issuer: got %s, want \"\" true 5", body)
	}
	if _, body := get(t, t.Context(), srv.Client(), srv.URL); body != `"" false 0` {
		t.Fatalf("no token: got %s, want \"\" false 0 (no issuer, no Fencing)", body)
	}
	// In-process, with the caller's context.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil).WithContext(base))
	if body := strings.TrimSpace(rec.Body.String()); body != `"" false 0` {
		t.Fatalf("in-process, no token: got %s, want \"\" false 0", body)
	}
}
