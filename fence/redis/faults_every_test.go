package redisfence_test

// Review tests: every script's reply lost (and every request held up),
// through each kind of go-redis client.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	redisfence "github.com/fencelock/fencelock/fence/redis"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/redistest"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// rfaults counts the scripts written on its connections and can lose the
// reply of the n-th script from now, or hold the n-th script's request.
type rfaults struct {
	mu       sync.Mutex
	scripts  int // scripts written so far (evalsha or eval)
	loseAt   int // lose the reply of script number loseAt (0: off)
	then     func()
	holdAt   int
	held     chan struct{}
	release  chan struct{}
	lastSent []byte
	// replaceWith, when set, replaces the lost reply with these bytes
	// instead of breaking the connection.
	replaceWith []byte
}

func isScript(p []byte) bool {
	return bytes.Contains(p, []byte("\r\nevalsha\r\n")) || bytes.Contains(p, []byte("\r\neval\r\n"))
}

func (f *rfaults) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &rconn{Conn: c, f: f}, nil
}

// loseReply arms the loss of the reply of the n-th script written from now.
func (f *rfaults) loseReply(n int, then func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loseAt, f.then = f.scripts+n, then
}

// holdRequest arms a hold of the n-th script written from now.
func (f *rfaults) holdRequest(n int) (held, release chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.holdAt, f.held, f.release = f.scripts+n, make(chan struct{}), make(chan struct{})
	return f.held, f.release
}

func (f *rfaults) sent() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.scripts
}

type rconn struct {
	net.Conn
	f    *rfaults
	lose func()
}

func (c *rconn) Write(p []byte) (int, error) {
	f := c.f
	f.mu.Lock()
	var held, release chan struct{}
	if isScript(p) {
		f.scripts++
		f.lastSent = append([]byte(nil), p...)
		if f.loseAt != 0 && f.scripts == f.loseAt {
			c.lose, f.loseAt = f.then, 0
			if c.lose == nil {
				c.lose = func() {}
			}
		}
		if f.holdAt != 0 && f.scripts == f.holdAt {
			held, release, f.holdAt = f.held, f.release, 0
		}
	}
	f.mu.Unlock()
	if held != nil {
		close(held)
		<-release
	}
	return c.Conn.Write(p)
}

func (c *rconn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.lose != nil && n > 0 {
		then := c.lose
		c.lose = nil
		then()
		c.f.mu.Lock()
		repl := c.f.replaceWith
		c.f.mu.Unlock()
		if repl != nil {
			// A proxy's answer: the upstream reply is dropped and an
			// error reply of the proxy's own is sent instead.
			return copy(p, repl), nil
		}
		c.Conn.Close()
		return 0, io.ErrUnexpectedEOF
	}
	return n, err
}

