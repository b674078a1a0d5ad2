// Package httpfault is an http.RoundTripper for fault injection in tests
// of adapters whose store speaks HTTP (fence/dynamodb, fence/gcs,
// fence/azblob): it loses the next reply after the server answered, holds
// the next request before it is sent, sends the next request twice, or
// answers it with an error status of its own (a gateway's 503), and
// counts the requests it sent.
package httpfault

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// Transport wraps Next. Only the requests Match accepts (all, when nil)
// are faulted and counted. Safe for concurrent use.
type Transport struct {
	Next  http.RoundTripper
	Match func(*http.Request) bool

	mu   sync.Mutex
	lose func() // armed: called once the reply has arrived, before the loss
	dup  bool   // armed: the next request is sent twice
	fail *failure
	held chan struct{}
	hold chan struct{}
	sent int
}

// RoundTrip implements http.RoundTripper.
func (f *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if f.Match != nil && !f.Match(r) {
		return f.Next.RoundTrip(r)
	}
	f.mu.Lock()
	lose, held, hold, dup, fail := f.lose, f.held, f.hold, f.dup, f.fail
	f.lose, f.held, f.hold, f.dup, f.fail = nil, nil, nil, false, nil
	f.sent++
	f.mu.Unlock()
	if hold != nil {
		close(held)
		<-hold
	}
	if dup {
		return f.twice(r)
	}
	if fail != nil {
		return f.answer(r, *fail)
	}
	resp, err := f.Next.RoundTrip(r)
	if lose != nil && err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		lose()
		return nil, io.ErrUnexpectedEOF
	}
	return resp, err
}

// LoseNextReply arms the loss of the next matching reply: the request
// reaches the server and is answered, then is called, then the client sees
// a broken connection.
func (f *Transport) LoseNextReply(then func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lose = then
}

// HoldNextRequest arms a hold of the next matching request: held is closed
// when it is held, and it is sent when release is closed.
func (f *Transport) HoldNextRequest() (held, release chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held, f.hold = make(chan struct{}), make(chan struct{})
	return f.held, f.hold
}

// Sent returns how many matching requests were sent.
func (f *Transport) Sent() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sent
}

// DuplicateNextRequest arms a duplicate of the next matching request: it
// is sent and answered, then sent again, and the client gets the second
// copy's reply, as after a resend by a client's own retry or by a proxy
// whose first reply was lost. Both copies count as sent.
func (f *Transport) DuplicateNextRequest() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dup = true
}

// twice sends r, then a copy of it, and returns the copy's reply. The body
// is read whole first, so that both copies carry it.
func (f *Transport) twice(r *http.Request) (*http.Response, error) {
	var body []byte
	hasBody := r.Body != nil && r.Body != http.NoBody
	if hasBody {
		var err error
		body, err = io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	send := func() (*http.Response, error) {
		c := r.Clone(r.Context())
		if hasBody {
			c.Body = io.NopCloser(bytes.NewReader(body))
			c.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		}
		return f.Next.RoundTrip(c)
	}
	first, err := send()
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, first.Body)
	first.Body.Close()
	f.mu.Lock()
	f.sent++
	f.mu.Unlock()
	return send()
}

// failure is an armed FailNext.
type failure struct {
	status int
	sent   bool
}

// FailNext arms an answer of status to the next matching request, with an
// empty body, as a gateway in front of the server would give: after
// sending the request on and discarding the server's reply when sent is
// true (the request reached the store: a 503 after the write), without
// sending it when false.
func (f *Transport) FailNext(status int, sent bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = &failure{status: status, sent: sent}
}

func (f *Transport) answer(r *http.Request, fail failure) (*http.Response, error) {
	if fail.sent {
		resp, err := f.Next.RoundTrip(r)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	} else if r.Body != nil {
		r.Body.Close()
	}
	return &http.Response{
		StatusCode: fail.status, Status: fmt.Sprintf("%d %s", fail.status, http.StatusText(fail.status)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(nil)), ContentLength: 0, Request: r,
	}, nil
}
