package embedetcd

import (
	"context"
	"io"
	"os"
	"sync"
	"testing"

	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// EnvDir names a directory for the data of [Main]'s member; set but empty,
// the system's temporary directory. Unset, benchmarks keep it on disk, in
// the system's temporary directory, as BENCHMARKS.md's "disk" figures
// are, and tests in testenv.DataDir (tmpfs where there is room).
const EnvDir = "FENCELOCK_ETCD_DIR"

// shared is the package's member, set by [Main]'s Run.
var shared struct {
	mu  sync.Mutex
	srv *Server
}

// Main returns m wrapped for TestMain, the same shape as pgtest.Main and
// s3test.Main: its Run starts one embedded etcd member that every test of
// the package shares ([Shared] returns it), in a new directory under
// $[EnvDir], runs the tests, then stops the member and removes its
// directory before goleak looks for leaked goroutines; it fits
// goleak.VerifyTestMain. A member that does not start fails the run (see
// [testenv.Main]).
func Main(m *testing.M) testenv.Main {
	return testenv.Main{
		M: m, Name: "embedetcd", Start: startShared,
		Set: func(c io.Closer, _ error) {
			shared.mu.Lock()
			defer shared.mu.Unlock()
			shared.srv = nil
			if c != nil {
				shared.srv = c.(sharedServer).Server
			}
		},
	}
}

// Shared returns the member [Main] started, or nil outside its Run.
func Shared() *Server {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	return shared.srv
}

// startShared starts Main's member.
func startShared(ctx context.Context) (io.Closer, error) {
	var dir string
	var err error
	if base, set := os.LookupEnv(EnvDir); set || testenv.Benchmarking() {
		dir, err = os.MkdirTemp(base, "embedetcd-")
	} else {
		dir, err = testenv.MkdirTemp("embedetcd")
	}
	if err != nil {
		return nil, err
	}
	srv, err := StartServer(ctx, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return sharedServer{srv, dir}, nil
}

// sharedServer stops Main's member and removes its directory.
type sharedServer struct {
	*Server
	dir string
}

func (s sharedServer) Close() error {
	s.Server.Close()
	return os.RemoveAll(s.dir)
}
