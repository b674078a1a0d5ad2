package s3test

import (
	"context"
	"io"
	"os"
	"sync"
	"testing"

	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// shared is the package's server, set by [Main]'s Run.
var shared struct {
	mu  sync.Mutex
	srv *Server
	err error // why there is none, when Main found none
	set bool
	dir string
}

// Main returns m wrapped for TestMain, the same shape as pgtest.Main: its
// Run starts one server that every test of the package shares ([New]
// returns it), runs the tests, stops the server before goleak looks for
// leaked goroutines, and fits goleak.VerifyTestMain. See [testenv.Main] for
// what happens without a server.
func Main(m *testing.M) testenv.Main {
	return testenv.Main{
		M: m, Name: "s3test", Unavailable: ErrUnavailable, HowToEnable: howToEnable,
		Start: func(ctx context.Context) (io.Closer, error) {
			dir, err := testenv.MkdirTemp("s3test")
			if err != nil {
				return nil, err
			}
			s, err := Start(ctx, dir)
			if err != nil {
				os.RemoveAll(dir)
				return nil, err
			}
			return closeAndRemove{s, dir}, nil
		},
		Set: func(c io.Closer, err error) {
			shared.mu.Lock()
			defer shared.mu.Unlock()
			shared.srv = nil
			if c != nil {
				shared.srv = c.(closeAndRemove).Server
			}
			shared.err, shared.set = err, c != nil || err != nil
		},
	}
}

// closeAndRemove stops the server and removes its data directory.
type closeAndRemove struct {
	*Server
	dir string
}

func (c closeAndRemove) Close() error {
	defer os.RemoveAll(c.dir)
	return c.Server.Close()
}

// Shared returns the server [Main] started, or nil outside its Run (or
// when there is none); for examples, which have no testing.TB.
func Shared() *Server {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	return shared.srv
}

// sharedOr returns the server Main started, whether Main runs, and why
// there is no server when Main found none.
func sharedOr() (*Server, bool, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	return shared.srv, shared.set, shared.err
}
