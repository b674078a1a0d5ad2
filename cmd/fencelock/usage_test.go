package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/etcdlock"
)

// TestUsageMessages: bad input and an unreachable etcd exit with the status
// the help gives and a message saying what is wrong.
func TestUsageMessages(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		eps  []string
		args []string
		code int
		want string
	}{
		{"negative wait", nil, []string{"run", "--wait", "-1s", "x", "--", "true"}, exitUsage, "--wait -1s: must not be negative"},
		{"empty election name", nil, []string{"elect", "", "--", "true"}, exitUsage, `election name "": etcdlock: invalid name: empty`},
		{"empty lock name", nil, []string{"run", "", "--", "true"}, exitUsage, `lock name "": etcdlock: invalid name: empty`},
		// An invalid NAME is bad usage before anything is dialled, for
		// every command: with etcd unreachable, still 64 and at once.
		{"empty election name, no etcd", []string{"127.0.0.1:1"}, []string{"elect", "", "--", "true"}, exitUsage, `elect: election name "": etcdlock: invalid name: empty`},
		{"empty lock name, no etcd", []string{"127.0.0.1:1"}, []string{"run", "", "--", "true"}, exitUsage, `run: lock name "": etcdlock: invalid name: empty`},
		{"empty semaphore name, no etcd", []string{"127.0.0.1:1"}, []string{"run", "--permits", "2", "", "--", "true"}, exitUsage, `run: semaphore name "": etcdlock: invalid name: empty`},
		{"empty status name, no etcd", []string{"127.0.0.1:1"}, []string{"status", "a", ""}, exitUsage, `status: name "": etcdlock: invalid name: empty`},
		{"empty watched name, no etcd", []string{"127.0.0.1:1"}, []string{"status", "--watch", ""}, exitUsage, `status: name "": etcdlock: invalid name: empty`},
		{"name prefix without NAME, no etcd", []string{"127.0.0.1:1"}, []string{"status", "-w", "--name-prefix"}, exitUsage, "status: --name-prefix needs a NAME to take as a prefix"},
		{"watch, unreachable etcd", []string{"127.0.0.1:1"}, []string{"--dial-timeout", "300ms", "status", "--watch"}, exitUnavailable,
			"dial tcp 127.0.0.1:1: connect: connection refused"},
		{"empty break name, no etcd", []string{"127.0.0.1:1"}, []string{"break", "--election", "", "--token", "3"}, exitUsage, `break: election name "": etcdlock: invalid name: empty`},
		{"name with a tab, no etcd", []string{"127.0.0.1:1"}, []string{"break", "a\tb", "--token", "3"}, exitUsage, `break: lock name "a\tb": etcdlock: invalid name: "a\tb" contains '\t'`},
		{"unreachable etcd", []string{"127.0.0.1:1"}, []string{"--dial-timeout", "300ms", "status"}, exitUnavailable,
			"dial tcp 127.0.0.1:1: connect: connection refused"},
		{"https to plain etcd", httpsEndpoints(), []string{"--dial-timeout", "500ms", "status"}, exitUnavailable,
			"the server does not speak TLS; for a plain-HTTP etcd, use an http:// endpoint"},
		{"no NAME", nil, []string{"run", "--", "true"}, exitUsage, `run: missing NAME before "--"`},
		{"no NAME, no command", nil, []string{"run"}, exitUsage, "run: missing NAME and the command to run"},
		{"no command", nil, []string{"run", "job"}, exitUsage, `run: missing the command to run after NAME "job"`},
		{"no command after --", nil, []string{"run", "job", "--"}, exitUsage, `run: missing the command to run after NAME "job"`},
		{"flag as command", nil, []string{"run", "job", "--ttl", "5s", "--", "true"}, exitUsage,
			`the command to run, "--ttl", is a fencelock flag: put fencelock's flags before NAME`},
		{"flag as election command", nil, []string{"elect", "e", "--value=x", "true"}, exitUsage, `"--value=x", is a fencelock flag`},
		{"permits 0", nil, []string{"run", "--permits", "0", "pool", "--", "true"}, exitUsage, "--permits 0: want 1 to 1024"},
		{"permits too many", nil, []string{"run", "--permits", "1025", "pool", "--", "true"}, exitUsage, "--permits 1025: want 1 to 1024"},
		{"permits negative", nil, []string{"run", "--permits=-2", "pool", "--", "true"}, exitUsage, "--permits -2: want 1 to 1024"},
		{"permits and read", nil, []string{"run", "--read", "--permits", "2", "pool", "--", "true"}, exitUsage,
			"--read and --permits cannot be set at the same time"},
		{"break election and semaphore", nil, []string{"break", "--election", "--semaphore", "x", "--token", "5"}, exitUsage,
			"--election and --semaphore cannot be set at the same time"},
		{"try and wait", nil, []string{"run", "--try", "--wait", "5s", "job", "--", "true"}, exitUsage,
			"--try and --wait 5s cannot be set at the same time, choose one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := result(t, fencelock(t, tt.eps, tt.args...))
			if code != tt.code || !strings.Contains(stderr, tt.want) || strings.Count(stderr, "\n") != 1 {
				t.Fatalf("got exit %d, stderr %q; want %d and one line containing %q", code, stderr, tt.code, tt.want)
			}
		})
	}
}

