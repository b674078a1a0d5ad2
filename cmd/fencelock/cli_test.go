package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
	"github.com/fencelock/fencelock/internal/testkit/childproc"
	"github.com/fencelock/fencelock/internal/testkit/netproxy"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
)

// The child sees its lock's token, name, key, lease and TTL, exactly as
// etcd has them; fencelock exits with the child's status and releases.
func TestRunEnvironmentAndStatus(t *testing.T) {
	t.Parallel()
	locks, _ := locker(t)
	env, release := tempFile(t, "env"), tempFile(t, "release")
	cmd := fencelock(t, nil, "run", "--metadata", "nightly", "job", "--", "sh", "-c",
		`echo "$FENCELOCK_TOKEN $FENCELOCK_NAME $FENCELOCK_KEY $FENCELOCK_LEASE $FENCELOCK_TTL" > `+env+
			`; while [ ! -e `+release+` ]; do sleep 0.02; done; exit 3`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(waitFile(t, env, 10*time.Second))
	q, err := locks.Inspect(t.Context(), "job")
	if err != nil || q.Holder == nil {
		t.Fatalf("Inspect while the child runs: %#v, %v", q, err)
	}
	h := q.Holder
	want := []string{strconv.FormatInt(int64(h.Token), 10), "job", h.Key, fmt.Sprintf("%016x", int64(h.Lease)), "1"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("child's environment: got %q, want %q", got, want)
	}
	if h.Data != "nightly" {
		t.Fatalf("metadata: got %q, want nightly", h.Data)
	}
	os.WriteFile(release, []byte("x"), 0o644)
	if code := waitExit(t, cmd, 10*time.Second); code != 3 {
		t.Fatalf("exit status: got %d, want the child's 3", code)
	}
	if q, err := locks.Inspect(t.Context(), "job"); err != nil || q.Holder != nil {
		t.Fatalf("after the run: holder %#v (%v), want none", q.Holder, err)
	}
}

// Concurrent runs of one name never overlap: each child logs its start and
// end times, and no interval may intersect another.
func TestRunsNeverOverlap(t *testing.T) {
	t.Parallel()
	log := tempFile(t, "log")
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				cmd := fencelock(t, nil, "run", "--wait", "30s", "shared", "--", "sh", "-c",
					fmt.Sprintf(`echo "s $(date +%%s%%N) %d" >> %s; sleep 0.05; echo "e $(date +%%s%%N) %d" >> %s`, i, log, i, log))
				if code, _, stderr := result(t, cmd); code != 0 {
					t.Errorf("run %d: exit %d: %s", i, code, stderr)
				}
			}
		}()
	}
	wg.Wait()
	b, _ := os.ReadFile(log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 18 {
		t.Fatalf("log: %d lines, want 18:\n%s", len(lines), b)
	}
	// Appends are ordered: a start must be followed by the same run's end.
	for i := 0; i < len(lines); i += 2 {
		s, e := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if s[0] != "s" || e[0] != "e" || s[2] != e[2] {
			t.Fatalf("overlapping runs at line %d:\n%s", i+1, b)
		}
	}
}

// Cutting the holder's link to etcd stops the child (which ignores
// SIGTERM, so SIGKILL) within TTL + --kill-after + 1 s, and fencelock
// exits 79.
func TestRunStopsChildWhenLockLost(t *testing.T) {
	t.Parallel()
	p, err := netproxy.Start(strings.TrimPrefix(etcdEndpoints()[0], "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	started := tempFile(t, "started")
	cmd := fencelock(t, []string{"http://" + p.Addr()}, "run", "--kill-after", "500ms", "cut", "--", "sh", "-c",
		`trap '' TERM; echo up > `+started+`; while :; do sleep 0.05; done`)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, started, 10*time.Second)
	cut := time.Now()
	p.Cut()
	code := waitExit(t, cmd, 10*time.Second)
	took := time.Since(cut)
	t.Logf("stopped %v after the cut", took.Round(time.Millisecond))
	if code != exitLost {
		t.Fatalf("exit status: got %d, want %d; stderr: %s", code, exitLost, stderr.String())
	}
	if limit := time.Second + 500*time.Millisecond + time.Second; took > limit {
		t.Fatalf("stopped %v after the cut, want within TTL + kill-after + 1s = %v", took, limit)
	}
	if !strings.Contains(stderr.String(), "lost while the command ran") {
		t.Fatalf("stderr: got %q, want it to say the lock was lost", stderr.String())
	}
}

// SIGTERM and SIGINT sent to fencelock reach the child, whose status
// fencelock then exits with.
func TestRunForwardsSignals(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			started, got := tempFile(t, "started"), tempFile(t, "got")
			cmd := fencelock(t, nil, "run", "sig", "--", "sh", "-c",
				`trap 'echo got > `+got+`; exit 7' TERM INT; echo up > `+started+`; while :; do sleep 0.05; done`)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitFile(t, started, 10*time.Second)
			cmd.Process.Signal(sig)
			if code := waitExit(t, cmd, 10*time.Second); code != 7 {
				t.Fatalf("exit status: got %d, want the child's 7", code)
			}
			waitFile(t, got, time.Second)
		})
	}
}

