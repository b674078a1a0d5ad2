package harness

import (
	"os"
	"testing"

	"github.com/fencelock/fencelock/internal/app/harness/check"
	"github.com/fencelock/fencelock/internal/testkit/natstest"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// The jetstream kind, on a real nats-server with a bucket as a run
// creates it: a paused holder's Put after a newer token's is refused by
// its revision (fence/jetstream's kv.Update), so the bucket's own history
// does not have it; the control's plain kv.Put lands, after the newer
// write, and the checker finds it. The history keeps more entries of a
// key than a bucket's History of 64.
func TestJetStreamHistory(t *testing.T) {
	srv, err := natstest.Start(t.Context())
	if err != nil {
		if os.Getenv(natstest.EnvURL) == "" {
			testenv.NoServer(t, err, natstest.ErrUnavailable, "install nats-server (bash .ci/setup.sh)")
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	const bucket = "fencecheck-test"
	if err := createJSBucket(t.Context(), srv.URL(), bucket); err != nil {
		t.Fatal(err)
	}
	open := func() jsResource {
		r, err := openJSResource(t.Context(), srv.URL(), bucket)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.close)
		return r
	}
	old, newer := open(), open()
	read := func(st *check.Storage) error {
		return readJetStream(t.Context(), st, srv.URL(), bucket, []string{"fenced", "control"})
	}
	checkPaused(t, check.ResJetStream, old, newer, writeAfterNewer, read)

	// Past a bucket's History of 64, every entry is still there.
	for i := range 70 {
		if err := newer.write(t.Context(), true, "long", 3, "w1/t3/s"+string(rune('a'+i%26))); err != nil {
			t.Fatal(err)
		}
	}
	st := check.NewStorage()
	if err := readJetStream(t.Context(), st, srv.URL(), bucket, []string{"long"}); err != nil {
		t.Fatal(err)
	}
	if got := len(st.Writes[check.ResourceName(check.ResJetStream, "long")]); got != 70 {
		t.Errorf("long history: got %d entries, want 70", got)
	}
}
