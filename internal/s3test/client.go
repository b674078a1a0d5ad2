package s3test

import (
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// ClientOption configures a client made by [Server.Client] or [Server.NewClient].
type ClientOption func(*clientConfig)

type clientConfig struct {
	wrap   func(http.RoundTripper) http.RoundTripper
	optFns []func(*s3.Options)
}

// WithRoundTripper wraps the client's HTTP transport, for fault injection.
func WithRoundTripper(wrap func(http.RoundTripper) http.RoundTripper) ClientOption {
	return func(c *clientConfig) { c.wrap = wrap }
}

// WithS3Options applies fn to the client's options after the server's.
func WithS3Options(fn func(*s3.Options)) ClientOption {
	return func(c *clientConfig) { c.optFns = append(c.optFns, fn) }
}

// Client returns a client for the server whose idle connections are closed
// when tb's test ends (so goleak finds no connection goroutines).
func (s *Server) Client(tb testing.TB, opts ...ClientOption) *s3.Client {
	tb.Helper()
	c, closeIdle := s.NewClient(opts...)
	tb.Cleanup(closeIdle)
	return c
}

// NewClient returns a client for the server and a function that closes its
// idle connections, for callers without a testing.TB (TestMain, examples).
func (s *Server) NewClient(opts ...ClientOption) (*s3.Client, func()) {
	var cfg clientConfig
	for _, o := range opts {
		o(&cfg)
	}
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        100,
		MaxIdleConnsPerHost: 100,
		IdleConnTimeout:     30 * time.Second,
	}
	var rt http.RoundTripper = tr
	if cfg.wrap != nil {
		rt = cfg.wrap(tr)
	}
	o := s3.Options{
		Region:     s.Region,
		HTTPClient: &http.Client{Transport: rt},
	}
	if s.Endpoint != "" {
		o.BaseEndpoint = aws.String(s.Endpoint)
		o.UsePathStyle = true // no wildcard DNS for bucket subdomains
	}
	o.Credentials = s.creds
	if s.AccessKey != "" {
		o.Credentials = credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, "")
	}
	return s3.New(o, cfg.optFns...), tr.CloseIdleConnections
}