func TestRunNotAcquired(t *testing.T) {
	t.Parallel()
	locks, _ := locker(t, etcdlock.WithOwner("host-7/4121"))
	l, err := locks.Lock(t.Context(), "busy")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(t.Context())
	code, _, stderr := result(t, fencelock(t, nil, "run", "--try", "busy", "--", "true"))
	if code != exitNotAcquired || !strings.Contains(stderr, "host-7/4121") || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("--try: exit %d, stderr %q; want %d and one line naming host-7/4121", code, stderr, exitNotAcquired)
	}
	code, _, stderr = result(t, fencelock(t, nil, "run", "--wait", "300ms", "busy", "--", "true"))
	if code != exitNotAcquired || !strings.Contains(stderr, "not acquired within") || !strings.Contains(stderr, "host-7/4121") {
		t.Fatalf("--wait: exit %d, stderr %q; want %d, not acquired, naming the holder", code, stderr, exitNotAcquired)
	}
}

func TestStatusJSON(t *testing.T) {
	t.Parallel()
	a, _ := locker(t, etcdlock.WithOwner("a"))
	l, err := a.Lock(t.Context(), "queue", etcdlock.WithMetadata("first"))
	if err != nil {
		t.Fatal(err)
	}
	var waiters []*etcdlock.Client
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for _, owner := range []string{"b", "c"} {
		w, _ := locker(t, etcdlock.WithOwner(owner))
		waiters = append(waiters, w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if l, err := w.Lock(ctx, "queue"); err == nil {
				l.Unlock(context.Background())
			}
		}()
		deadline := time.Now().Add(10 * time.Second)
		for { // queue them in this order
			q, err := a.Inspect(t.Context(), "queue")
			if err == nil && len(q.Waiters) == len(waiters) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("waiter not queued")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	term, err := a.Campaign(t.Context(), "sched", "10.0.0.7")
	if err != nil {
		t.Fatal(err)
	}
	defer term.Resign(t.Context())

	code, out, stderr := result(t, fencelock(t, nil, "status", "--json"))
	if code != 0 {
		t.Fatalf("status --json: exit %d: %s", code, stderr)
	}
	var st statusJSON
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json output does not parse: %v\n%s", err, out)
	}
	if len(st.Locks) != 1 || st.Locks[0].Holder == nil {
		t.Fatalf("locks: got %+v, want queue with a holder", st.Locks)
	}
	q := st.Locks[0]
	if q.Name != "queue" || q.Holder.Owner != "a" || q.Holder.Token != int64(l.Token()) || q.Holder.Data != "first" || q.Holder.TTLSeconds < 0 {
		t.Fatalf("holder: got %+v, want a's lock, token %d", q.Holder, l.Token())
	}
	if len(q.Waiters) != 2 || q.Waiters[0].Owner != "b" || q.Waiters[1].Owner != "c" || q.Waiters[0].Token >= q.Waiters[1].Token {
		t.Fatalf("waiters: got %+v, want b then c", q.Waiters)
	}
	if len(st.Elections) != 1 || st.Elections[0].Holder == nil || st.Elections[0].Holder.Data != "10.0.0.7" || st.Elections[0].Holder.Token != int64(term.Token()) {
		t.Fatalf("elections: got %+v, want sched led by a's term", st.Elections)
	}
	code, out, _ = result(t, fencelock(t, nil, "status", "queue"))
	if code != 0 || !strings.Contains(out, "holder") || strings.Count(out, "waiter") != 2 {
		t.Fatalf("status queue: exit %d, output:\n%s", code, out)
	}
	t.Logf("status output:\n%s", out)
	l.Unlock(t.Context())
}

func TestBreakByToken(t *testing.T) {
	t.Parallel()
	locks, _ := locker(t, etcdlock.WithOwner("stuck-host"))
	l, err := locks.Lock(t.Context(), "stuck")
	if err != nil {
		t.Fatal(err)
	}
	wrong := strconv.FormatInt(int64(l.Token())+1, 10)
	code, _, stderr := result(t, fencelock(t, nil, "break", "stuck", "--token", wrong))
	if code != exitNotAcquired || !strings.Contains(stderr, "nothing was deleted") {
		t.Fatalf("break with a wrong token: exit %d, stderr %q", code, stderr)
	}
	if l.Err() != nil {
		t.Fatalf("after a refused break: Err %v, want the lock held", l.Err())
	}
	code, out, stderr := result(t, fencelock(t, nil, "break", "stuck", "--token", strconv.FormatInt(int64(l.Token()), 10)))
	if code != 0 || !strings.Contains(out, "stuck-host") || !strings.Contains(out, "refuse") {
		t.Fatalf("break: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	select {
	case <-l.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("broken lock's Done not closed within 2s")
	}
	if !errors.Is(l.Err(), etcdlock.ErrKeyDeleted) {
		t.Fatalf("broken lock: Err %v, want ErrKeyDeleted", l.Err())
	}
}

func TestBadUsageAndUnreachable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		eps  []string
		args []string
		want int
	}{
		{"unknown flag", nil, []string{"run", "--frobnicate", "x", "--", "true"}, exitUsage},
		{"no command", nil, []string{"run", "x"}, exitUsage},
		{"bad name", nil, []string{"run", "a\tb", "--", "true"}, exitUsage},
		{"bad election name", nil, []string{"elect", "a\tb", "--", "true"}, exitUsage},
		{"non-UTF-8 value", nil, []string{"elect", "--value", "\xff", "e", "--", "true"}, exitUsage},
		{"bad status name", nil, []string{"status", "a\tb"}, exitUsage},
		{"break without token", nil, []string{"break", "x"}, exitUsage},
		{"bad ttl", nil, []string{"--ttl", "-1s", "status"}, exitUsage},
		{"unknown command", nil, []string{"lcok"}, exitUsage},
		{"unreachable etcd", []string{"127.0.0.1:1"}, []string{"--dial-timeout", "300ms", "run", "x", "--", "true"}, exitUnavailable},
		{"command not found", nil, []string{"run", "x", "--", "/nonexistent/cmd"}, 127},
		{"elect: command not found", nil, []string{"elect", "x", "--", "/nonexistent/cmd"}, 127},
		{"command not executable (a directory)", nil, []string{"run", "x", "--", "/"}, 126},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := result(t, fencelock(t, tt.eps, tt.args...))
			if code != tt.want || !strings.HasPrefix(stderr, "fencelock: ") || strings.Count(stderr, "\n") != 1 {
				t.Fatalf("exit %d, stderr %q; want %d and one line starting \"fencelock: \"", code, stderr, tt.want)
			}
		})
	}
}

