package redisfence_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	redisfence "github.com/fencelock/fencelock/fence/redis"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// faults is a client's connections with two faults to arm: a reply that
// is lost (read whole from the server, then the connection is broken and
// the client sees an unexpected EOF), and a request that is held before it
// is sent.
type faults struct {
	mu      sync.Mutex
	onReply func() // armed: called when the reply has arrived, before the loss
	hold    chan struct{}
	held    chan struct{}
}

func (f *faults) options(o *redis.Options) {
	o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &faultConn{Conn: c, f: f}, nil
	}
	o.PoolSize = 1 // one connection: the armed fault hits the next command
}

// loseNextReply arms the loss of the next reply; then is called once it has
// arrived (the script ran), before the client sees the loss.
func (f *faults) loseNextReply(then func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onReply = then
}

// holdNextRequest arms a hold of the next request; held is closed when it
// is held, and it is sent when release is closed.
func (f *faults) holdNextRequest() (held, release chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held, f.hold = make(chan struct{}), make(chan struct{})
	return f.held, f.hold
}

type faultConn struct {
	net.Conn
	f *faults
}

func (c *faultConn) Write(p []byte) (int, error) {
	c.f.mu.Lock()
	held, hold := c.f.held, c.f.hold
	c.f.held, c.f.hold = nil, nil
	c.f.mu.Unlock()
	if hold != nil {
		close(held)
		<-hold
	}
	return c.Conn.Write(p)
}

func (c *faultConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.f.mu.Lock()
	then := c.f.onReply
	c.f.onReply = nil
	c.f.mu.Unlock()
	if then != nil && n > 0 {
		then()
		c.Conn.Close()
		return 0, io.ErrUnexpectedEOF
	}
	return n, err
}

// A Put whose reply is lost says so (ErrUnknownOutcome) and ran once,
// though the client resends commands (MaxRetries 3, go-redis's default),
// even when a newer token's write lands in between. The control lets
// go-redis resend the script: the copy, refused by the newer floor, says
// stale of a write that landed.
func TestReplyLostSentOnce(t *testing.T) {
	run := func(t *testing.T) (version string, err error) {
		var f faults
		c := client(t, f.options)
		s, other := mustNew(t, c, prefix(t)), (*redisfence.Store)(nil)
		other = mustNew(t, client(t), s.Prefix())
		k := "k"
		mustPut(t, s, k, 5, "a") // the scripts are on the server: the armed reply is the write's
		f.loseNextReply(func() { mustPut(t, other, k, 9, "b") })
		err = s.Put(t.Context(), k, 7, []byte("c"))
		fencewant.Record(t, other, k, 9, "b")
		return field(t, client(t), s.Key(k), "version"), err
	}
	version, err := run(t)
	fencewant.Unknown(t, err, 7)
	if version != "3" {
		t.Fatalf("version after puts 5, 7 (reply lost) and 9: got %s, want 3: token 7's put ran once", version)
	}
	t.Run("control: resent", func(t *testing.T) {
		defer redisfence.ResendForTest()()
		version, err := run(t)
		if !errors.Is(err, fence.ErrStale) || version != "3" {
			t.Fatalf("resent: got %v and version %s, want ErrStale of a put that landed (version 3)", err, version)
		}
	})
}

// A write held up in the network until a newer token has written is
// refused when it arrives, and changes nothing. The control sends a plain
// HSET the same way: it lands over the newer write.
func TestLateRequestRefused(t *testing.T) {
	var f faults
	c := client(t, f.options)
	s := mustNew(t, c, prefix(t))
	other := mustNew(t, client(t), s.Prefix())
	mustPut(t, s, "k", 5, "a")
	late := func(send func() error) error {
		held, release := f.holdNextRequest()
		errc := make(chan error, 1)
		go func() { errc <- send() }()
		<-held
		mustPut(t, other, "k", 9, "b")
		close(release)
		return <-errc
	}
	err := late(func() error { return s.Put(t.Context(), "k", 7, []byte("late")) })
	fencewant.Stale(t, err, 7, 9)
	fencewant.Record(t, other, "k", 9, "b")

	err = late(func() error { return c.HSet(t.Context(), s.Key("k"), "value", "late").Err() })
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := other.Get(t.Context(), "k"); string(r.Value) != "late" {
		t.Fatalf("control: a plain HSET held up the same way: got %q, want the late write landed", r.Value)
	}
}

// A late claim raises the floor only if it is lower; a late Update write
// whose record changed meanwhile lands nowhere.
func TestLateClaimAndUpdate(t *testing.T) {
	var f faults
	c := client(t, f.options)
	s := mustNew(t, c, prefix(t))
	other := mustNew(t, client(t), s.Prefix())
	mustPut(t, s, "k", 5, "a")
	held, release := f.holdNextRequest()
	errc := make(chan error, 1)
	go func() { _, err := s.GetForUpdate(t.Context(), "k", 7); errc <- err }()
	<-held
	mustPut(t, other, "k", 9, "b")
	close(release)
	fencewant.Stale(t, <-errc, 7, 9)
	if err := s.Put(t.Context(), "k", 8, []byte("x")); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Put(8) after 9: got %v", err)
	}

	// An update of token 9 whose write is held while token 9 writes too:
	// its write finds the version changed, and it reads again.
	calls := 0
	err := s.Update(t.Context(), "k", 9, func(old fence.Record) ([]byte, error) {
		calls++
		if calls == 1 {
			held, release := f.holdNextRequest()
			go func() { <-held; mustPut(t, other, "k", 9, "c"); close(release) }()
		}
		return append(old.Value, '+'), nil
	})
	if err != nil || calls != 2 {
		t.Fatalf("Update with a same-token write between its read and write: got %v after %d calls, want nil after 2", err, calls)
	}
	fencewant.Record(t, other, "k", 9, "c+")
}

// The server may lose its scripts (a restart, a failover, SCRIPT FLUSH):
// the next call sends the script's body, once.
func TestScriptFlushed(t *testing.T) {
	c := client(t)
	s := mustNew(t, c, prefix(t))
	mustPut(t, s, "k", 5, "a")
	if err := c.ScriptFlush(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, "k", 6, "b")
	if _, err := s.GetForUpdate(t.Context(), "k", 6); err != nil {
		t.Fatal(err)
	}
	fencewant.Record(t, s, "k", 6, "b")
	if v := field(t, c, s.Key("k"), "version"); v != "2" {
		t.Fatalf("version: got %s, want 2", v)
	}

	// Through an asynchronous client, NOSCRIPT comes with the reply, not
	// from Process: it too sends the body (it said unknown outcome, once).
	ap, err := client(t).AsyncAutoPipeline()
	if err != nil {
		t.Fatal(err)
	}
	sa := mustNew(t, ap, s.Prefix())
	if err := c.ScriptFlush(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	mustPut(t, sa, "k", 7, "c")
	fencewant.Record(t, s, "k", 7, "c")
}
