package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fencelock/fencelock/internal/testkit/childproc"
)

// bucketName is the bucket every started server gets.
const bucketName = "fencelock-test"

// HowToEnableVersitygw says how to install versitygw, for a test that
// runs it itself.
const HowToEnableVersitygw = "sh .ci/install-versitygw.sh installs it (or set " + EnvBinary + " to a versitygw binary)"

// FindVersitygw returns the path of the versitygw binary, from
// $FENCELOCK_VERSITYGW, $PATH, $GOBIN or $GOPATH/bin (where
// .ci/install-versitygw.sh puts it), or an error matching
// [ErrUnavailable].
func FindVersitygw() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("s3test: %s=%s: %w", EnvBinary, p, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	var dirs []string
	if gobin := os.Getenv("GOBIN"); gobin != "" {
		dirs = append(dirs, gobin)
	}
	for _, gp := range filepath.SplitList(build.Default.GOPATH) {
		dirs = append(dirs, filepath.Join(gp, "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, "versitygw")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: versitygw not found in $%s, $PATH or %v", ErrUnavailable, EnvBinary, dirs)
}

// startVersitygw starts versitygw with data under dir and creates the test
// bucket, on a new port if the first was taken.
func startVersitygw(ctx context.Context, dir string) (*Server, error) {
	bin, err := FindVersitygw()
	if err != nil {
		return nil, err
	}
	return retryLaunch(ctx, func(attempt int) (*Server, error) {
		return launch(ctx, bin, filepath.Join(dir, "vgw"+strconv.Itoa(attempt)))
	})
}

// retryLaunch calls launch until it succeeds, up to three times while the
// process exits before it is ready: the port it was given was taken
// between our probe and its bind.
func retryLaunch(ctx context.Context, launch func(attempt int) (*Server, error)) (*Server, error) {
	var errs []error
	for attempt := range 3 {
		s, err := launch(attempt)
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil || !errors.Is(err, errExited) {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// errExited means the server process exited before it became ready.
var errExited = errors.New("s3test: server process exited before it was ready")

// launch runs one versitygw process and waits until it serves the test bucket.
func launch(ctx context.Context, bin, dir string) (*Server, error) {
	root, versions := filepath.Join(dir, "root"), filepath.Join(dir, "versions")
	for _, d := range []string{root, versions} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("s3test: %w", err)
		}
	}
	ports, err := childproc.FreePorts(1)
	if err != nil {
		return nil, fmt.Errorf("s3test: %w", err)
	}
	port := ports[0]
	s := &Server{Config: Config{
		Endpoint:  "http://127.0.0.1:" + strconv.Itoa(port),
		Region:    "us-east-1",
		AccessKey: "fencelock" + randomHex(6),
		SecretKey: randomHex(20),
		Bucket:    bucketName,
	}}
	// --keep-alive: versitygw closes every connection after one request
	// without it, which AWS does not do and which would dominate benchmarks.
	cmd := exec.Command(bin, "--port", "127.0.0.1:"+strconv.Itoa(port), "--quiet", "--keep-alive",
		"posix", "--versioning-dir", versions, root)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+s.AccessKey, "ROOT_SECRET_KEY="+s.SecretKey)
	if s.proc, err = childproc.Start(cmd, nil); err != nil {
		return nil, fmt.Errorf("s3test: %w", err)
	}
	if err := s.waitReady(ctx); err != nil {
		s.proc.Kill()
		return nil, err
	}
	return s, nil
}

// waitReady polls until the server creates the test bucket, the process
// exits, or ctx ends.
func (s *Server) waitReady(ctx context.Context) error {
	client, closeIdle := s.NewClient()
	defer closeIdle()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := s.createBucket(ctx, client, s.Bucket)
		if err == nil {
			return nil
		}
		select {
		case <-s.proc.Exited():
			return fmt.Errorf("%w: %s", errExited, s.proc.Output())
		case <-ctx.Done():
			return fmt.Errorf("s3test: %s at %s not ready: %w (last error: %v; output: %s)", s.proc.Name(), s.Endpoint, ctx.Err(), err, s.proc.Output())
		case <-tick.C:
		}
	}
}

// createBucket creates bucket with a short per-attempt timeout, so a server
// that accepts connections but hangs cannot stall the caller's poll loop.
func (s *Server) createBucket(ctx context.Context, client *s3.Client, bucket string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)},
		func(o *s3.Options) { o.RetryMaxAttempts = 1 })
	return err
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+).
	return hex.EncodeToString(b)
}