// A fencelock run frozen with SIGSTOP past its lease cannot make its
// child's fenced PostgreSQL write land after the next holder's; an
// unfenced write (the control) does.
func TestPausedRunChildWriteRefused(t *testing.T) {
	dsn := pgtest.New(t).NewDatabase(t)
	pool, err := pgxpool.New(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(t.Context(), "CREATE TABLE jobs (id text PRIMARY KEY, holder text, fence bigint NOT NULL DEFAULT 0)"); err != nil {
		t.Fatal(err)
	}
	jobs, err := postgres.NewTable(pgx.Identifier{"jobs"}, postgres.WithKeyColumn("id"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name     string
		unfenced bool
		want     string
		holder   string
	}{{"fenced", false, "stale", "B"}, {"control", true, "ok", "A"}} {
		t.Run(tt.name, func(t *testing.T) {
			job := "job-" + tt.name
			if _, err := pool.Exec(t.Context(), "INSERT INTO jobs (id) VALUES ($1)", job); err != nil {
				t.Fatal(err)
			}
			ready, goFile, res := tempFile(t, "ready"), tempFile(t, "go"), tempFile(t, "result")
			// The child is this test binary in its pgwrite role (set for the
			// child alone: fencelock itself must run as fencelock).
			cmd := fencelock(t, nil, "run", "paused-"+tt.name, "--", "env", testChildEnv+"=pgwrite", os.Args[0])
			cmd.Env = append(cmd.Env, "DSN="+dsn, "JOB="+job,
				"READY_FILE="+ready, "GO_FILE="+goFile, "RESULT_FILE="+res)
			if tt.unfenced {
				cmd.Env = append(cmd.Env, "UNFENCED=1")
			}
			p, err := childproc.Start(cmd, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.Kill)
			tokA, _ := strconv.ParseInt(waitFile(t, ready, 10*time.Second), 10, 64)
			if err := p.Pause(); err != nil { // fencelock, not its child: nothing stops the child now
				t.Fatal(err)
			}

			locks, _ := locker(t)
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			b, err := locks.Lock(ctx, "paused-"+tt.name) // once A's lease expired
			if err != nil {
				t.Fatal(err)
			}
			defer b.Unlock(context.Background())
			if int64(b.Token()) <= tokA {
				t.Fatalf("B's token %d, want > A's %d", b.Token(), tokA)
			}
			g, _ := fence.NewGuard(b)
			if err := g.Do(ctx, func(ctx context.Context, tok fence.Token) error {
				return jobs.Update(ctx, pool, job, tok, postgres.Set("holder", "B"))
			}); err != nil {
				t.Fatalf("B's write: %v", err)
			}
			os.WriteFile(goFile, []byte("x"), 0o644)
			if got := waitFile(t, res, 10*time.Second); got != tt.want {
				t.Fatalf("A's child's late write: got %q, want %q", got, tt.want)
			}
			var holder string
			if err := pool.QueryRow(ctx, "SELECT holder FROM jobs WHERE id = $1", job).Scan(&holder); err != nil || holder != tt.holder {
				t.Fatalf("job row: holder %q (%v), want %q", holder, err, tt.holder)
			}
			if err := p.Resume(); err != nil {
				t.Fatal(err)
			}
			if err := p.Wait(10 * time.Second); errors.Is(err, childproc.ErrRunning) {
				t.Fatalf("fencelock: %v", err)
			}
		})
	}
}

// TestBreakOtherKindHint: a break of a lock NAME with the token of the
// election NAME's leader (or the reverse) deletes nothing and says which
// flag would have found it.
func TestBreakOtherKindHint(t *testing.T) {
	t.Parallel()
	locks, _ := locker(t)
	term, err := locks.Campaign(t.Context(), "ldr", "a")
	if err != nil {
		t.Fatal(err)
	}
	l, err := locks.TryLock(t.Context(), "job")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"lock name, leader's token", []string{"break", "ldr", "--token", term.Token().String()},
			fmt.Sprintf(`an election "ldr" has a leader with token %d: use --election`, term.Token())},
		{"election name, holder's token", []string{"break", "--election", "job", "--token", l.Token().String()},
			fmt.Sprintf(`a lock "job" has a holder with token %d: leave out --election`, l.Token())},
	}
	for _, tt := range tests { // not subtests: the prefix is the test's
		code, _, stderr := result(t, fencelock(t, nil, tt.args...))
		if code != exitNotAcquired || !strings.Contains(stderr, "nothing was deleted") || !strings.Contains(stderr, tt.want) {
			t.Errorf("%s: got exit %d, stderr %q; want %d and a hint %q", tt.name, code, stderr, exitNotAcquired, tt.want)
		}
	}
	if term.Err() != nil || l.Err() != nil {
		t.Fatalf("after refused breaks: term %v, lock %v; want both held", term.Err(), l.Err())
	}
}

