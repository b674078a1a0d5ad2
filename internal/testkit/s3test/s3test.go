// Package s3test gives tests an S3-compatible server with conditional writes.
//
// By default it starts versitygw (https://github.com/versity/versitygw, the
// posix backend) on a free loopback port with its data in a temporary
// directory, waits until it answers S3 requests, creates a bucket through the
// S3 API, and kills the process when the test or package is done. The binary
// is found through $FENCELOCK_VERSITYGW, then $PATH, then $GOBIN and
// $GOPATH/bin; .ci/install-versitygw.sh installs it.
//
// Setting FENCELOCK_S3_BUCKET points the tests at an existing endpoint
// instead (AWS itself included); see [FromEnv].
//
// When no server can be had, tests are skipped with a message saying how to
// get one, except under CI=true, where they fail.
package s3test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/testkit/childproc"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// Environment variables read by this package.
const (
	// EnvBinary names the versitygw binary to run.
	EnvBinary = "FENCELOCK_VERSITYGW"
	// EnvBucket names an existing bucket; setting it selects an existing
	// endpoint instead of starting versitygw.
	EnvBucket = "FENCELOCK_S3_BUCKET"
	// EnvEndpoint is the existing endpoint's URL; empty means AWS S3.
	EnvEndpoint = "FENCELOCK_S3_ENDPOINT"
	// EnvRegion is the existing endpoint's region (default us-east-1).
	EnvRegion = "FENCELOCK_S3_REGION"
	// EnvAccessKey and EnvSecretKey are static credentials for the existing
	// endpoint; when unset, the AWS SDK's default credential chain is used.
	EnvAccessKey = "FENCELOCK_S3_ACCESS_KEY"
	// EnvSecretKey: see EnvAccessKey.
	EnvSecretKey = "FENCELOCK_S3_SECRET_KEY"
)

// ErrUnavailable means neither a versitygw binary nor an existing endpoint
// was found. Tests skip on it, or fail under CI=true.
var ErrUnavailable = errors.New("s3test: no S3 server available")

// howToEnable is appended to skip messages.
const howToEnable = "run .ci/install-versitygw.sh (or set " + EnvBinary + " to a versitygw binary), " +
	"or set " + EnvBucket + " (with " + EnvEndpoint + ", " + EnvAccessKey + ", " + EnvSecretKey + ", " + EnvRegion + ") to use an existing endpoint"

// startTimeout bounds starting a server, including its first bucket.
const startTimeout = 60 * time.Second

// Config says how to reach an S3 endpoint and which bucket to use. It is
// plain data: it can be copied, and passed to another process as JSON.
type Config struct {
	// Endpoint is the base URL; empty means AWS's regional endpoint.
	Endpoint string
	// Region is the signing region.
	Region string
	// AccessKey and SecretKey are the credentials; both empty means the AWS
	// SDK's default credential chain.
	AccessKey, SecretKey string
	// Bucket exists. Tests share it and keep apart by using unique keys.
	Bucket string
}

// Server is an S3 endpoint with a bucket ready for tests: a process this
// package started, or an existing endpoint. Its Config is read-only after
// Start; its methods are safe for concurrent use.
type Server struct {
	Config

	proc      *childproc.Proc // nil for an existing endpoint
	versioned versionedBucket
}

// Start returns a server for tests: the existing endpoint described by the
// environment when FENCELOCK_S3_BUCKET is set ([FromEnv]), and otherwise a new
// versitygw process storing its data under dir. It returns an error matching
// [ErrUnavailable] when there is neither. ctx bounds the start; Close stops
// the process.
func Start(ctx context.Context, dir string) (*Server, error) {
	if s, ok, err := FromEnv(ctx); ok || err != nil {
		return s, err
	}
	return startVersitygw(ctx, dir)
}

// Close kills the server's process, if this package started one, and waits
// until it is reaped. It is a no-op for an existing endpoint.
func (s *Server) Close() error {
	if s.proc != nil {
		s.proc.Kill()
	}
	return nil
}

// New returns the package's server started by [Main] or, without Main, a
// server for one test, started in testenv.TempDir and closed when the test
// ends. It skips the test when no server is available, or fails it under
// CI=true.
func New(tb testing.TB) *Server {
	tb.Helper()
	if srv, set, err := sharedOr(); set {
		if srv == nil {
			testenv.NoServer(tb, err, ErrUnavailable, howToEnable)
		}
		return srv
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	s, err := Start(ctx, testenv.TempDir(tb))
	if err != nil {
		testenv.NoServer(tb, err, ErrUnavailable, howToEnable)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("s3test: stopping the server: %v", err)
		}
	})
	return s
}
