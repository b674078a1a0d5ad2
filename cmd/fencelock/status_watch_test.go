package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/netproxy"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
)

// status --watch, not on a terminal, prints the queue each time it changes
// and nothing in between, from one read and a watch: the lock changing
// hands costs it no read, and one lease request, for the lease that
// appeared.
func TestStatusWatchPlain(t *testing.T) {
	t.Parallel()
	watcher, in := counted(t, nil)
	a, _ := locker(t, etcdlock.WithOwner("holder-a"))
	b, _ := locker(t, etcdlock.WithOwner("waiter-b"))
	la, err := a.Lock(t.Context(), "job")
	if err != nil {
		t.Fatal(err)
	}
	out := startWatch(t, watcher, watchView{exact: true}, "job")
	poll.Until(t, "a shown holding", func() bool { return shows(lastBlock(out), "job", "holder", "holder-a", la.Token()) })
	if got := reads(in); got != 1 {
		t.Fatalf("got %d reads of the keys before the first status, want 1", got)
	}
	got := make(chan *etcdlock.Lock, 1)
	go func() {
		lb, _ := b.Lock(t.Context(), "job")
		got <- lb
	}()
	poll.Until(t, "b shown waiting", func() bool { return strings.Contains(lastBlock(out), "waiter-b") })
	if role, _ := row(lastBlock(out), "job", "waiter-b"); role != "waiter" {
		t.Fatalf("b's role: got %q, want waiter:\n%s", role, lastBlock(out))
	}
	la.Unlock(t.Context())
	lb := <-got
	if lb == nil {
		t.Fatal("b's Lock failed")
	}
	poll.Until(t, "b shown holding, a gone", func() bool {
		last := lastBlock(out)
		return shows(last, "job", "holder", "waiter-b", lb.Token()) && !strings.Contains(last, "holder-a")
	})
	if got := reads(in); got != 1 {
		t.Errorf("got %d reads of the keys, want 1: changes come from the watch", got)
	}
	if got := in.Calls("Lease/LeaseTimeToLive"); got != 2 {
		t.Errorf("got %d lease TTL requests, want 2: a's lease and b's, once each", got)
	}
	text := out.String()
	t.Logf("the output:\n%s", text)
	if strings.Contains(text, "\x1b") {
		t.Errorf("escape codes in the output of a pipe:\n%q", text)
	}
	if n := strings.Count(text, "--- "); n > 3 {
		t.Errorf("got %d blocks for 3 states (a holds; b waits; b holds), want at most one per change:\n%s", n, text)
	}
}

// On a terminal, status --watch redraws every second, its ages counting
// on, from the status it has: seconds of redraws send no request. A
// watch replaced by a poll once a second fails it.
func TestStatusWatchRedrawsWithoutRequests(t *testing.T) {
	t.Parallel()
	watcher, in := counted(t, nil)
	a, _ := locker(t, etcdlock.WithOwner("holder-a"))
	la, err := a.Lock(t.Context(), "job")
	if err != nil {
		t.Fatal(err)
	}
	out := startWatch(t, watcher, watchView{tty: true, exact: true, every: redrawEvery}, "job")
	poll.Until(t, "a shown holding", func() bool { return shows(lastFrame(out), "job", "holder", "holder-a", la.Token()) })
	first := lastFrame(out)
	frames, sent := strings.Count(out.String(), clearScreen), requests(in)
	poll.Until(t, "two redraws", func() bool { return strings.Count(out.String(), clearScreen) >= frames+2 })
	if got := requests(in); got != sent {
		t.Errorf("got %d requests during two redraws, want none", got-sent)
	}
	if age(first, "holder-a") == age(lastFrame(out), "holder-a") {
		t.Errorf("QUEUED did not count on between redraws 2 s apart:\n%s\n%s", first, lastFrame(out))
	}
	if text := out.String(); !strings.HasPrefix(text, enterScreen) {
		t.Errorf("output begins with %q, want the alternate screen entered", text[:min(len(text), 20)])
	}
}

