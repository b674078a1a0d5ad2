package main

import (
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// freeAddr returns a loopback address no one listens on (for a moment).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// getHealth asks http://addr/healthz, giving up after a second as a
// liveness probe would.
func getHealth(addr string) (int, string, error) {
	c := &http.Client{Timeout: time.Second}
	defer c.CloseIdleConnections()
	resp, err := c.Get("http://" + addr + "/healthz")
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// fencelock elect --health-addr answers 200 on /healthz while leading and
// while a candidate; a SIGSTOPped elect does not answer at all (the
// probe's timeout is the signal), and answers again once continued.
func TestElectServesHealth(t *testing.T) {
	logA, logB := tempFile(t, "a"), tempFile(t, "b")
	addrA, addrB := freeAddr(t), freeAddr(t)
	a := fencelock(t, nil, append([]string{"elect", "--health-addr", addrA, "sched", "--"}, leaderScript(logA)...)...)
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	waitLines(t, logA, 1, 10*time.Second)
	b := fencelock(t, nil, append([]string{"elect", "--health-addr", addrB, "sched", "--"}, leaderScript(logB)...)...)
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct{ who, addr string }{{"leader", addrA}, {"candidate", addrB}} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			code, body, err := getHealth(p.addr)
			if err == nil && code == http.StatusOK && body == "ok\n" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s's /healthz: got %d %q, %v; want 200 \"ok\\n\"", p.who, code, body, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	a.Process.Signal(syscall.SIGSTOP)
	if code, body, err := getHealth(addrA); err == nil {
		t.Errorf("stopped leader's /healthz: got %d %q, want no answer", code, body)
	}
	a.Process.Signal(syscall.SIGCONT)
	for _, c := range []struct {
		who  string
		stop func() int
	}{
		{"a", func() int { a.Process.Signal(syscall.SIGTERM); return waitExit(t, a, 10*time.Second) }},
		{"b", func() int { b.Process.Signal(syscall.SIGTERM); return waitExit(t, b, 10*time.Second) }},
	} {
		if code := c.stop(); code != 5 && code != 128+int(syscall.SIGTERM) {
			t.Errorf("%s's exit status: got %d, want 5 (its command's) or 143", c.who, code)
		}
	}
}

// An address that cannot be listened on is bad usage, before any campaign.
func TestElectHealthAddrInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	code, _, stderr := result(t, fencelock(t, nil, "elect", "--health-addr", addr, "sched", "--", "true"))
	if want := "fencelock: --health-addr " + addr + ": listen tcp"; code != exitUsage || !strings.Contains(stderr, want) {
		t.Fatalf("got exit %d, %q; want %d and %q", code, stderr, exitUsage, want)
	}
}
