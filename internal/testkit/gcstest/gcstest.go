// Package gcstest gives tests a Google Cloud Storage-compatible server:
// fake-gcs-server (github.com/fsouza/fake-gcs-server), in memory, on a
// loopback port of the test process, with the bucket [Bucket]. The real
// cloud.google.com/go/storage client talks to it over HTTP, so a transport
// that loses replies sits where the network would.
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(gcstest.Main(m)) }
//
//	func TestX(t *testing.T) {
//		c := gcstest.New(t).Client(t)
//		...
//	}
package gcstest

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"google.golang.org/api/option"

	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// Bucket is the bucket the server is started with.
const Bucket = "fencelock-test"

var shared = &testenv.Shared[*Server]{
	Name: "gcstest", Start: Start, Timeout: 30 * time.Second, Unavailable: errUnavailable, HowToEnable: "nothing to install",
}

// errUnavailable is never returned: the server is in the process.
var errUnavailable = errors.New("gcstest: unavailable")

// Main returns m wrapped for TestMain: one server for the package's tests.
func Main(m testenv.Runner) testenv.Main { return shared.Main(m) }

// Shared returns the server started by [Main], or nil outside of it.
func Shared() *Server { return shared.Get() }

// New returns the package's server started by [Main], or starts one for t.
func New(t testing.TB) *Server {
	t.Helper()
	return shared.New(t)
}

// Server is a running fake-gcs-server.
type Server struct {
	srv *fakestorage.Server

	mu  sync.Mutex
	trs []*http.Transport // the clients', whose connections Close closes
}

// Start starts fake-gcs-server on a loopback port, with [Bucket].
func Start(context.Context) (*Server, error) {
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", Host: "127.0.0.1"})
	if err != nil {
		return nil, err
	}
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: Bucket})
	return &Server{srv: srv}, nil
}

// URL returns the server's endpoint.
func (s *Server) URL() string { return s.srv.URL() }

// Close stops the server.
func (s *Server) Close() error {
	s.srv.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, tr := range s.trs {
		tr.CloseIdleConnections()
	}
	return nil
}

// Client returns a client of the server whose requests go through wrap
// (nil: directly), closed when t ends. Its retries are the library's
// default.
func (s *Server) Client(t testing.TB, wrap func(http.RoundTripper) http.RoundTripper) *storage.Client {
	t.Helper()
	c, err := s.NewClient(wrap)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.closeIdle() })
	return c
}

// NewClient returns a client of the server, as [Server.Client] does; the
// caller closes it.
func (s *Server) NewClient(wrap func(http.RoundTripper) http.RoundTripper) (*storage.Client, error) {
	base := http.DefaultTransport.(*http.Transport).Clone()
	s.mu.Lock()
	s.trs = append(s.trs, base)
	s.mu.Unlock()
	var tr http.RoundTripper = base
	if wrap != nil {
		tr = wrap(tr)
	}
	return storage.NewClient(context.Background(), option.WithHTTPClient(&http.Client{Transport: tr}),
		option.WithEndpoint(s.srv.URL()+"/storage/v1/"), storage.WithJSONReads())
}

func (s *Server) closeIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, tr := range s.trs {
		tr.CloseIdleConnections()
	}
}
