package embedetcd

import (
	"context"
	"io"
	"os"
	"testing"

	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// EnvDir names a directory for the data of [Main]'s member (e.g. /dev/shm,
// for tmpfs); the system's temporary directory by default.
const EnvDir = "FENCELOCK_ETCD_DIR"

// Main is the TestMain of a package whose tests share one embedded etcd
// member, in the shape every package with a shared server uses
// ([testenv.Main]): the member starts in a new directory under $[EnvDir],
// set receives its endpoints before the tests run, and after them the
// member stops and its directory is removed. Pass the result to
// goleak.VerifyTestMain, which checks for leaked goroutines once the member
// has stopped.
func Main(m *testing.M, name string, set func(endpoints []string)) testenv.Main {
	return testenv.Main{
		M: m, Name: name, Start: startShared,
		Set: func(c io.Closer, _ error) {
			if c != nil {
				set(c.(sharedServer).Endpoints())
			}
		},
	}
}

// startShared starts Main's member.
func startShared(ctx context.Context) (io.Closer, error) {
	dir, err := os.MkdirTemp(os.Getenv(EnvDir), "embedetcd-")
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
