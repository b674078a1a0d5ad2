package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/internal/testkit/poll"
)

// A cron job run by fencelock run --try on two machines in one period: the
// first run's command takes no time and its fencelock process exits, yet
// with --min-hold the second run finds the lock held (exit 75) until the
// hold has passed. The control, without --min-hold, runs both.
func TestRunMinHold(t *testing.T) {
	t.Parallel()
	const hold = 3 * time.Second // far longer than two runs of fencelock take
	tests := []struct {
		name     string
		flags    []string
		wantCode int
	}{
		{"min hold", []string{"--min-hold", hold.String()}, exitNotAcquired},
		{"control: none", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append(append([]string{"run", "--try", "--metadata", "run 1"}, tt.flags...), "job", "--", "true")
			start := time.Now()
			if code, _, stderr := result(t, fencelock(t, nil, args...)); code != 0 {
				t.Fatalf("first run: got exit %d (%s), want 0", code, stderr)
			}
			code, _, stderr := result(t, fencelock(t, nil, args...))
			if code != tt.wantCode {
				t.Fatalf("second run in the period: got exit %d (%s), want %d", code, stderr, tt.wantCode)
			}
			if code == 0 {
				return
			}
			// status shows the first run holding it, its TTL what is left.
			code, out, stderr := result(t, fencelock(t, nil, "status", "--json", "job"))
			var st statusJSON
			if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
				t.Fatalf("status --json: exit %d (%s), output %q", code, stderr, out)
			}
			if len(st.Locks) != 1 || st.Locks[0].Holder == nil || st.Locks[0].Holder.Data != "run 1" ||
				st.Locks[0].Holder.TTLSeconds <= 0 || st.Locks[0].Holder.TTLSeconds > int64(hold/time.Second) {
				t.Fatalf("status: got %+v, want the first run holding job with a TTL in (0, %v]", st.Locks, hold)
			}
			_, cli := locker(t)
			poll.Until(t, "the lock free", func() bool {
				resp, err := cli.Get(t.Context(), prefix(t)+"lock/job/", clientv3.WithPrefix(), clientv3.WithCountOnly())
				return err == nil && resp.Count == 0
			})
			if held := time.Since(start); held < hold {
				t.Fatalf("lock free %v after the first run started, want at least %v", held, hold)
			}
			if code, _, stderr := result(t, fencelock(t, nil, args...)); code != 0 {
				t.Fatalf("run in the next period: got exit %d (%s), want 0", code, stderr)
			}
		})
	}
}

func TestRunMinHoldUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"run", "--min-hold", "-1s", "job", "--", "true"}, "--min-hold -1s: must be between 0 and"},
		{[]string{"run", "--min-hold", "1s", "--permits", "2", "job", "--", "true"}, "--min-hold and --permits cannot be set at the same time"},
	}
	for _, tt := range tests {
		code, _, stderr := result(t, fencelock(t, nil, tt.args...))
		if code != exitUsage || !strings.Contains(stderr, tt.want) {
			t.Errorf("%q: got exit %d, stderr %q; want %d and %q", tt.args, code, stderr, exitUsage, tt.want)
		}
	}
}

