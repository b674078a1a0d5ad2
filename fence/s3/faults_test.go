package s3fence_test

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	s3fence "github.com/fencelock/fencelock/fence/s3"
	"github.com/fencelock/fencelock/internal/testkit/s3test"
)

// faults is an http.RoundTripper between a client and the server that counts
// requests and breaks PUTs in the ways no local server does: a 409
// ConditionalRequestConflict, a 501 NotImplemented or 503 SlowDown answered
// without forwarding, a request lost before it reaches the server, an answer
// lost after the server has applied the request.
type faults struct {
	next http.RoundTripper

	mu   sync.Mutex
	gets int
	puts int
	// conflicts answers this many PUTs with 409 without forwarding them.
	conflicts int
	// notImplemented answers this many PUTs with 501 without forwarding them.
	notImplemented int
	// slowDowns answers this many PUTs with 503 SlowDown without forwarding them.
	slowDowns int
	// lostRequests fails this many PUTs without forwarding them.
	lostRequests int
	// lostAnswers forwards this many PUTs, then drops the answer.
	lostAnswers int
	// beforeFault, if set, runs before a PUT's fault is returned.
	beforeFault func()
	// beforePut, if set, runs before each PUT is forwarded or faulted.
	beforePut func()
}

// faultyClient returns a client whose requests go through f.
func faultyClient(t *testing.T, f *faults) *s3.Client {
	t.Helper()
	return client(t, s3test.WithRoundTripper(func(rt http.RoundTripper) http.RoundTripper {
		f.next = rt
		return f
	}))
}

func (f *faults) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.HasSuffix(req.URL.Path, "/"+s3fence.DefaultProbeKey) {
		return f.next.RoundTrip(req) // the Store's conditional-write check: not counted, not faulted
	}
	if req.Method != http.MethodPut {
		f.count(&f.gets)
		return f.next.RoundTrip(req)
	}
	f.count(&f.puts)
	if f.beforePut != nil {
		f.beforePut()
	}
	switch {
	case f.take(&f.conflicts):
		closeBody(req)
		f.runHook()
		return conflict(req), nil
	case f.take(&f.notImplemented):
		closeBody(req)
		return errorResponse(req, http.StatusNotImplemented, "NotImplemented", "A header you provided implies functionality that is not implemented"), nil
	case f.take(&f.slowDowns):
		closeBody(req)
		return errorResponse(req, http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate."), nil
	case f.take(&f.lostRequests):
		closeBody(req)
		f.runHook()
		return nil, errors.New("injected fault: connection reset before the request was sent")
	case f.take(&f.lostAnswers):
		resp, err := f.next.RoundTrip(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		f.runHook()
		return nil, errors.New("injected fault: connection reset after the request was sent")
	}
	return f.next.RoundTrip(req)
}

func (f *faults) count(n *int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	*n++
}

// take decrements *n and reports whether it was positive.
func (f *faults) take(n *int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if *n <= 0 {
		return false
	}
	*n--
	return true
}

func (f *faults) runHook() {
	f.mu.Lock()
	hook := f.beforeFault
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
}

// counts returns the GETs and PUTs seen so far.
func (f *faults) counts() (gets, puts int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gets, f.puts
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

func conflict(req *http.Request) *http.Response {
	return errorResponse(req, http.StatusConflict, "ConditionalRequestConflict",
		"A conflicting conditional operation is currently in progress against this resource. Please try again.")
}

// errorResponse is an S3 error answer with the given status and code.
func errorResponse(req *http.Request, status int, code, message string) *http.Response {
	body := `<?xml version="1.0" encoding="UTF-8"?>` + "\n<Error><Code>" + code + "</Code><Message>" + message + "</Message></Error>"
	return &http.Response{
		Status:        strconv.Itoa(status) + " " + http.StatusText(status),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {"application/xml"}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}
