package etcdlock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// Streams ended over and over while thousands of creations are in flight,
// keys deleted and locks unlocked meanwhile, and the refresh reads faulty:
// every deleted key's lock learns it, every other lock stays held, and in
// the end every held lock is watched on one settled stream.
func TestKeyWatchStreamsReplacedInFlight(t *testing.T) {
	testenv.Long(t, "it replaces streams in flight for several seconds")
	t.Parallel()
	const n = 1000
	fcli, in := faulty(t, 305)
	c := newLocker(t, fcli, etcdlock.WithTTL(3*time.Second))
	admin := etcdClient(t)
	locks := lockMany(t, c, "replace", n)
	rng := rand.New(rand.NewPCG(305, 1))
	in.Random(0.3, 200*time.Millisecond, reqfault.Method("KV/Txn"), reqfault.LostReply, reqfault.Twice, reqfault.Late)
	deleted, unlocked := map[int]bool{}, map[int]bool{}
	for range 30 {
		etcdlock.EndKeyWatchStreamForTest(c)
		time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond)
		i := rng.IntN(n)
		switch {
		case deleted[i] || unlocked[i]:
		case rng.IntN(2) == 0:
			if _, err := admin.Delete(t.Context(), locks[i].Key()); err != nil {
				t.Fatal(err)
			}
			deleted[i] = true
		default:
			unlocked[i] = true
			go func() {
				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				defer cancel()
				locks[i].Unlock(ctx) // a failed one goes on in the background
			}()
		}
	}
	in.Random(0, 0, nil)
	for i := range deleted {
		waitClosed(t, locks[i].Done(), 10*time.Second, "Done of "+locks[i].Name())
		if err := locks[i].Err(); !errors.Is(err, etcdlock.ErrKeyDeleted) {
			t.Errorf("%s: Err: got %v, want ErrKeyDeleted", locks[i].Name(), err)
		}
	}
	for i := range unlocked {
		waitClosed(t, locks[i].Done(), 10*time.Second, "Done of "+locks[i].Name())
		if err := locks[i].Err(); !errors.Is(err, etcdlock.ErrUnlocked) {
			t.Errorf("%s: Err: got %v, want ErrUnlocked", locks[i].Name(), err)
		}
	}
	held := n - len(deleted) - len(unlocked)
	poll.Until(t, "the held locks' watches", func() bool { k, ok := etcdlock.KeyWatchesForTest(c); return k == held && ok })
	for i, l := range locks {
		if !deleted[i] && !unlocked[i] {
			assertHeld(t, l)
		}
	}
	t.Logf("%d deleted, %d unlocked, %d held; %d streams", len(deleted), len(unlocked), held, in.Calls("Watch/Watch"))
}
