package jsfence_test

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fencelock/fencelock/fence"
	jsfence "github.com/fencelock/fencelock/fence/jetstream"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/natstest"
	"github.com/fencelock/fencelock/internal/testkit/netproxy"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

// proxied returns bucket name on a connection through a TCP proxy to the
// shared server, which reconnects at once when the proxy resets it.
func proxied(t *testing.T, name string) (jetstream.KeyValue, *netproxy.Proxy) {
	t.Helper()
	url := natstest.New(t).URL()
	p, err := netproxy.Start(url[len("nats://"):])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	nc, err := nats.Connect("nats://"+p.Addr(), nats.ReconnectWait(10*time.Millisecond), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	return kv, p
}

// loseReply has s Put key with token, its reply held in p until the write
// has landed (other sees it), then dropped (the connection reset); between
// the two, between runs. It returns Put's error.
func loseReply(t *testing.T, p *netproxy.Proxy, s, other *jsfence.Store, key string, token fence.Token, value string, between func()) error {
	t.Helper()
	p.CutReplies()
	errc := make(chan error, 1)
	go func() { errc <- s.Put(t.Context(), key, token, []byte(value)) }()
	poll.Until(t, "the write to land", func() bool {
		r, err := other.Get(t.Context(), key)
		return err == nil && string(r.Value) == value
	})
	if between != nil {
		between()
	}
	p.Reset()
	p.Heal()
	return <-errc
}

// A Put whose reply is lost (the proxy holds it, then drops it with the
// connection) reads the key back, finds its own write there by its id,
// and returns nil: it landed once. The control turns the recognition off:
// the Put says its outcome is unknown, and the caller, retrying it as it
// must, makes the write land twice.
func TestReplyLostRecognised(t *testing.T) {
	t.Parallel() // waits out request timeouts
	kv, name := bucket(t)
	other := mustNew(t, kv)
	run := func(t *testing.T, recognise bool) error {
		pkv, p := proxied(t, name)
		s := mustNew(t, pkv, jsfence.WithRequestTimeout(500*time.Millisecond))
		if !recognise {
			jsfence.WithoutRecognition(s)
		}
		mustPut(t, s, key(t), 5, "a")
		return loseReply(t, p, s, other, key(t), 7, "b", nil)
	}
	if err := run(t, true); err != nil {
		t.Fatalf("Put with its reply lost: got %v, want nil (its write recognised)", err)
	}
	fencewant.Record(t, other, key(t), 7, "b")
	if n := landed(t, kv, key(t), "b"); n != 1 {
		t.Fatalf("the write landed %d times, want 1", n)
	}
	t.Run("control: not recognised", func(t *testing.T) {
		k := key(t)
		err := run(t, false)
		fencewant.Unknown(t, err, 7)
		mustPut(t, other, k, 7, "b") // the caller's retry
		if n := landed(t, kv, k, "b"); n != 2 {
			t.Fatalf("the write landed %d times, want 2", n)
		}
	})
}

// An Update whose final write's reply is lost (the proxy holds replies
// from the moment fn returns) reads the key back, finds its write, and
// returns nil without calling fn again. The control turns the recognition
// off: the outcome is unknown, and the caller's retry appends twice.
func TestUpdateReplyLostRecognised(t *testing.T) {
	t.Parallel() // waits out request timeouts
	kv, name := bucket(t)
	other := mustNew(t, kv)
	run := func(t *testing.T, recognise bool) (calls int, err error) {
		pkv, p := proxied(t, name)
		s := mustNew(t, pkv, jsfence.WithRequestTimeout(500*time.Millisecond))
		if !recognise {
			jsfence.WithoutRecognition(s)
		}
		k := key(t)
		mustPut(t, s, k, 7, "a")
		errc := make(chan error, 1)
		go func() {
			errc <- s.Update(t.Context(), k, 7, func(old fence.Record) ([]byte, error) {
				calls++
				p.CutReplies()
				return append(old.Value, '+'), nil
			})
		}()
		poll.Until(t, "the write to land", func() bool {
			r, err := other.Get(t.Context(), k)
			return err == nil && string(r.Value) == "a+"
		})
		p.Reset()
		p.Heal()
		err = <-errc // fn's calls are over
		return calls, err
	}
	if calls, err := run(t, true); err != nil || calls != 1 {
		t.Fatalf("Update with its reply lost: got %v after %d calls of fn, want nil after 1", err, calls)
	}
	fencewant.Record(t, other, key(t), 7, "a+")
	t.Run("control: not recognised", func(t *testing.T) {
		k := key(t)
		_, err := run(t, false)
		fencewant.Unknown(t, err, 7)
		if err := other.Update(t.Context(), k, 7, func(old fence.Record) ([]byte, error) { return append(old.Value, '+'), nil }); err != nil {
			t.Fatal(err) // the caller's retry
		}
		fencewant.Record(t, other, k, 7, "a++")
	})
}

// A Put whose reply is lost while a newer token writes after it says its
// outcome is unknown: its write landed, so it is not stale, and it is no
// longer the key's last, so it is not recognised either.
func TestReplyLostNewerBetween(t *testing.T) {
	t.Parallel() // waits out request timeouts
	kv, name := bucket(t)
	other := mustNew(t, kv)
	pkv, p := proxied(t, name)
	s := mustNew(t, pkv, jsfence.WithRequestTimeout(500*time.Millisecond))
	k := key(t)
	mustPut(t, s, k, 5, "a")
	err := loseReply(t, p, s, other, k, 7, "b", func() { mustPut(t, other, k, 9, "c") })
	fencewant.Unknown(t, err, 7)
	fencewant.Record(t, other, k, 9, "c")
	if n := landed(t, kv, k, "b"); n != 1 {
		t.Fatalf("the write landed %d times, want 1", n)
	}
}

// A write held up in the network (the proxy cut) until a newer token has
// written is refused when it arrives, since the revision it expects is no
// longer the key's last; Put then reads the key and refuses for the
// token. Nothing of it lands. The control sends it through a bucket that
// ignores the expected revision: it lands over the newer write.
func TestLateWriteRefused(t *testing.T) {
	kv, name := bucket(t)
	other := mustNew(t, kv)
	run := func(t *testing.T, wrap func(jetstream.KeyValue) jsfence.KeyValue) error {
		pkv, p := proxied(t, name)
		onUpdate := make(chan struct{}, 1)
		s, err := jsfence.New(sent{wrap(pkv), onUpdate})
		if err != nil {
			t.Fatal(err)
		}
		k := key(t)
		mustPut(t, s, k, 5, "a") // kv.Create: the revision the late write expects
		p.Cut()
		errc := make(chan error, 1)
		go func() { errc <- s.Put(t.Context(), k, 7, []byte("late")) }()
		<-onUpdate // sent on the cached revision, into the cut
		mustPut(t, other, k, 9, "b")
		p.Heal()
		return <-errc
	}
	k := key(t)
	fencewant.Stale(t, run(t, func(kv jetstream.KeyValue) jsfence.KeyValue { return kv }), 7, 9)
	fencewant.Record(t, other, k, 9, "b")
	if n := landed(t, kv, k, "late"); n != 0 {
		t.Fatalf("the late write landed %d times, want 0", n)
	}
	t.Run("control: revision ignored", func(t *testing.T) {
		k := key(t)
		if err := run(t, func(kv jetstream.KeyValue) jsfence.KeyValue { return ignoring{kv} }); err != nil {
			t.Fatalf("late Put on a bucket that ignores revisions: got %v, want nil", err)
		}
		fencewant.Record(t, other, k, 7, "late")
	})
}

// An Update whose read is stale by the time it writes (a newer token
// wrote while fn ran) is refused by the revision it read, reads again,
// and refuses for the token: fn's value never lands. The control runs it
// on a bucket that ignores the expected revision: fn's value, computed
// from the stale read, lands over the newer write.
func TestStaleReadRefused(t *testing.T) {
	kv, _ := bucket(t)
	other := mustNew(t, kv)
	run := func(t *testing.T, s *jsfence.Store) error {
		k := key(t)
		mustPut(t, other, k, 5, "a")
		read, release := make(chan struct{}), make(chan struct{})
		errc := make(chan error, 1)
		calls := 0
		go func() {
			errc <- s.Update(t.Context(), k, 7, func(old fence.Record) ([]byte, error) {
				if calls++; calls == 1 {
					close(read)
					<-release
				}
				return append(old.Value, "+7"...), nil
			})
		}()
		<-read
		mustPut(t, other, k, 9, "b")
		close(release)
		return <-errc
	}
	fencewant.Stale(t, run(t, mustNew(t, kv)), 7, 9)
	fencewant.Record(t, other, key(t), 9, "b")
	t.Run("control: revision ignored", func(t *testing.T) {
		s, err := jsfence.New(ignoring{kv})
		if err != nil {
			t.Fatal(err)
		}
		if err := run(t, s); err != nil {
			t.Fatalf("Update on a bucket that ignores revisions: got %v, want nil", err)
		}
		fencewant.Record(t, other, key(t), 7, "a+7")
	})
}

// A write delivered twice (the copy after it, expecting the revision the
// write replaced, its refusal the answer the Store gets) is recognised by
// its id: Put returns nil, and Update does not call fn again. The control
// turns the recognition off: Put writes again and Update appends twice.
func TestDuplicateRecognised(t *testing.T) {
	kv, _ := bucket(t)
	run := func(t *testing.T, recognise bool) (puts int, value string) {
		on := false
		s := mustNew(t, twice{kv, &on})
		if !recognise {
			jsfence.WithoutRecognition(s)
		}
		k := key(t)
		mustPut(t, s, k, 5, "a") // kv.Create: the revision the next expects
		on = true
		mustPut(t, s, k, 7, "b")
		puts = landed(t, kv, k, "b")
		on = true
		err := s.Update(t.Context(), k, 7, func(old fence.Record) ([]byte, error) {
			return append(old.Value, '+'), nil
		})
		if err != nil {
			t.Fatalf("Update: got %v, want nil", err)
		}
		r, err := s.Get(t.Context(), k)
		if err != nil {
			t.Fatal(err)
		}
		return puts, string(r.Value)
	}
	if puts, v := run(t, true); puts != 1 || v != "b+" {
		t.Fatalf("Put landed %d times, Update made %q, want 1 and \"b+\"", puts, v)
	}
	t.Run("control: not recognised", func(t *testing.T) {
		if puts, v := run(t, false); puts != 2 || v != "b++" {
			t.Fatalf("Put landed %d times, Update made %q, want 2 and \"b++\"", puts, v)
		}
	})
}

// CheckRevisions passes on nats-server, and catches a bucket that ignores
// the expected revision of a write.
func TestCheckRevisions(t *testing.T) {
	kv, _ := bucket(t)
	s, err := jsfence.New(kv, jsfence.WithPrefix("p/"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // the second finds the probe's key written
		if err := s.CheckRevisions(t.Context()); err != nil {
			t.Fatalf("CheckRevisions %d: got %v, want nil", i+1, err)
		}
	}
	t.Run("control: revision ignored", func(t *testing.T) {
		s, err := jsfence.New(ignoring{kv})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.CheckRevisions(t.Context()); !errors.Is(err, jsfence.ErrRevisionsIgnored) {
			t.Fatalf("got %v, want an error matching ErrRevisionsIgnored", err)
		}
	})
}