// A command that cannot be started takes nothing from the period: run
// --try --min-hold 50m exits with the shell's status for it (127 not
// found, 126 not executable), and another machine's run --try right after
// gets the lock. A missing or non-executable file is found before the
// lock is taken; a missing interpreter or a file the kernel cannot
// execute only when the command is started, after it was taken, and then
// the lock is released at once (the stderr says so). The control is a
// command that started and exited 127 itself: it keeps the hold, and the
// other machine's run exits 75.
func TestRunMinHoldCommandNotStarted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name       string
		cmd        []string
		wantCode   int
		wantStderr string // "" for a command that ran
		wantNext   int    // the other machine's run --try
	}{
		{"not found", []string{filepath.Join(dir, "report.sh")}, exitNoCommand, "no such file or directory", 0},
		{"not executable", []string{file("plain.sh", "#!/bin/sh\n", 0o644)}, exitCannotExec, "permission denied", 0},
		{"missing interpreter", []string{file("interp.sh", "#!/nonexistent/interpreter\n", 0o755)}, exitNoCommand, "released at once", 0},
		{"not a program", []string{file("garbage", "\x00\x01\x02\x03 not a program\n", 0o755)}, exitCannotExec, "released at once", 0},
		{"control: started, exited 127", []string{"sh", "-c", "exit 127"}, 127, "", exitNotAcquired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"run", "--try", "--min-hold", "50m", "report", "--"}, tt.cmd...)
			code, _, stderr := result(t, fencelock(t, nil, args...))
			if code != tt.wantCode {
				t.Fatalf("run of %q: got exit %d (%s), want %d", tt.cmd, code, stderr, tt.wantCode)
			}
			if tt.wantStderr == "" && stderr != "" || !strings.Contains(stderr, tt.wantStderr) {
				t.Fatalf("run of %q: got stderr %q, want it to contain %q", tt.cmd, stderr, tt.wantStderr)
			}
			if taken := strings.Contains(stderr, "released"); tt.wantStderr != "" && taken != strings.Contains(tt.wantStderr, "released") {
				t.Fatalf("run of %q: got stderr %q; want the lock taken (and released) only for a command found before", tt.cmd, stderr)
			}
			next := []string{"run", "--try", "--min-hold", "50m", "report", "--", "true"}
			if code, _, stderr := result(t, fencelock(t, nil, next...)); code != tt.wantNext {
				t.Fatalf("another machine's run right after: got exit %d (%s), want %d", code, stderr, tt.wantNext)
			}
		})
	}
}

// A command found when run --wait --min-hold looks it up, then removed or
// made non-executable while the run waits for the lock, fails to start
// once the lock is taken: the run exits 127 or 126 and releases the lock
// at once, so that another machine's run --try right after gets it. The
// control, a command left as it was, runs and keeps the hold.
func TestRunMinHoldCommandGoneWhileWaiting(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		change   func(path string) error
		wantCode int
		wantNext int
	}{
		{"removed", os.Remove, exitNoCommand, 0},
		{"made not executable", func(p string) error { return os.Chmod(p, 0o644) }, exitCannotExec, 0},
		{"control: unchanged", func(string) error { return nil }, 0, exitNotAcquired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			script := tempFile(t, "report.sh")
			if err := os.WriteFile(script, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			locks, cli := locker(t)
			holder, err := locks.Lock(t.Context(), "report")
			if err != nil {
				t.Fatal(err)
			}
			run := fencelock(t, nil, "run", "--wait", "30s", "--min-hold", "50m", "report", "--", script)
			var stderr bytes.Buffer
			run.Stderr = &stderr
			if err := run.Start(); err != nil {
				t.Fatal(err)
			}
			poll.Until(t, "the run queued", func() bool {
				resp, err := cli.Get(t.Context(), prefix(t)+"lock/report/", clientv3.WithPrefix(), clientv3.WithCountOnly())
				return err == nil && resp.Count == 2
			})
			if err := tt.change(script); err != nil {
				t.Fatal(err)
			}
			if err := holder.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			if code := waitExit(t, run, 30*time.Second); code != tt.wantCode {
				t.Fatalf("run of a command %s while it waited: got exit %d (%s), want %d", tt.name, code, stderr.String(), tt.wantCode)
			}
			if released := strings.Contains(stderr.String(), "released at once"); released != (tt.wantCode != 0) {
				t.Fatalf("stderr %q: got released at once %v, want %v", stderr.String(), released, tt.wantCode != 0)
			}
			next := []string{"run", "--try", "--min-hold", "50m", "report", "--", "true"}
			if code, _, stderr := result(t, fencelock(t, nil, next...)); code != tt.wantNext {
				t.Fatalf("another machine's run right after: got exit %d (%s), want %d", code, stderr, tt.wantNext)
			}
		})
	}
}
