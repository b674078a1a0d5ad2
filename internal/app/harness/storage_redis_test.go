package harness

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fencelock/fencelock/internal/app/harness/check"
	"github.com/fencelock/fencelock/internal/testkit/redistest"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// The redis kind, on a real redis-server with the run's append-only file:
// a paused holder's Put after a newer token's is refused by fence/redis's
// script, so Redis's own record (the AOF) does not have it; the control's
// plain HSET lands, after the newer write, and the checker finds it.
func TestRedisHistory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "redis")
	srv, err := redistest.StartIn(t.Context(), dir, "--appendonly", "yes", "--appendfsync", "always", "--auto-aof-rewrite-percentage", "0")
	if err != nil {
		if os.Getenv(redistest.EnvAddr) == "" {
			testenv.NoServer(t, err, redistest.ErrUnavailable, "install redis-server (bash .ci/setup.sh)")
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	open := func() redisResource {
		r, err := openRedisResource(srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.close)
		return r
	}
	old, newer := open(), open()
	checkPaused(t, check.ResRedis, old, newer, writeAfterNewer,
		func(st *check.Storage) error { return readRedis(st, dir, []string{"fenced", "control"}) })

	// A command cut short at the end of the file (Redis writing it as the
	// check reads) is left for the next read, not an error.
	files, err := aofFiles(filepath.Join(dir, "appendonlydir"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(files[len(files)-1], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString("*4\r\n$4\r\nHSET\r\n$3\r\nfen")
	f.Close()
	if err := readRedis(check.NewStorage(), dir, []string{"fenced"}); err != nil {
		t.Fatalf("reading an AOF whose last command is cut short: %v", err)
	}
}
