package dynamofence_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

// held is a lock held for the test's length.
type held struct{ token fence.Token }

func (h held) Token() fence.Token    { return h.token }
func (h held) Done() <-chan struct{} { return nil }

// TestOutboxDispatcher: outbox.Dispatcher, polling the Outbox, delivers
// every recorded effect once, in order per resource, and settles them all.
func TestOutboxDispatcher(t *testing.T) {
	_, o := newOutbox(t)
	var want []outbox.Effect
	for i := range 3 {
		for _, res := range []string{"a", "b"} {
			e := effect(res, int64(i+1), 0)
			if err := record(o)(t.Context(), fence.Claim{Resource: res, Token: e.Token}, []outbox.Effect{e}); err != nil {
				t.Fatal(err)
			}
			want = append(want, e)
		}
	}
	var mu sync.Mutex
	sent := map[string][]string{} // per resource, the keys in the order sent
	d, err := outbox.NewDispatcher(o, outbox.SenderFunc(func(_ context.Context, e outbox.Effect) error {
		mu.Lock()
		defer mu.Unlock()
		sent[e.Resource] = append(sent[e.Resource], e.Key())
		return nil
	}), outbox.WithPollInterval(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx, held{token: 1}, outbox.All) }()
	poll.Until(t, "every effect settled", func() bool {
		got, err := o.Pending(t.Context(), outbox.All, nil, 10)
		return err == nil && len(got) == 0
	})
	cancel()
	<-ran
	for _, res := range []string{"a", "b"} {
		var keys []string
		for _, e := range want {
			if e.Resource == res {
				keys = append(keys, e.Key())
			}
		}
		if got := sent[res]; !slices.Equal(got, keys) {
			t.Errorf("sent on %s: got %v, want %v", res, got, keys)
		}
	}
}
