package main

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/testkit/childproc"
)

// freeAddr returns a loopback address no one listens on (for a moment),
// never the same twice in this process: the tests that serve health and
// metrics run in parallel.
func freeAddr(t *testing.T) string {
	t.Helper()
	ports, err := childproc.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
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
	t.Parallel()
	logA, logB := tempFile(t, "a"), tempFile(t, "b")
	addrA, addrB := freeAddr(t), freeAddr(t)
	a := startElect(t, addrA, logA)
	waitLines(t, logA, 1, 10*time.Second)
	b := startElect(t, addrB, logB)
	waitHealthy(t, "leader", addrA)
	waitHealthy(t, "candidate", addrB)
	if err := a.Pause(); err != nil {
		t.Fatal(err)
	}
	if code, body, err := getHealth(addrA); err == nil {
		t.Errorf("stopped leader's /healthz: got %d %q, want no answer", code, body)
	}
	if err := a.Resume(); err != nil {
		t.Fatal(err)
	}
	waitHealthy(t, "continued leader", addrA)
	for who, p := range map[string]*childproc.Proc{"a": a, "b": b} {
		p.Signal(syscall.SIGTERM)
		var ee *exec.ExitError
		if err := p.Wait(10 * time.Second); !errors.As(err, &ee) || ee.ExitCode() != 5 && ee.ExitCode() != 128+int(syscall.SIGTERM) {
			t.Errorf("%s after SIGTERM: got %v, want exit 5 (its command's) or 143", who, err)
		}
	}
}

// startElect starts fencelock elect --health-addr addr in election sched,
// its command a leaderScript logging to log; it is killed when the test
// ends. Its TTL, 10 s, outlasts the probes' pause.
func startElect(t *testing.T, addr, log string) *childproc.Proc {
	t.Helper()
	p, err := childproc.Start(fencelock(t, nil, append([]string{"--ttl", "10s", "elect", "--health-addr", addr, "sched", "--"}, leaderScript(log)...)...), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return p
}

// waitHealthy polls http://addr/healthz until it answers 200 "ok".
func waitHealthy(t *testing.T, who, addr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body, err := getHealth(addr)
		if err == nil && code == http.StatusOK && body == "ok\n" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's /healthz: got %d %q, %v; want 200 \"ok\\n\"", who, code, body, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// An address that cannot be listened on is bad usage, before any campaign.
func TestElectHealthAddrInUse(t *testing.T) {
	t.Parallel()
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
