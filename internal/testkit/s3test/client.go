package s3test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
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

// NewClient returns a client for the endpoint and a function that closes
// its idle connections, for callers without a testing.TB (TestMain,
// examples, other processes).
func (c Config) NewClient(opts ...ClientOption) (*s3.Client, func()) {
	var cc clientConfig
	for _, o := range opts {
		o(&cc)
	}
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        100,
		MaxIdleConnsPerHost: 100,
		IdleConnTimeout:     30 * time.Second,
	}
	var rt http.RoundTripper = tr
	if cc.wrap != nil {
		rt = cc.wrap(tr)
	}
	o := s3.Options{
		Region:      c.Region,
		HTTPClient:  &http.Client{Transport: rt},
		Credentials: c.credentials(),
	}
	if c.Endpoint != "" {
		o.BaseEndpoint = aws.String(c.Endpoint)
		o.UsePathStyle = true // no wildcard DNS for bucket subdomains
	}
	return s3.New(o, cc.optFns...), tr.CloseIdleConnections
}

// credentials returns static credentials, or the SDK's default chain when
// there are no keys (nil if it cannot be loaded: requests then fail clearly).
func (c Config) credentials() aws.CredentialsProvider {
	if c.AccessKey != "" {
		return credentials.NewStaticCredentialsProvider(c.AccessKey, c.SecretKey, "")
	}
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion(c.Region))
	if err != nil {
		return nil
	}
	return cfg.Credentials
}