// TestStatusFreeOnlyWhenNeither: status NAME shows a NAME free only when
// it has neither a lock holder nor an election leader.
func TestStatusFreeOnlyWhenNeither(t *testing.T) {
	t.Parallel()
	locks, _ := locker(t)
	if _, err := locks.Campaign(t.Context(), "ldr", "a"); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := result(t, fencelock(t, nil, "status", "ldr", "nobody"))
	if code != 0 {
		t.Fatalf("status: exit %d, %s", code, stderr)
	}
	var rows []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		rows = append(rows, strings.Join(strings.Fields(line)[:3], " "))
	}
	if got, want := strings.Join(rows, "; "), "lock nobody free; election ldr leader"; got != want {
		t.Fatalf("status rows (KIND NAME ROLE): got %q, want %q", got, want)
	}
}

// A signal that comes after run took the lock, before it started the
// command, is not lost: the command is not started, fencelock exits
// 128+N, and the lock is released at once, --min-hold or not (another
// run --try right after gets it). It was lost: the command ran to its end
// and fencelock exited 0 with the hold kept, for a signal caught when no
// command was attached to pass it to.
func TestRunSignalBeforeStart(t *testing.T) {
	t.Parallel()
	ready, ran := tempFile(t, "ready"), tempFile(t, "ran")
	cmd := fencelock(t, nil, "run", "--min-hold", "50m", "report", "--", "sh", "-c", "echo ran > "+ran)
	cmd.Env = append(cmd.Env, startHookEnv+"="+ready)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, ready, 10*time.Second)
	cmd.Process.Signal(syscall.SIGTERM)
	if code := waitExit(t, cmd, 10*time.Second); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("SIGTERM before the command started: got exit %d (%s), want %d", code, stderr.String(), 128+int(syscall.SIGTERM))
	}
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("the command ran after fencelock was sent SIGTERM, want it never started")
	}
	next := []string{"run", "--try", "--min-hold", "50m", "report", "--", "true"}
	if code, _, stderr := result(t, fencelock(t, nil, next...)); code != 0 {
		t.Fatalf("another machine's run right after: got exit %d (%s), want 0", code, stderr)
	}
}