// A watch cut off from etcd says it is reconnecting, reads afresh once
// etcd answers again, and shows what changed meanwhile.
func TestStatusWatchReconnects(t *testing.T) {
	t.Parallel()
	proxy, err := netproxy.Start(strings.TrimPrefix(etcdEndpoints()[0], "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	watcher, in := counted(t, []string{"http://" + proxy.Addr()})
	a, _ := locker(t, etcdlock.WithOwner("holder-a"))
	b, _ := locker(t, etcdlock.WithOwner("holder-b"))
	la, err := a.Lock(t.Context(), "job")
	if err != nil {
		t.Fatal(err)
	}
	out := startWatch(t, watcher, watchView{exact: true}, "job")
	poll.Until(t, "a shown holding", func() bool { return shows(lastBlock(out), "job", "holder", "holder-a", la.Token()) })
	proxy.Cut()
	proxy.Reset()
	poll.Until(t, "reconnecting shown", func() bool { return strings.Contains(out.String(), "reconnecting: ") })
	la.Unlock(t.Context())
	lb, err := b.Lock(t.Context(), "job")
	if err != nil {
		t.Fatal(err)
	}
	proxy.Heal()
	poll.Until(t, "b shown holding after the gap", func() bool { return shows(lastBlock(out), "job", "holder", "holder-b", lb.Token()) })
	t.Logf("the output:\n%s", out.String())
	if got := reads(in); got < 2 {
		t.Errorf("got %d reads of the keys, want 2 or more: one, and one after the gap", got)
	}
}

// status --watch --json --name-prefix on a pipe prints a line of JSON per
// change of the names under the prefix, none for another name's, and exits
// 0 on SIGTERM.
func TestStatusWatchJSONPrefix(t *testing.T) {
	t.Parallel()
	locks, _ := locker(t)
	first, err := locks.Lock(t.Context(), "tenant/1/report")
	if err != nil {
		t.Fatal(err)
	}
	cmd := fencelock(t, nil, "status", "--watch", "--json", "--name-prefix", "tenant/1/")
	out := &syncBuffer{}
	cmd.Stdout = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "a line", func() bool { return strings.Count(out.String(), "\n") >= 1 })
	if _, err := locks.Lock(t.Context(), "tenant/2/report"); err != nil { // not followed
		t.Fatal(err)
	}
	second, err := locks.Lock(t.Context(), "tenant/1/audit")
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "a line with tenant/1/audit", func() bool { return strings.Contains(out.String(), "tenant/1/audit") })
	cmd.Process.Signal(syscall.SIGTERM)
	if code := waitExit(t, cmd, 10*time.Second); code != 0 {
		t.Fatalf("exit status after SIGTERM: got %d, want 0", code)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var got []string
	for _, line := range lines {
		var w watchJSONLine
		if err := json.Unmarshal([]byte(line), &w); err != nil {
			t.Fatalf("a line that is not JSON: %v\n%s", err, line)
		}
		var holders []string
		for _, q := range w.Locks {
			token := int64(0) // free
			if q.Holder != nil {
				token = q.Holder.Token
			}
			holders = append(holders, fmt.Sprintf("%s:%d", q.Name, token))
		}
		got = append(got, strings.Join(holders, " "))
	}
	want := []string{fmt.Sprintf("tenant/1/report:%d", first.Token()),
		fmt.Sprintf("tenant/1/audit:%d tenant/1/report:%d", second.Token(), first.Token())}
	if !slices.Equal(got, want) {
		t.Fatalf("lines' holders: got %q, want %q:\n%s", got, want, out.String())
	}
}

// status --name-prefix, without --watch, shows the names under the prefix
// alone.
func TestStatusNamePrefix(t *testing.T) {
	t.Parallel()
	locks, _ := locker(t, etcdlock.WithOwner("o"))
	for _, name := range []string{"tenant/1/report", "tenant/10/report", "tenant/2/report"} {
		if _, err := locks.Lock(t.Context(), name); err != nil {
			t.Fatal(err)
		}
	}
	code, out, stderr := result(t, fencelock(t, nil, "status", "--name-prefix", "tenant/1"))
	var names []string
	for line := range strings.Lines(out) {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "lock" {
			names = append(names, f[1])
		}
	}
	if want := []string{"tenant/1/report", "tenant/10/report"}; code != 0 || !slices.Equal(names, want) {
		t.Fatalf("status --name-prefix tenant/1: exit %d, locks %q; want 0, %q\n%s%s", code, names, want, out, stderr)
	}
}

// counted returns a Client under the test's prefix, on the shared etcd (or
// eps), whose requests the returned injector counts.
func counted(t *testing.T, eps []string) (*etcdlock.Client, *reqfault.Injector) {
	t.Helper()
	if eps == nil {
		eps = etcdEndpoints()
	}
	in := reqfault.New(1)
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), DialOptions: in.DialOptions()})
	if err != nil {
		t.Fatal(err)
	}
	c, err := etcdlock.New(cli, etcdlock.WithPrefix(prefix(t)), etcdlock.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()); cli.Close(); in.Close() })
	return c, in
}

