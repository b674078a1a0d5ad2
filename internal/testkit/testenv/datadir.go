package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// EnvDataDir names the directory under which test servers keep their data
// (PostgreSQL, MariaDB, versitygw and embedded etcd members); see
// [DataDir].
const EnvDataDir = "FENCELOCK_TEST_DATA"

// tmpfs is /dev/shm, which a test server's data goes to by default when it
// is a tmpfs with at least minFree free (datadir_linux.go).
const (
	tmpfs   = "/dev/shm"
	minFree = 2 << 30
)

// DataDir returns the directory under which a test server keeps its data:
// $FENCELOCK_TEST_DATA when set; else, on Linux, /dev/shm when it is a
// writable tmpfs with 2 GiB free (a container's is often 64 MiB, less than
// one etcd WAL file); else "", the system's temporary directory. The
// servers' data is thrown away with the test, and on disk their fsyncs cost
// the tests time and CPU: etcdlock's -short tests took 55 s (23 s of CPU)
// with the member's data on disk and 49 s (15 s) on tmpfs.
func DataDir() string { return dataDir() }

var dataDir = sync.OnceValue(func() string {
	if d := os.Getenv(EnvDataDir); d != "" {
		return d
	}
	if !roomyTmpfs(tmpfs) {
		return ""
	}
	sweep(tmpfs)
	return tmpfs
})

// MkdirTemp makes a new directory for a server's data under [DataDir],
// named after what ("pgtest") and this process, so that one left behind by
// a test binary that died before its cleanup (a go test -timeout panic)
// is removed by the next: on tmpfs it holds memory.
func MkdirTemp(what string) (string, error) {
	return os.MkdirTemp(DataDir(), fmt.Sprintf("%s%s-%d-", dirPrefix, what, os.Getpid()))
}

// dirPrefix begins the name of every directory MkdirTemp makes.
const dirPrefix = "fencelock-"

// sweep removes the directories under dir that MkdirTemp made for a process
// that no longer exists.
func sweep(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		name, ok := strings.CutPrefix(e.Name(), dirPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		parts := strings.Split(name, "-") // what, pid, random
		if len(parts) != 3 {
			continue
		}
		pid, err := strconv.Atoi(parts[1])
		if err != nil || pid <= 0 || pid == os.Getpid() || alive(pid) {
			continue
		}
		_ = os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}

// TempDir returns a new directory under [DataDir] for tb, removed when tb
// ends: t.TempDir for a server's data.
func TempDir(tb testing.TB) string {
	tb.Helper()
	dir, err := MkdirTemp("test")
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	tb.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			tb.Errorf("testenv: %v", err)
		}
	})
	return dir
}