// clientKinds are the clients a Store or Hash may be given, each with its
// connections through f and go-redis's default retries.
func clientKinds(t *testing.T) map[string]func(t *testing.T, f *rfaults) redisfence.Client {
	kinds := map[string]func(t *testing.T, f *rfaults) redisfence.Client{
		"Client": func(t *testing.T, f *rfaults) redisfence.Client {
			if f == nil {
				return client(t)
			}
			return client(t, func(o *redis.Options) { o.Dialer = f.dial; o.PoolSize = 1 })
		},
		"AutoPipeline": func(t *testing.T, f *rfaults) redisfence.Client {
			if f == nil {
				return client(t)
			}
			c := client(t, func(o *redis.Options) { o.Dialer = f.dial; o.PoolSize = 1 })
			ap, err := c.AutoPipeline()
			if err != nil {
				t.Fatal(err)
			}
			return ap
		},
		"AsyncAutoPipeline": func(t *testing.T, f *rfaults) redisfence.Client {
			if f == nil {
				return client(t)
			}
			c := client(t, func(o *redis.Options) { o.Dialer = f.dial; o.PoolSize = 1 })
			ap, err := c.AsyncAutoPipeline()
			if err != nil {
				t.Fatal(err)
			}
			return ap
		},
		"AutoPipelineFullDuplex": func(t *testing.T, f *rfaults) redisfence.Client {
			if f == nil {
				return client(t)
			}
			c := client(t, func(o *redis.Options) { o.Dialer = f.dial; o.PoolSize = 1 })
			cfg := redis.DefaultBlockingAutoPipelineOptions()
			cfg.FullDuplex = true
			ap, err := c.AutoPipelineWithOptions(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return ap
		},
		"AsyncAutoPipelineFullDuplex": func(t *testing.T, f *rfaults) redisfence.Client {
			if f == nil {
				return client(t)
			}
			c := client(t, func(o *redis.Options) { o.Dialer = f.dial; o.PoolSize = 1 })
			cfg := redis.DefaultAutoPipelineOptions()
			cfg.FullDuplex = true
			ap, err := c.AsyncAutoPipelineWithOptions(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return ap
		},
	}
	return kinds
}

func clusterKind(t *testing.T) func(t *testing.T, f *rfaults) redisfence.Client {
	addr := redistest.NewCluster(t)
	return func(t *testing.T, f *rfaults) redisfence.Client {
		o := &redis.ClusterOptions{Addrs: []string{addr}, Protocol: 2, DisableIdentity: true, PoolSize: 1}
		if f != nil {
			o.Dialer = f.dial
		}
		c := redis.NewClusterClient(o)
		t.Cleanup(func() { c.Close() })
		return c
	}
}

// op is one fenced call with token 7 on key k, after token 5 wrote there.
type op struct {
	name    string
	scripts int // the scripts the call sends
	run     func(ctx context.Context, s *redisfence.Store, h *redisfence.Hash, k string, fnCalls *int) error
}

var ops = []op{
	{"Put", 1, func(ctx context.Context, s *redisfence.Store, h *redisfence.Hash, k string, _ *int) error {
		return s.Put(ctx, k, 7, []byte("seven"))
	}},
	{"Delete", 1, func(ctx context.Context, s *redisfence.Store, h *redisfence.Hash, k string, _ *int) error {
		return s.Delete(ctx, k, 7)
	}},
	{"GetForUpdate", 1, func(ctx context.Context, s *redisfence.Store, h *redisfence.Hash, k string, _ *int) error {
		_, err := s.GetForUpdate(ctx, k, 7)
		return err
	}},
	{"Update", 2, func(ctx context.Context, s *redisfence.Store, h *redisfence.Hash, k string, n *int) error {
		return s.Update(ctx, k, 7, func(old fence.Record) ([]byte, error) {
			*n++
			return append(old.Value, '+'), nil
		})
	}},
	{"Hash.Set", 1, func(ctx context.Context, s *redisfence.Store, h *redisfence.Hash, k string, _ *int) error {
		return h.Set(ctx, k, 7, map[string]string{"v": "seven"})
	}},
	{"Hash.GetForUpdate", 1, func(ctx context.Context, s *redisfence.Store, h *redisfence.Hash, k string, _ *int) error {
		_, err := h.GetForUpdate(ctx, k, 7, "v")
		return err
	}},
	{"Hash.Update", 2, func(ctx context.Context, s *redisfence.Store, h *redisfence.Hash, k string, n *int) error {
		return h.Update(ctx, k, 7, []string{"v"}, func(old map[string]string) (map[string]string, error) {
			*n++
			return map[string]string{"v": old["v"] + "+"}, nil
		})
	}},
}

// newerWrite writes key k with token 9 through a plain client.
func newerWrite(t *testing.T, s *redisfence.Store, h *redisfence.Hash, p, k string) {
	if err := s.Put(context.Background(), k, 9, []byte("nine")); err != nil {
		t.Errorf("newer Put: %v", err)
	}
	if err := h.Set(context.Background(), p+"h"+k, 9, map[string]string{"v": "nine"}); err != nil {
		t.Errorf("newer Hash.Set: %v", err)
	}
}

// runLost loses the reply of script number which (1 or 2) of o, lets
// token 9 write before the client sees the loss, and returns o's error,
// the scripts it sent and how often its fn ran.
func runLost(t *testing.T, kind func(*testing.T, *rfaults) redisfence.Client, o op, which int) (sent, calls int, err error) {
	var f rfaults
	c := kind(t, &f)
	p := prefix(t)
	s := mustNew(t, c, p)
	h := mustHash(t, c)
	plain := kind(t, nil)
	ps := mustNew(t, plain, p)
	ph := mustHash(t, plain)
	k := "k"
	// Token 5 writes both: the scripts are on the server (EVALSHA).
	mustPut(t, s, k, 5, "five")
	if err := h.Set(t.Context(), p+"h"+k, 5, map[string]string{"v": "five"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetForUpdate(t.Context(), k, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := h.GetForUpdate(t.Context(), p+"h"+k, 5, "v"); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(t.Context(), k, 5, func(r fence.Record) ([]byte, error) { return r.Value, nil }); err != nil {
		t.Fatal(err)
	}
	if err := h.Update(t.Context(), p+"h"+k, 5, []string{"v"}, func(m map[string]string) (map[string]string, error) { return m, nil }); err != nil {
		t.Fatal(err)
	}
	f.loseReply(which, func() { newerWrite(t, ps, ph, p, k) })
	before := f.sent()
	calls = 0
	key := k
	if strings.HasPrefix(o.name, "Hash") {
		key = p + "h" + k
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err = o.run(ctx, s, h, key, &calls)
	return f.sent() - before, calls, err
}

// TestReviewReplyLostEveryScript: for every script of the package and every
// kind of client, a reply lost after the script ran (token 9 writing
// before the client sees the loss) gives ErrUnknownOutcome, never ErrStale,
// and the script was sent once.
func TestReviewReplyLostEveryScript(t *testing.T) {
	testenv.Long(t, "every script x every client kind, each reply lost")
	kinds := clientKinds(t)
	kinds["ClusterClient"] = clusterKind(t)
	for name, kind := range kinds {
		t.Run(name, func(t *testing.T) {
			for _, o := range ops {
				for which := 1; which <= o.scripts; which++ {
					t.Run(o.name+"/script"+string(rune('0'+which)), func(t *testing.T) {
						sent, calls, err := runLost(t, kind, o, which)
						if !errors.Is(err, fence.ErrUnknownOutcome) || errors.Is(err, fence.ErrStale) {
							t.Errorf("got %v, want ErrUnknownOutcome only", err)
						}
						if sent != which {
							t.Errorf("scripts sent: %d, want %d (the lost one sent once, nothing after it)", sent, which)
						}
						if o.scripts == 2 && calls != which-1 {
							t.Errorf("fn ran %d times, want %d", calls, which-1)
						}
					})
				}
			}
		})
	}
}

// TestReviewLateEveryScript: for every script, a request held up until
// token 9 wrote is refused with ErrStale when it arrives.
func TestReviewLateEveryScript(t *testing.T) {
	testenv.Long(t, "every script x every client kind, each request late")
	kinds := clientKinds(t)
	kinds["ClusterClient"] = clusterKind(t)
	for name, kind := range kinds {
		t.Run(name, func(t *testing.T) {
			for _, o := range ops {
				for which := 1; which <= o.scripts; which++ {
					t.Run(o.name+"/script"+string(rune('0'+which)), func(t *testing.T) {
						var f rfaults
						c := kind(t, &f)
						p := prefix(t)
						s, h := mustNew(t, c, p), mustHash(t, c)
						plain := kind(t, nil)
						ps, ph := mustNew(t, plain, p), mustHash(t, plain)
						mustPut(t, s, "k", 5, "five")
						if err := h.Set(t.Context(), p+"hk", 5, map[string]string{"v": "five"}); err != nil {
							t.Fatal(err)
						}
						held, release := f.holdRequest(which)
						errc := make(chan error, 1)
						calls := 0
						key := "k"
						if strings.HasPrefix(o.name, "Hash") {
							key = p + "hk"
						}
						go func() { errc <- o.run(t.Context(), s, h, key, &calls) }()
						select {
						case <-held:
						case err := <-errc:
							t.Fatalf("not held: %v", err)
						}
						newerWrite(t, ps, ph, p, "k")
						close(release)
						err := <-errc
						var se *fence.StaleError
						if !errors.As(err, &se) || se.Current != 9 {
							t.Errorf("got %v, want a StaleError with Current 9", err)
						}
						fencewant.Record(t, ps, "k", 9, "nine")
						if m, err := ph.GetForUpdate(t.Context(), p+"hk", 9, "v"); err != nil || m["v"] != "nine" {
							t.Errorf("hash field v: %v %v, want nine", m, err)
						}
					})
				}
			}
		})
	}
}

// Control of TestReviewReplyLostEveryScript: with go-redis allowed to
// resend, the same harness sees the second copy.
func TestReviewReplyLostControl(t *testing.T) {
	testenv.Long(t, "the control of the every-script reply-lost test")
	defer redisfence.ResendForTest()()
	kinds := clientKinds(t)
	kinds["ClusterClient"] = clusterKind(t)
	for name, kind := range kinds {
		t.Run(name, func(t *testing.T) {
			for _, o := range ops {
				sent, _, err := runLost(t, kind, o, 1)
				if sent == 1 && errors.Is(err, fence.ErrUnknownOutcome) {
					t.Errorf("%s: control: sent once and unknown; the harness does not see a resend", o.name)
				}
				t.Logf("%s: %d sent, %v", o.name, sent, err)
			}
		})
	}
}

// A read timeout (server paused with CLIENT PAUSE longer than ReadTimeout)
// after the script was written: unknown, sent once, and the script runs
// when the pause ends. Through a Client and a ClusterClient, with and
// without ContextTimeoutEnabled.
func TestReviewReadTimeout(t *testing.T) {
	testenv.Long(t, "read timeouts with the script in flight (waits them out)")
	kinds := map[string]func(t *testing.T, f *rfaults, ctxTimeout bool) (redisfence.Client, redisfence.Client){
		"Client": func(t *testing.T, f *rfaults, ctxTimeout bool) (redisfence.Client, redisfence.Client) {
			return client(t, func(o *redis.Options) {
				o.Dialer, o.ReadTimeout, o.ContextTimeoutEnabled = f.dial, 200*time.Millisecond, ctxTimeout
			}), client(t)
		},
	}
	caddr := redistest.NewCluster(t)
	kinds["ClusterClient"] = func(t *testing.T, f *rfaults, ctxTimeout bool) (redisfence.Client, redisfence.Client) {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{caddr}, Protocol: 2, DisableIdentity: true,
			Dialer: f.dial, ReadTimeout: 200 * time.Millisecond, ContextTimeoutEnabled: ctxTimeout})
		plain := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{caddr}, Protocol: 2, DisableIdentity: true})
		t.Cleanup(func() { c.Close(); plain.Close() })
		return c, plain
	}
	for name, kind := range kinds {
		for _, ctxTimeout := range []bool{false, true} {
			t.Run(fmt.Sprint(name, "/ContextTimeoutEnabled=", ctxTimeout), func(t *testing.T) {
				var f rfaults
				c, plain := kind(t, &f, ctxTimeout)
				p := prefix(t)
				s, ps := mustNew(t, c, p), mustNew(t, plain, p)
				mustPut(t, s, "k", 5, "five")
				pauser := plain.(interface {
					Do(ctx context.Context, args ...any) *redis.Cmd
				})
				busy := make(chan error, 1)
				go func() {
					// A script that keeps the server busy for 700 ms: the
					// Put's script is read and run after it, when the
					// client has given up.
					busy <- pauser.Do(context.Background(), "eval", `local t = redis.call('TIME'); local s = t[1]*1000000 + t[2]
while true do local n = redis.call('TIME'); if n[1]*1000000 + n[2] - s > 700000 then break end end
return 1`, 1, p+"busy").Err()
				}()
				time.Sleep(100 * time.Millisecond)
				before := f.sent()
				ctx := t.Context()
				if ctxTimeout {
					var cancel func()
					ctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
					defer cancel()
				}
				err := s.Put(ctx, "k", 7, []byte("seven"))
				if !errors.Is(err, fence.ErrUnknownOutcome) {
					t.Errorf("got %v, want unknown", err)
				}
				if err := <-busy; err != nil {
					t.Fatal(err)
				}
				if n := f.sent() - before; n != 1 {
					t.Errorf("sent %d times", n)
				}
				// Either outcome is allowed after an unknown one.
				if r, err := ps.Get(t.Context(), "k"); err != nil || (r.Token != 7 && r.Token != 5) {
					t.Errorf("after: %v %v", r, err)
				}
			})
		}
	}
}

// Behind a proxy (Envoy's redis_proxy, twemproxy, a cloud endpoint), a
// reply lost upstream after the script was forwarded comes back as an
// error reply of the proxy's ("-ERR upstream failure"). writeError takes
// every error reply for Redis's refusal: "refused by Redis, nothing
// written", neither stale nor unknown, of a write that landed.
func TestReviewProxyErrorAfterWrite(t *testing.T) {
	var f rfaults
	f.replaceWith = []byte("-ERR upstream failure\r\n")
	c := client(t, func(o *redis.Options) { o.Dialer = f.dial; o.PoolSize = 1 })
	p := prefix(t)
	s := mustNew(t, c, p)
	mustPut(t, s, "k", 5, "five")
	f.loseReply(1, nil)
	err := s.Put(t.Context(), "k", 7, []byte("seven"))
	r, _ := mustNew(t, client(t), p).Get(t.Context(), "k")
	if r.Token == 7 && !errors.Is(err, fence.ErrUnknownOutcome) {
		t.Fatalf("Put(7) landed (Get: token %d %q), but Put said %q (unknown: %v)", r.Token, r.Value, err, errors.Is(err, fence.ErrUnknownOutcome))
	}
}
