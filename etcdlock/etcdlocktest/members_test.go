package etcdlocktest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/etcdlock/etcdlocktest"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// With three member processes (this test binary re-executed: TestMain
// calls MaybeRunMember), a holder keeps its lock while a majority runs,
// loses it by its validity deadline when the majority is gone, and the
// lock can be taken again once the members are back.
func TestMembers(t *testing.T) {
	testenv.Long(t, "a multi-member cluster")
	srv := etcdlocktest.New(t, etcdlocktest.WithMembers(3))
	_, locks := locker(t, srv, time.Second)
	l := mustLock(t, locks, "job")
	leader := awaitLeader(t, srv)

	srv.StopMember(leader)
	time.Sleep(2 * time.Second) // twice the TTL: keepalives go to the others
	assertHeld(t, l)

	stopped := (leader + 1) % 3
	srv.StopMember(stopped)
	until := l.ValidUntil()
	took := waitDone(t, l, time.Second+slack)
	if late := time.Since(until); late > slack {
		t.Fatalf("Done closed %v after the validity deadline, want within %v", late, slack)
	}
	if err := l.Err(); !errors.Is(err, etcdlock.ErrLost) {
		t.Fatalf("Err: got %v, want ErrLost", err)
	}
	t.Logf("without quorum, Done closed %v after StopMember (%v)", took, l.Err())

	for _, i := range []int{leader, stopped} {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		err := srv.RestartMember(ctx, i)
		cancel()
		if err != nil {
			t.Fatalf("RestartMember(%d): %v", i, err)
		}
	}
	_, other := locker(t, srv, time.Second)
	if n := mustLock(t, other, "job"); n.Token() <= l.Token() {
		t.Fatalf("next holder's token: got %d, want > %d", n.Token(), l.Token())
	}
}

func awaitLeader(t *testing.T, srv *etcdlocktest.Server) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if i := srv.Leader(ctx); i >= 0 {
			return i
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("no leader within 10s")
	return -1
}
