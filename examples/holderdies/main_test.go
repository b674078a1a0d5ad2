package main

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"testing"

	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/examples/internal/redisproc"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// TestMain lets the test binary act as a holder process when the lesson
// starts one.
func TestMain(m *testing.M) {
	if os.Getenv(envHolder) != "" {
		if err := run(os.Stdout); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// TestLesson plays the four handoffs against real redis-server and etcd and
// checks the story's claims from what happened. The waits are measured and
// logged; they are held only to what the story says of them: a killed
// holder's lock waits for its lease on both backends (so not much less than
// a TTL's renewal interval), a graceful stop hands over well before the lease runs out,
// and etcd's tokens grow where Redis' values cannot be ordered.
func TestLesson(t *testing.T) {
	var out bytes.Buffer
	hs, err := lesson(&out)
	if errors.Is(err, redisproc.ErrUnavailable) {
		testenv.NoServer(t, err, redisproc.ErrUnavailable, redisproc.HowToEnable)
	}
	if err != nil {
		t.Fatalf("lesson: %v\n%s", err, out.String())
	}
	t.Log("\n" + out.String())
	if len(hs) != 4 {
		t.Fatalf("got %d handoffs, want 4", len(hs))
	}
	for _, backend := range []string{"redis", "etcd"} {
		killed, stopped := find(hs, backend, false), find(hs, backend, true)
		t.Logf("%s: next holder waited %v after SIGKILL, %v after SIGTERM", backend, killed.wait, stopped.wait)
		// A killed holder renewed at most ttl/3 before dying: at least 2/3 of
		// the lease was left.
		if min := ttl / 2; killed.wait < min {
			t.Errorf("%s: after SIGKILL the next holder waited %v, want at least %v: the lease was not waited out", backend, killed.wait, min)
		}
		// Released on the way out, the lock is free well before its lease
		// would have run out.
		if max := ttl / 2; stopped.wait >= max {
			t.Errorf("%s: after SIGTERM the next holder waited %v, want less than %v: the holder did not release", backend, stopped.wait, max)
		}
	}
	for _, graceful := range []bool{false, true} {
		e := find(hs, "etcd", graceful)
		old, err1 := strconv.ParseInt(e.old, 10, 64)
		cur, err2 := strconv.ParseInt(e.new, 10, 64)
		if err := errors.Join(err1, err2); err != nil || cur <= old {
			t.Errorf("etcd tokens: got old %q, next %q, want the next one greater (%v)", e.old, e.new, err)
		}
		if r := find(hs, "redis", graceful); r.old == r.new || r.new == "" {
			t.Errorf("redis values: got old %q, next %q, want two distinct values", r.old, r.new)
		}
	}
	if err := fenceLateWrite(find(hs, "etcd", false)); !errors.Is(err, fence.ErrStale) {
		t.Errorf("the dead etcd holder's late write: got %v, want fence.ErrStale", err)
	}
}