// httpsEndpoints returns the shared etcd's endpoints, which are plain
// HTTP, as https:// ones.
func httpsEndpoints() []string {
	var eps []string
	for _, ep := range etcdEndpoints() {
		eps = append(eps, "https://"+strings.TrimPrefix(ep, "http://"))
	}
	return eps
}

// TestDefaultTTLIsTheLibrarys: without --ttl, run's lease has the TTL a
// library client's has without WithTTL.
func TestDefaultTTLIsTheLibrarys(t *testing.T) {
	t.Parallel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcdEndpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	locks, err := etcdlock.New(cli, etcdlock.WithPrefix(prefix(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer locks.Close(context.Background())
	l, err := locks.TryLock(t.Context(), "library")
	if err != nil {
		t.Fatal(err)
	}
	out := tempFile(t, "ttl")
	cmd := fencelock(t, nil, "run", "cli", "--", "sh", "-c", `echo "$FENCELOCK_TTL" > `+out)
	cmd.Env = append(cmd.Env, "FENCELOCK_TTL=") // empty: not set
	if code, _, stderr := result(t, cmd); code != 0 {
		t.Fatalf("run: exit %d, %s", code, stderr)
	}
	got := strings.TrimSpace(waitFile(t, out, 5*time.Second))
	if want := strconv.Itoa(int(l.TTL() / time.Second)); got != want {
		t.Fatalf("run's lease TTL without --ttl: got %s s, want the library's default, %s s", got, want)
	}
}

// TestArgsAfterNameGoToCommand: a fencelock flag after NAME goes to the
// command and is noted on stderr, unless "--" right after NAME says it is
// meant for it; flags after a later "--" are not noted.
func TestArgsAfterNameGoToCommand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		sep      []string
		tail     []string
		wantNote bool
	}{
		{"without --", nil, nil, true},
		{"with --", []string{"--"}, nil, false},
		{"with -- after the flag", nil, []string{"--", "--ttl"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := tempFile(t, "args")
			args := append(append([]string{"run", "x"}, tt.sep...), "sh", "-c", `echo "$FENCELOCK_TTL $*" > `+out, "sh", "--ttl", "5s")
			code, _, stderr := result(t, fencelock(t, nil, append(args, tt.tail...)...))
			if code != 0 {
				t.Fatalf("run: exit %d, %s", code, stderr)
			}
			if got, want := strings.TrimSpace(waitFile(t, out, 5*time.Second)), strings.Join(append([]string{"1 --ttl 5s"}, tt.tail...), " "); got != want {
				t.Fatalf("the command's TTL and arguments: got %q, want %q (the --ttl is the command's)", got, want)
			}
			if gotNote := strings.Contains(stderr, "note: --ttl after NAME went to the command"); gotNote != tt.wantNote {
				t.Fatalf("stderr %q: got the note %v, want %v", stderr, gotNote, tt.wantNote)
			}
		})
	}
}

// TestHelpTexts: the root help lists every exit status fencelock has, run's
// help says where arguments after NAME go, and status does not call a
// holder's queueing time its start.
func TestHelpTexts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"help"}, []string{"64 bad usage", "69 etcd", "75 lock not acquired", "78 semaphore", "79", "127 the command cannot be"}},
		{[]string{"help", "run"}, []string{`Every argument after NAME is CMD's, flags included`}},
		{[]string{"help", "elect"}, []string{"every argument after NAME is CMD's"}},
		{[]string{"help", "status"}, []string{"QUEUED", "began to hold or lead"}},
		{[]string{"help"}, []string{"--ttl duration", "whose default it has (env FENCELOCK_TTL) (default 30s)"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := result(t, fencelock(t, nil, tt.args...))
			if code != 0 {
				t.Fatalf("exit %d, %s", code, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("got:\n%s\nwant it to contain %q", stdout, w)
				}
			}
		})
	}
}

// TestStatusQueuedColumn: status labels the time since a holder's key was
// written QUEUED, not SINCE: etcd does not record when a holder that
// waited began to hold.
func TestStatusQueuedColumn(t *testing.T) {
	t.Parallel()
	locks, _ := locker(t)
	if _, err := locks.TryLock(t.Context(), "job"); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := result(t, fencelock(t, nil, "status", "job"))
	header, _, _ := strings.Cut(stdout, "\n")
	if code != 0 || !strings.Contains(header, " QUEUED ") || strings.Contains(header, "SINCE") {
		t.Fatalf("status: exit %d, header %q (%s); want 0 and a QUEUED column, no SINCE", code, header, stderr)
	}
}
