package propagate

import (
	"net/http"
	"strings"
)

// Transport is an http.RoundTripper that sends the [Fencing] of each
// request's context ([FromContext]) in its Fencing-Token header, as
// otelhttp's Transport sends trace context:
//
//	client := &http.Client{Transport: &propagate.Transport{}}
//	ctx, err := propagate.NewContext(ctx, propagate.FencingOf(lock.Name(), lock))
//	...
//	req, err := http.NewRequestWithContext(ctx, "POST", url, body)
//	resp, err := client.Do(req)
//
// A request whose context carries no Fencing is sent as it is (a
// Fencing-Token header set by hand stays); one whose context carries one
// is sent with that header, replacing any other (under any case of its
// name). The caller's request is
// not modified: a copy is sent. Transport does not read the response: use
// [CheckResponse] to learn whether the service refused the call for its
// token.
//
// The zero Transport sends through http.DefaultTransport. A Transport is
// safe for concurrent use when Base is.
type Transport struct {
	// Base sends the requests; nil: http.DefaultTransport.
	Base http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	f, ok := FromContext(req.Context())
	if !ok {
		return base.RoundTrip(req)
	}
	r := req.Clone(req.Context()) // RoundTrip must not modify req; the body is shared, and read once
	for k := range r.Header {
		// Set replaces the canonical key alone; one written into the map
		// in another case would go out too, as a second header, and the
		// service would refuse the call as invalid.
		if strings.EqualFold(k, Header) {
			delete(r.Header, k)
		}
	}
	r.Header.Set(Header, f.String())
	return base.RoundTrip(r)
}
