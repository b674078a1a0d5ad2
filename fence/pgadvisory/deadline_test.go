package pgadvisory_test

import (
	"testing"
	"time"

	"github.com/fencelock/fencelock/fence/pgadvisory"
	"github.com/fencelock/fencelock/internal/testkit/netproxy"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

// Made WithSessionTimeout, a Lock cut off from its server closes Done at
// its deadline, when the server may end the session and give the lock to
// another, not a round trip later: the last ping's round trip (140 ms
// here) delays the next ping, and that ping's bound must not reach past
// the deadline.
func TestDoneByDeadlineWhenCutOff(t *testing.T) {
	t.Parallel() // it waits on timers
	cfg, _ := database(t)
	proxy, err := netproxy.Start(cfg.Host + ":" + itoa(cfg.Port))
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	viaProxy := cfg.Copy()
	viaProxy.Host, viaProxy.Port = "127.0.0.1", port(t, proxy.Addr())
	viaProxy.Fallbacks = nil
	l := acquire(t, viaProxy, lockKey(), pgadvisory.WithSessionTimeout(400*time.Millisecond), pgadvisory.WithPingInterval(200*time.Millisecond))
	proxy.Delay(70 * time.Millisecond) // each way
	slow := time.Now().Add(400 * time.Millisecond)
	poll.Until(t, "a slow ping answered", func() bool { return closed(l.Done()) || l.ValidUntil().After(slow) })
	closedAt := make(chan time.Time, 1)
	go func() { <-l.Done(); closedAt <- time.Now() }()
	proxy.Cut()
	at := <-closedAt
	late := at.Sub(l.ValidUntil())
	t.Logf("Done closed %v after the deadline", late)
	if late > 70*time.Millisecond {
		t.Fatalf("Done closed %v after the deadline, want at it (%v)", late, l.Err())
	}
	proxy.Reset()
}