// reads counts the reads of keys in.
func reads(in *reqfault.Injector) int { return in.Calls("KV/Range") + in.Calls("KV/Txn") }

// requests counts the unary requests in.
func requests(in *reqfault.Injector) int {
	return reads(in) + in.Calls("Lease/LeaseTimeToLive") + in.Calls("Lease/LeaseGrant") + in.Calls("Maintenance/Status")
}

// startWatch runs watchStatus of names into a buffer until the test ends,
// and checks then that it returned nil.
func startWatch(t *testing.T, c *etcdlock.Client, v watchView, names ...string) *syncBuffer {
	t.Helper()
	out := &syncBuffer{}
	v.out, v.header = out, "test"
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- watchStatus(ctx, c, etcdlock.StatusScope{Names: names}, v) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watchStatus: got %v, want nil once its context ended", err)
		}
		if v.tty && !strings.HasSuffix(out.String(), leaveScreen) {
			t.Errorf("output ends with %q, want the screen restored", out.String()[max(0, out.Len()-20):])
		}
	})
	return out
}

// syncBuffer is a buffer a test reads while another goroutine writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

// lastBlock is the last block that plain status --watch printed in out.
func lastBlock(out *syncBuffer) string {
	text := out.String()
	return text[max(0, strings.LastIndex(text, "--- ")):]
}

// lastFrame is the last frame that the full-screen status --watch drew in
// out.
func lastFrame(out *syncBuffer) string {
	text := out.String()
	return text[max(0, strings.LastIndex(text, clearScreen)):]
}

// row returns the role and token of the row of lock name whose owner is
// owner in a status table; "" when there is none.
func row(table, name, owner string) (string, fence.Token) {
	for line := range strings.Lines(table) {
		f := strings.Fields(line)
		if len(f) >= 5 && f[0] == "lock" && f[1] == name && f[4] == owner {
			token, _ := strconv.ParseInt(f[3], 10, 64)
			return f[2], fence.Token(token)
		}
	}
	return "", 0
}

// shows reports whether a status table shows owner in lock name's queue
// as role, with token.
func shows(table, name, role, owner string, token fence.Token) bool {
	r, tok := row(table, name, owner)
	return r == role && tok == token
}

// age is the QUEUED of owner's row in a status table.
func age(table, owner string) string {
	for line := range strings.Lines(table) {
		if f := strings.Fields(line); len(f) >= 6 && f[4] == owner {
			return f[5]
		}
	}
	return ""
}

// Ctrl-C while status --watch is still connecting (etcd answers nothing)
// stops it as it stops a watch under way: exit status 0, at once.
func TestStatusWatchInterruptedWhileConnecting(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c // held open, never answered
		}
	}()
	defer func() {
		ln.Close()
		for c := range accepted {
			c.Close()
		}
	}()
	cmd := fencelock(t, []string{ln.Addr().String()}, "status", "--watch", "--dial-timeout", "60s", "job")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-accepted:
		defer c.Close()
	case <-time.After(30 * time.Second):
		t.Fatal("fencelock never connected")
	}
	start := time.Now()
	_ = cmd.Process.Signal(os.Interrupt)
	if code := waitExit(t, cmd, 10*time.Second); code != 0 {
		t.Fatalf("exit status after Ctrl-C while connecting: got %d, want 0", code)
	}
	t.Logf("exited %v after Ctrl-C", time.Since(start).Round(time.Millisecond))
}
