package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"

	"github.com/fencelock/fencelock/fence"
)

// The resource is a tiny HTTP key-value service in the demo's main process,
// so that it keeps running while a worker process is frozen. It stands for a
// database or object store: with fencing on it enforces the fence contract
// (fence.MemoryStore); with fencing off it keeps whatever it is sent last.

// resource serves PUT and GET on /{key}; the token travels in Fence-Token.
type resource struct {
	store   fence.Store
	srv     *http.Server
	baseURL string
}

// unfenced is the control: last writer wins, tokens ignored.
type unfenced struct{ fence.MemoryStore }

func (u *unfenced) Put(ctx context.Context, key string, _ fence.Token, v []byte) error {
	return u.MemoryStore.Put(ctx, key, 1, v)
}

func startResource(fenced bool) (*resource, error) {
	var store fence.Store = fence.NewMemoryStore()
	if !fenced {
		store = &unfenced{}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &resource{store: store, baseURL: "http://" + ln.Addr().String()}
	r.srv = &http.Server{Handler: r}
	go r.srv.Serve(ln)
	return r, nil
}

func (r *resource) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	key := req.URL.Path[1:]
	switch req.Method {
	case http.MethodPut:
		tok, _ := strconv.ParseInt(req.Header.Get("Fence-Token"), 10, 64)
		body, _ := io.ReadAll(req.Body)
		err := r.store.Put(req.Context(), key, fence.Token(tok), body)
		var se *fence.StaleError
		switch {
		case errors.As(err, &se):
			w.Header().Set("Fence-Current", se.Current.String())
			http.Error(w, err.Error(), http.StatusConflict)
		case err != nil:
			http.Error(w, err.Error(), http.StatusBadRequest)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	case http.MethodGet:
		rec, err := r.store.Get(req.Context(), key)
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		w.Header().Set("Fence-Token", rec.Token.String())
		w.Write(rec.Value)
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// httpStore is the worker's client of the resource: a fence.Store over HTTP.
type httpStore struct{ baseURL string }

func (h httpStore) Put(ctx context.Context, key string, tok fence.Token, v []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, h.baseURL+"/"+key, bytes.NewReader(v))
	if err != nil {
		return err
	}
	req.Header.Set("Fence-Token", tok.String())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return &fence.UnknownOutcomeError{Resource: key, Token: tok, Err: err}
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	switch resp.StatusCode {
	case http.StatusNoContent:
		return nil
	case http.StatusConflict:
		cur, _ := strconv.ParseInt(resp.Header.Get("Fence-Current"), 10, 64)
		return &fence.StaleError{Resource: key, Token: tok, Current: fence.Token(cur)}
	default:
		return fmt.Errorf("resource: %s: %s", resp.Status, bytes.TrimSpace(msg))
	}
}

func (h httpStore) Get(ctx context.Context, key string) (fence.Record, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.baseURL+"/"+key, nil)
	if err != nil {
		return fence.Record{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fence.Record{}, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fence.Record{}, fmt.Errorf("%w: %s", fence.ErrNotFound, key)
	}
	tok, _ := strconv.ParseInt(resp.Header.Get("Fence-Token"), 10, 64)
	return fence.Record{Value: body, Token: fence.Token(tok)}, nil
}
