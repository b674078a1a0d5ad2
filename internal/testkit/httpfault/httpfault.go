// Package httpfault is an http.RoundTripper for fault injection in tests
// of adapters whose store speaks HTTP (fence/dynamodb, fence/gcs): it
// loses the next reply after the server answered, or holds the next
// request before it is sent, and counts the requests it sent.
package httpfault

import (
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
	lose, held, hold := f.lose, f.held, f.hold
	f.lose, f.held, f.hold = nil, nil, nil
	f.sent++
	f.mu.Unlock()
	if hold != nil {
		close(held)
		<-hold
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
