package s3test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/fencelock/fencelock/internal/testkit/childproc"
)

// EnvMoto names a moto_server binary (the standalone server of Python's
// moto, tested with moto 5.2.1). Setting it makes the tests that use
// [NewMoto] run.
const EnvMoto = "FENCELOCK_MOTO_SERVER"

// NewMoto starts moto_server on a free loopback port for one test, with a
// bucket, and stops it when the test ends.
//
// moto is a control, not a target: an S3 server no one here wrote whose
// conditional PUT checks the ETag and stores the body in separate steps, so
// that large concurrent PUTs with one If-Match can both succeed. Tests use
// it to show that a check catches such a server. It also accepts any
// credentials.
//
// The tests that use it are built only with -tags moto: CI cannot install
// moto (it comes from PyPI, which CI cannot reach, and has no Debian
// package), so they are not part of CI's suite and are run by hand. Given
// the tag, a test fails when FENCELOCK_MOTO_SERVER does not name the binary.
func NewMoto(tb testing.TB) *Server {
	tb.Helper()
	bin := os.Getenv(EnvMoto)
	if bin == "" {
		tb.Fatalf("s3test: moto tests need moto: pip install 'moto[server]' and set %s to the moto_server binary", EnvMoto)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	s, err := startMoto(ctx, bin)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("s3test: stopping moto: %v", err)
		}
	})
	return s
}

// startMoto runs moto_server and waits until it serves the test bucket,
// on a new port if the first was taken.
func startMoto(ctx context.Context, bin string) (*Server, error) {
	return retryLaunch(ctx, func(int) (*Server, error) { return launchMoto(ctx, bin) })
}

func launchMoto(ctx context.Context, bin string) (*Server, error) {
	ports, err := childproc.FreePorts(1)
	if err != nil {
		return nil, fmt.Errorf("s3test: %w", err)
	}
	port := ports[0]
	s := &Server{Config: Config{
		Endpoint:  "http://127.0.0.1:" + strconv.Itoa(port),
		Region:    "us-east-1",
		AccessKey: "fencelock-moto",
		SecretKey: "fencelock-moto",
		Bucket:    bucketName,
	}}
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	if s.proc, err = childproc.Start(cmd, nil); err != nil {
		return nil, fmt.Errorf("s3test: %s=%s: %w", EnvMoto, bin, err)
	}
	if err := s.waitReady(ctx); err != nil {
		s.proc.Kill()
		return nil, err
	}
	return s, nil
}
