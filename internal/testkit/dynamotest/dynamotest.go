// Package dynamotest gives tests a DynamoDB-compatible server: minidyn's
// HTTP server (github.com/truora/minidyn/server), which speaks DynamoDB's
// JSON protocol to the real AWS SDK client, conditions, transactions and
// ReturnValuesOnConditionCheckFailure included, served on a loopback port
// of the test process. Every request crosses a real HTTP connection, so a
// transport that loses replies sits where the network would.
//
// With FENCELOCK_DYNAMODB_SERVER=dynalite it starts dynalite
// (https://github.com/mhart/dynalite, node; .ci/install-dynalite.sh)
// instead, on a loopback port: a second implementation, which enforces
// DynamoDB's validation and 400 KB item limit and keeps a new table
// CREATING for a moment, as DynamoDB does. What it lacks is listed in
// [Lacks].
//
// If the environment variable FENCELOCK_DYNAMODB_ENDPOINT is set (an
// http:// URL, such as DynamoDB Local's), the server it names is used
// instead, with static credentials "test"/"test" and region us-east-1 unless
// AWS_ACCESS_KEY_ID and AWS_REGION say otherwise.
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(dynamotest.Main(m)) }
//
//	func TestX(t *testing.T) {
//		c := dynamotest.New(t).Client(t)
//		...
//	}
package dynamotest

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/truora/minidyn/server"

	"github.com/fencelock/fencelock/internal/testkit/childproc"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// EnvEndpoint names the environment variable that points tests at an
// existing server instead of the in-process one.
const EnvEndpoint = "FENCELOCK_DYNAMODB_ENDPOINT"

var shared = &testenv.Shared[*Server]{
	Name: "dynamotest", Start: Start, Timeout: 30 * time.Second, Unavailable: ErrNoDynalite,
	HowToEnable: "minidyn needs nothing; for dynalite, " + HowToEnableDynalite,
}

// Main returns m wrapped for TestMain: one server for the package's tests.
func Main(m testenv.Runner) testenv.Main { return shared.Main(m) }

// Shared returns the server started by [Main], or nil outside of it.
func Shared() *Server { return shared.Get() }

// New returns the package's server started by [Main], or starts one for t.
func New(t testing.TB) *Server {
	t.Helper()
	return shared.New(t)
}

// Server is a DynamoDB-compatible endpoint. Its fields are set once
// before use.
type Server struct {
	url  string
	name string           // "minidyn", "dynalite", or "" for FENCELOCK_DYNAMODB_ENDPOINT's
	srv  *httptest.Server // minidyn's, in the process
	proc *childproc.Proc  // dynalite's
}

// Start starts minidyn's server on a loopback port, or dynalite when
// FENCELOCK_DYNAMODB_SERVER=dynalite, or returns the one
// FENCELOCK_DYNAMODB_ENDPOINT names.
func Start(ctx context.Context) (*Server, error) {
	if u := os.Getenv(EnvEndpoint); u != "" {
		return &Server{url: u}, nil
	}
	switch v := os.Getenv(EnvServer); v {
	case "dynalite":
		return startDynalite(ctx)
	case "", "minidyn":
	default:
		return nil, fmt.Errorf("dynamotest: %s=%q: want minidyn or dynalite", EnvServer, v)
	}
	s := httptest.NewServer(server.NewServer())
	return &Server{url: s.URL, name: "minidyn", srv: s}, nil
}

// URL returns the server's endpoint.
func (s *Server) URL() string { return s.url }

// Name returns the server's implementation: "minidyn", "dynalite", or ""
// for the endpoint FENCELOCK_DYNAMODB_ENDPOINT names.
func (s *Server) Name() string { return s.name }

// Close stops a server this package started.
func (s *Server) Close() error {
	if s.srv != nil {
		s.srv.CloseClientConnections()
		s.srv.Close()
	}
	if s.proc != nil {
		s.proc.Kill()
	}
	return nil
}

// Client returns a client of the server, with the SDK's default retries,
// whose idle connections are closed when t ends. opts change its options
// (an HTTP client that injects faults).
func (s *Server) Client(t testing.TB, opts ...func(*dynamodb.Options)) *dynamodb.Client {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	return dynamodb.New(s.Options(&http.Client{Transport: tr}), opts...)
}

// Options returns the options of a client of the server that sends its
// requests with hc.
func (s *Server) Options(hc *http.Client) dynamodb.Options {
	return dynamodb.Options{
		BaseEndpoint: aws.String(s.url),
		Region:       cmp.Or(os.Getenv("AWS_REGION"), "us-east-1"),
		Credentials: credentials.NewStaticCredentialsProvider(
			cmp.Or(os.Getenv("AWS_ACCESS_KEY_ID"), "test"), cmp.Or(os.Getenv("AWS_SECRET_ACCESS_KEY"), "test"), ""),
		HTTPClient: hc,
	}
}
