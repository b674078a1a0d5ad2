package jsfence_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	jsfence "github.com/fencelock/fencelock/fence/jetstream"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// casRaces counts, of rounds rounds, those in which more than one of 6
// kv.Update expecting one revision, sent at once through every node,
// landed: the server's conditional write is not atomic.
func casRaces(t *testing.T, kvs []jetstream.KeyValue, rounds int) int {
	t.Helper()
	multi := 0
	for i := range rounds {
		k := fmt.Sprint("cas", i)
		rev, err := kvs[0].Create(t.Context(), k, []byte("0"))
		if err != nil {
			t.Fatal(err)
		}
		var landed atomic.Int32
		var wg sync.WaitGroup
		for w := range 6 {
			wg.Go(func() {
				if _, err := kvs[w%len(kvs)].Update(t.Context(), k, []byte(fmt.Sprint(w)), rev); err == nil {
					landed.Add(1)
				}
			})
		}
		wg.Wait()
		if landed.Load() > 1 {
			multi++
		}
	}
	return multi
}

// On a replicated bucket nats-server 2.9 checks a write's expected
// revision against the writes it has applied, not those in flight: writes
// sent at once expecting one revision all land, and nothing is fenced
// (fencetest's concurrent cases lose acknowledged updates and accept
// stale tokens). CheckRevisions must say so, with ErrRevisionsIgnored;
// on a server whose conditional writes are atomic it must pass.
func TestReplicatedCheckRevisions(t *testing.T) {
	testenv.Long(t, "starts a 3-node cluster")
	kvs := clusterBucket(t)
	broken := casRaces(t, kvs, 20)
	err := newOn(t, kvs[0]).CheckRevisions(t.Context())
	t.Logf("%d of 20 rounds landed several writes on one revision; CheckRevisions: %v", broken, err)
	switch {
	case broken > 0 && !errors.Is(err, jsfence.ErrRevisionsIgnored):
		t.Fatalf("CheckRevisions on a bucket whose writes on one revision land several times: got %v, want an error matching ErrRevisionsIgnored", err)
	case broken == 0 && err != nil:
		t.Fatalf("CheckRevisions on a bucket whose conditional writes held: got %v, want nil", err)
	}
}
