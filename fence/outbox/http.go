package outbox

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/propagate"
)

// IdempotencyHeader is the HTTP header [HTTPSender] sends an effect's
// [Effect.Key] in, and [NewReceiver] deduplicates on.
const IdempotencyHeader = "Idempotency-Key"

// HTTPSender delivers each effect as an HTTP request to its Destination, a
// URL, with the effect's Payload as the body, its [Effect.Key] in the
// Idempotency-Key header and its resource and token in fence/propagate's
// Fencing-Token header. A 2xx answer is a delivery; 408, 425, 429 and 5xx
// answers, a 409 with Retry-After (a receiver's "another delivery of this
// effect is under way") and transport errors are retried; any other answer
// (a 4xx, a stale token's 409, a redirect not followed) is permanent and parks the effect, with the
// status and the start of the body as the reason. A Destination that is not
// an absolute http or https URL is permanent too. Create one with
// [NewHTTPSender]; it is safe for concurrent use.
type HTTPSender struct {
	client      *http.Client
	method      string
	contentType string
}

var _ Sender = (*HTTPSender)(nil)

// HTTPOption configures [NewHTTPSender].
type HTTPOption interface{ applyHTTP(*HTTPSender) }

type httpOptionFunc func(*HTTPSender)

func (f httpOptionFunc) applyHTTP(s *HTTPSender) { f(s) }

// WithHTTPClient sets the client requests go through. Default
// http.DefaultClient. A nil client is refused by [NewHTTPSender].
func WithHTTPClient(c *http.Client) HTTPOption {
	return httpOptionFunc(func(s *HTTPSender) { s.client = c })
}

// WithMethod sets the request method. Default POST.
func WithMethod(method string) HTTPOption {
	return httpOptionFunc(func(s *HTTPSender) { s.method = method })
}

// WithContentType sets the Content-Type of each request. Default
// "application/octet-stream".
func WithContentType(ct string) HTTPOption {
	return httpOptionFunc(func(s *HTTPSender) { s.contentType = ct })
}

// NewHTTPSender returns an [HTTPSender]. It fails with an error matching
// [fence.ErrInvalidArgument] for a nil option, a nil client or an empty
// method.
func NewHTTPSender(opts ...HTTPOption) (*HTTPSender, error) {
	s := &HTTPSender{client: http.DefaultClient, method: http.MethodPost, contentType: "application/octet-stream"}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: outbox: NewHTTPSender: nil option", fence.ErrInvalidArgument)
		}
		o.applyHTTP(s)
	}
	if s.client == nil {
		return nil, fmt.Errorf("%w: outbox: NewHTTPSender: nil *http.Client", fence.ErrInvalidArgument)
	}
	if s.method == "" {
		return nil, fmt.Errorf("%w: outbox: NewHTTPSender: empty method", fence.ErrInvalidArgument)
	}
	return s, nil
}

// Send delivers e; see [HTTPSender].
func (s *HTTPSender) Send(ctx context.Context, e Effect) error {
	u, err := url.Parse(e.Destination)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Permanent(fmt.Errorf("outbox: effect %s: destination %q is not an http(s) URL", e.Key(), e.Destination))
	}
	req, err := http.NewRequestWithContext(ctx, s.method, e.Destination, bytes.NewReader(e.Payload))
	if err != nil {
		return Permanent(fmt.Errorf("outbox: effect %s: %w", e.Key(), err))
	}
	req.Header.Set("Content-Type", s.contentType)
	req.Header.Set(IdempotencyHeader, e.Key())
	req.Header.Set(propagate.Header, propagate.Fencing{Name: e.Resource, Token: e.Token}.String())
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("outbox: effect %s: %w", e.Key(), err)
	}
	defer resp.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // keep the connection for the next effect
	return httpOutcome(e, resp, head)
}

// httpOutcome is the one rule for what an answer means.
func httpOutcome(e Effect, resp *http.Response, head []byte) error {
	status := resp.StatusCode
	switch {
	case status >= 200 && status < 300:
		return nil
	case status == http.StatusRequestTimeout, status == http.StatusTooEarly, status == http.StatusTooManyRequests, status >= 500,
		inFlight(resp):
		return fmt.Errorf("outbox: effect %s: %s answered %d: %s", e.Key(), e.Destination, status, bytes.TrimSpace(head))
	default:
		return Permanent(fmt.Errorf("outbox: effect %s: %s answered %d: %s", e.Key(), e.Destination, status, bytes.TrimSpace(head)))
	}
}

// inFlight reports a receiver's answer that another delivery of the
// effect is under way ([NewReceiver]'s 409 with Retry-After), which a
// retry resolves, as opposed to its refusal of a stale token (409 with
// Fencing-Refused), which no retry does.
func inFlight(resp *http.Response) bool {
	return resp.StatusCode == http.StatusConflict && resp.Header.Get("Retry-After") != "" && resp.Header.Get(propagate.RefusedHeader) == ""
}
