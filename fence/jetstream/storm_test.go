package jsfence_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/fencelock/fencelock/fence"
	jsfence "github.com/fencelock/fencelock/fence/jetstream"
	"github.com/fencelock/fencelock/internal/testkit/netproxy"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// stormWriters, stormPuts and stormRounds size TestFaultStorm: each round
// writes one key of its own, stormWriters × stormPuts Puts, fewer than
// the 64 revisions a bucket keeps of a key, so the round's whole history
// can be read back.
const (
	stormWriters = 6
	stormPuts    = 6
	stormRounds  = 25
)

// putResult is one Put of a storm: its token, its value, and its error.
type putResult struct {
	token fence.Token
	value string
	err   error
}

// TestFaultStorm: writers with ever higher tokens Put to one key at once,
// each through a proxy of its own that a nemesis resets, cuts (a write
// delivered late) and mutes (replies lost) at random. Then, in each
// round's history as the server kept it, the tokens never go down (no
// stale write landed); every Put that returned nil is there, and none
// that was refused (stale, conflict, or any error but an unknown
// outcome). The control runs the storm on buckets that ignore the
// expected revision: a stale write lands.
func TestFaultStorm(t *testing.T) {
	testenv.Long(t, fmt.Sprintf("a fault storm: %d rounds of %d writers through proxies reset, cut and muted at random, about 10 s", stormRounds, stormWriters))
	kv, name := bucketKeeping(t, 64)
	down := storm(t, kv, name, func(kv jetstream.KeyValue) jsfence.KeyValue { return kv })
	if down != 0 {
		t.Fatalf("%d rounds' histories have a token lower than one before it, want 0", down)
	}
	t.Run("control: revision ignored", func(t *testing.T) {
		kv, name := bucketKeeping(t, 64)
		if down := storm(t, kv, name, func(kv jetstream.KeyValue) jsfence.KeyValue { return ignoring{kv} }); down == 0 {
			t.Fatalf("on buckets that ignore the revision: no stale write landed in %d rounds, want one at least", stormRounds)
		}
	})
}

// storm runs the rounds on bucket name, each writer's bucket wrapped by
// wrap, and returns how many rounds' histories have a token that went
// down; it fails t for anything else amiss.
func storm(t *testing.T, kv jetstream.KeyValue, name string, wrap func(jetstream.KeyValue) jsfence.KeyValue) (down int) {
	t.Helper()
	stores := make([]*jsfence.Store, stormWriters)
	proxies := make([]*netproxy.Proxy, stormWriters)
	for i := range stores {
		pkv, p := proxied(t, name)
		s, err := jsfence.New(wrap(pkv), jsfence.WithRequestTimeout(300*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		stores[i], proxies[i] = s, p
	}
	stop := make(chan struct{})
	var nemesisDone sync.WaitGroup
	nemesisDone.Add(1)
	go func() { defer nemesisDone.Done(); nemesis(proxies, stop) }()
	var next atomic.Int64
	rounds := make([][]putResult, stormRounds)
	for r := range rounds {
		rounds[r] = stormRound(t, stores, fmt.Sprintf("storm/%d", r), &next)
	}
	close(stop)
	nemesisDone.Wait()
	for _, p := range proxies {
		p.Heal()
	}
	outcomes := map[string]int{}
	for r, results := range rounds {
		if !checkRound(t, kv, fmt.Sprintf("storm/%d", r), results) {
			down++
		}
		for _, res := range results {
			outcomes[outcomeName(res.err)]++
		}
	}
	t.Logf("%d rounds, %d with a token that went down; Puts: %v", stormRounds, down, outcomes)
	return down
}

// outcomeName names what a Put of a storm came to, for the log.
func outcomeName(err error) string {
	switch {
	case err == nil:
		return "landed"
	case errors.Is(err, fence.ErrStale):
		return "stale"
	case errors.Is(err, fence.ErrUnknownOutcome):
		return "unknown"
	case errors.Is(err, fence.ErrConflict):
		return "conflict"
	}
	return "failed" // a read that failed: nothing written
}

// stormRound has every store Put stormPuts times to key, each with the
// next token, all at once.
func stormRound(t *testing.T, stores []*jsfence.Store, key string, next *atomic.Int64) []putResult {
	var mu sync.Mutex // guards results
	var results []putResult
	var wg sync.WaitGroup
	for w, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range stormPuts {
				tok := fence.Token(next.Add(1))
				v := fmt.Sprintf("t%d-w%d-%d", tok, w, i)
				err := s.Put(t.Context(), key, tok, []byte(v))
				mu.Lock()
				results = append(results, putResult{tok, v, err})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return results
}

// nemesis resets, cuts or mutes a random proxy every few milliseconds, for
// a few milliseconds, until stop closes.
func nemesis(proxies []*netproxy.Proxy, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(time.Duration(rand.IntN(20)) * time.Millisecond):
		}
		p := proxies[rand.IntN(len(proxies))]
		switch rand.IntN(4) {
		case 0:
			p.Reset()
			continue
		case 1:
			p.Cut() // held requests arrive late, after Heal
		case 2:
			p.CutReplies() // applied, replies held, then maybe dropped
		case 3:
			continue // a quiet spell
		}
		time.Sleep(time.Duration(rand.IntN(400)) * time.Millisecond) // the fault's length, not a wait for anything
		if rand.IntN(2) == 0 {
			p.Reset()
		}
		p.Heal()
	}
}

// checkRound reports whether key's history keeps its tokens in order; it
// fails t if a Put that returned nil is missing from it, or one that was
// refused is in it.
func checkRound(t *testing.T, kv jetstream.KeyValue, key string, results []putResult) bool {
	t.Helper()
	h, err := kv.History(t.Context(), key)
	if err != nil {
		t.Fatalf("%s: history: %v", key, err)
	}
	landed := map[string]bool{}
	var last fence.Token
	ordered := true
	for _, e := range h {
		v := e.Value()
		if len(v) < jsfence.HeaderSize {
			t.Fatalf("%s: revision %d: %d bytes, no header", key, e.Revision(), len(v))
		}
		tok := fence.Token(binary.BigEndian.Uint64(v[9:17]))
		ordered = ordered && tok >= last
		last = max(last, tok)
		landed[string(v[jsfence.HeaderSize:])] = true
	}
	for _, r := range results {
		switch {
		case r.err == nil && !landed[r.value]:
			t.Errorf("%s: Put with token %d returned nil, and is not in the key's history", key, r.token)
		case r.err != nil && !errors.Is(r.err, fence.ErrUnknownOutcome) && landed[r.value]:
			t.Errorf("%s: Put with token %d returned %v, and is in the key's history", key, r.token, r.err)
		}
	}
	return ordered
}
