package main

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/testkit/netproxy"
)

// leaderScript appends "start TOKEN" to log when it starts, and "stop"
// when it gets SIGTERM, on which it exits 5.
func leaderScript(log string) []string {
	return []string{"sh", "-c", `echo "start $FENCELOCK_TOKEN" >> ` + log + `; trap 'echo stop >> ` + log + `; exit 5' TERM; while :; do sleep 0.05; done`}
}

// waitLines polls log until it has n lines and returns them.
func waitLines(t *testing.T, log string, n int, within time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		lines := strings.Split(strings.TrimSpace(waitFile(t, log, within)), "\n")
		if len(lines) >= n {
			return lines
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d lines after %v, want %d", log, len(lines), within, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func tokenOf(t *testing.T, line string) int64 {
	t.Helper()
	tok, err := strconv.ParseInt(strings.TrimPrefix(line, "start "), 10, 64)
	if err != nil {
		t.Fatalf("line %q: %v", line, err)
	}
	return tok
}

// Only the leader runs its command; when it stops (SIGTERM, passed on to
// the command, whose status elect exits with), the other candidate's
// command starts with a greater token.
func TestElectRunsOnlyWhileLeading(t *testing.T) {
	t.Parallel()
	logA, logB := tempFile(t, "a"), tempFile(t, "b")
	a := fencelock(t, nil, append([]string{"elect", "--value", "a", "sched", "--"}, leaderScript(logA)...)...)
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	tokA := tokenOf(t, waitLines(t, logA, 1, 10*time.Second)[0])
	b := fencelock(t, nil, append([]string{"elect", "--value", "b", "sched", "--"}, leaderScript(logB)...)...)
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	locks, _ := locker(t)
	deadline := time.Now().Add(10 * time.Second)
	for { // b campaigns behind a
		q, err := locks.InspectElection(t.Context(), "sched")
		if err == nil && len(q.Waiters) == 1 && q.Holder.Data == "a" && q.Waiters[0].Data == "b" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b not queued behind a: %#v, %v", q, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	a.Process.Signal(syscall.SIGTERM)
	if code := waitExit(t, a, 10*time.Second); code != 5 {
		t.Fatalf("a's exit status: got %d, want its command's 5", code)
	}
	tokB := tokenOf(t, waitLines(t, logB, 1, 10*time.Second)[0])
	if tokB <= tokA {
		t.Fatalf("b's token %d, want > a's %d", tokB, tokA)
	}
	b.Process.Signal(syscall.SIGTERM)
	if code := waitExit(t, b, 10*time.Second); code != 5 {
		t.Fatalf("b's exit status: got %d, want 5", code)
	}
}

// Leadership lost (the link to etcd cut) stops the command; without
// --restart elect exits 79, with it the command runs again, with a newer
// token, once this instance leads again.
func TestElectLoss(t *testing.T) {
	t.Parallel()
	for _, restart := range []bool{false, true} {
		t.Run("restart="+strconv.FormatBool(restart), func(t *testing.T) {
			p, err := netproxy.Start(strings.TrimPrefix(etcdEndpoints()[0], "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			log := tempFile(t, "log")
			args := []string{"elect", "--kill-after", "500ms", "--restart=" + strconv.FormatBool(restart), "lossy", "--"}
			cmd := fencelock(t, []string{"http://" + p.Addr()}, append(args, leaderScript(log)...)...)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			first := tokenOf(t, waitLines(t, log, 1, 10*time.Second)[0])
			cut := time.Now()
			p.Cut()
			if !restart {
				code := waitExit(t, cmd, 10*time.Second)
				if took := time.Since(cut); code != exitLost || took > 2500*time.Millisecond {
					t.Fatalf("exit %d after %v, want %d within TTL + kill-after + 1s", code, took, exitLost)
				}
				return
			}
			if stop := waitLines(t, log, 2, 10*time.Second)[1]; stop != "stop" { // the term is lost
				t.Fatalf("second line: got %q, want stop", stop)
			}
			p.Reset()
			p.Heal()
			second := tokenOf(t, waitLines(t, log, 3, 15*time.Second)[2])
			if second <= first {
				t.Fatalf("second term's token %d, want > %d", second, first)
			}
			cmd.Process.Signal(syscall.SIGTERM)
			if code := waitExit(t, cmd, 10*time.Second); code != 5 {
				t.Fatalf("exit status after SIGTERM: got %d, want 5", code)
			}
		})
	}
}
