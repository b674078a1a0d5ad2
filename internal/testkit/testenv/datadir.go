package testenv

import (
	"os"
	"sync"
	"syscall"
	"testing"
)

// EnvDataDir names the directory under which test servers keep their data
// (PostgreSQL, MariaDB, versitygw and embedded etcd members); see
// [DataDir].
const EnvDataDir = "FENCELOCK_TEST_DATA"

// tmpfs is /dev/shm, which a test server's data goes to by default when it
// is a tmpfs with at least minFree free.
const (
	tmpfs      = "/dev/shm"
	tmpfsMagic = 0x01021994 // TMPFS_MAGIC, statfs(2)
	minFree    = 2 << 30
)

// DataDir returns the directory under which a test server keeps its data:
// $FENCELOCK_TEST_DATA when set; else /dev/shm when it is a writable tmpfs
// with 2 GiB free (a container's is often 64 MiB, less than one etcd WAL
// file); else "", the system's temporary directory. The servers' data is
// thrown away with the test, and on disk their fsyncs cost the tests time
// and CPU: etcdlock's -short tests took 55 s (23 s of CPU) with the
// member's data on disk and 49 s (15 s) on tmpfs.
func DataDir() string { return dataDir() }

var dataDir = sync.OnceValue(func() string {
	if d := os.Getenv(EnvDataDir); d != "" {
		return d
	}
	var st syscall.Statfs_t
	if syscall.Statfs(tmpfs, &st) != nil || st.Type != tmpfsMagic || st.Bavail*uint64(st.Bsize) < minFree {
		return ""
	}
	if syscall.Access(tmpfs, 2 /* W_OK */) != nil {
		return ""
	}
	return tmpfs
})

// TempDir returns a new directory under [DataDir] for tb, removed when tb
// ends: t.TempDir for a server's data.
func TempDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp(DataDir(), "fencelock-test-")
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
