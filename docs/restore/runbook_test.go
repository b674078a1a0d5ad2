// Package restore_test follows docs/restore.md's runbook as written: it
// reads the page's sh blocks and runs them with bash against servers of
// its own.
package restore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/childproc"
	"github.com/fencelock/fencelock/internal/testkit/otheretcd"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// runbook is restore.md's tagged sh blocks, by tag.
type runbook map[string]string

var tagLine = regexp.MustCompile(`^<!-- runbook: (\S+) -->$`)

func readRunbook(t *testing.T) runbook {
	t.Helper()
	f, err := os.Open("../restore.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rb := runbook{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := tagLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		if !sc.Scan() || sc.Text() != "```sh" {
			t.Fatalf("restore.md: the runbook tag %q is not followed by a ```sh block", m[1])
		}
		var b strings.Builder
		for sc.Scan() && sc.Text() != "```" {
			b.WriteString(sc.Text() + "\n")
		}
		rb[m[1]] = b.String()
	}
	for _, tag := range []string{"tools", "snapshot", "vars-one", "restore-one", "start-one", "vars-three", "restore-member", "start-member", "check"} {
		if rb[tag] == "" {
			t.Fatalf("restore.md has no runbook block %q", tag)
		}
	}
	return rb
}

// vars returns the variables a vars block sets, in order.
func vars(block string) []string {
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^([A-Z]+)=`).FindAllStringSubmatch(block, -1) {
		names = append(names, m[1])
	}
	return names
}

// fromPath matches a command of step 1's tools run from PATH.
var fromPath = regexp.MustCompile(`(?m)(?:^|[|;&(]\s*)(etcdctl|etcdutl|fencelock)\s`)

var versionRe = regexp.MustCompile(`(?im)version: v?(\d+\.\d+\.\d+)$`)

// release returns the version a binary of etcd's says it is, run with arg
// (--version for the server, version for the tools).
func release(t *testing.T, bin, arg string) string {
	t.Helper()
	out, err := exec.Command(bin, arg).CombinedOutput()
	m := versionRe.FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("%s %s: %v, no version in\n%s", bin, arg, err, out)
	}
	return string(m[1])
}

// minor returns a version's major.minor.
func minor(v string) string {
	i := strings.LastIndex(v, ".")
	return v[:i]
}

// goModEtcd returns the etcd server version go.mod requires, the one go
// run ./docs/etcd runs.
func goModEtcd(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*go\.etcd\.io/etcd/server/v3 v(\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("go.mod requires no go.etcd.io/etcd/server/v3")
	}
	return string(m[1])
}

// onlyTools fails the test if home holds anything but the directory tools
// (and the directories above it): step 1 leaves the user's own tools,
// $HOME/bin above all, and PATH (~/.profile and the like) alone.
func onlyTools(t *testing.T, home, tools string) {
	t.Helper()
	err := filepath.WalkDir(home, func(p string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case p == tools:
			return filepath.SkipDir
		case !strings.HasPrefix(tools, p+string(filepath.Separator)) && p != home:
			t.Errorf("the runbook created %s; step 1 should create only $TOOLS, %s", p, tools)
			if d.IsDir() {
				return filepath.SkipDir
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// shell runs scripts with bash in dir, with env added to the test's.
type shell struct {
	dir string
	env []string
}

func (sh shell) cmd(script string, env ...string) *exec.Cmd {
	c := exec.Command("bash", "-euo", "pipefail", "-c", script)
	c.Dir = sh.dir
	c.Env = append(append(os.Environ(), sh.env...), env...)
	return c
}

func (sh shell) run(t *testing.T, what, script string, env ...string) string {
	t.Helper()
	out, err := sh.cmd(script, env...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s\nscript:\n%s", what, err, out, script)
	}
	return string(out)
}

// start runs a block that starts a server, in the background until the
// test ends.
func (sh shell) start(t *testing.T, script string, env ...string) *childproc.Proc {
	t.Helper()
	p, err := childproc.Start(sh.cmd("exec "+script, env...), func([]byte) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(5 * time.Second) })
	return p
}

// member is one restored member's variables.
type member struct{ name, peer, client, data string }

func (m member) env() []string {
	return []string{"NAME=" + m.name, "PEER=" + m.peer, "CLIENT=" + m.client, "DATA=" + m.data}
}

func newMembers(t *testing.T, n int) []member {
	ports, err := childproc.FreePorts(2 * n)
	if err != nil {
		t.Fatal(err)
	}
	ms := make([]member, n)
	for i := range ms {
		ms[i] = member{name: fmt.Sprintf("etcd-%d", i), peer: fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]),
			client: fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]), data: filepath.Join(t.TempDir(), "etcd")}
	}
	return ms
}

func serving(t *testing.T, cli *clientv3.Client, ep string, p *childproc.Proc) {
	t.Helper()
	poll.Until(t, "etcd serving at "+ep, func() bool {
		select {
		case <-p.Exited():
			t.Fatalf("etcd at %s exited: %v\n%s", ep, p.Err(), p.Output())
		default:
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err := cli.Status(ctx, ep)
		return err == nil
	})
}

// write takes the lock "job" on cli and writes the resource through a
// Guard, and returns the lock's token and the write's error.
func write(t *testing.T, cli *clientv3.Client, store fence.Store) (fence.Token, error) {
	t.Helper()
	c, err := etcdlock.New(cli)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	l, err := c.Lock(ctx, "job")
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	defer l.Unlock(ctx)
	g, err := fence.NewGuard(l)
	if err != nil {
		t.Fatal(err)
	}
	return l.Token(), g.Put(ctx, store, "k", []byte("v"))
}

// TestRunbook follows docs/restore.md's runbook as written (see "What is
// tested" there): the tools, a snapshot of a running member, a restore
// into one member and into three, and the check; its control restores
// without the bump.
func TestRunbook(t *testing.T) {
	testenv.Long(t, "builds the tools, starts five etcd servers")
	rb := readRunbook(t)
	if got, want := vars(rb["vars-one"]), []string{"NAME", "PEER", "CLIENT", "DATA"}; !slices.Equal(got, want) {
		t.Fatalf("restore.md's one-member variables are %v; this test sets %v", got, want)
	}
	if got, want := vars(rb["vars-three"]), []string{"CLUSTER", "TOKEN", "NAME", "PEER", "CLIENT", "DATA"}; !slices.Equal(got, want) {
		t.Fatalf("restore.md's three-member variables are %v; this test sets %v", got, want)
	}
	if got, want := vars(rb["tools"]), []string{"TOOLS"}; !slices.Equal(got, want) {
		t.Fatalf("restore.md's tools block sets %v; this test reads %v from it", got, want)
	}
	for tag, block := range rb {
		if m := fromPath.FindStringSubmatch(block); m != nil {
			t.Errorf("restore.md's %s block runs %s from PATH, not step 1's %q", tag, m[1], "$TOOLS/"+m[1])
		}
	}
	// The members run go.mod's etcd, as go run ./docs/etcd does: built
	// from this module's own build cache, not a second build of etcd's.
	server := filepath.Join(t.TempDir(), "etcd")
	if out, err := exec.Command("go", "build", "-o", server, "../etcd").CombinedOutput(); err != nil {
		t.Fatalf("go build ./docs/etcd: %v\n%s", err, out)
	}
	version := release(t, server, "--version")
	if embedded := goModEtcd(t); minor(version) != minor(embedded) {
		t.Fatalf("%s is etcd %s; go.mod's (go run ./docs/etcd) is %s", server, version, embedded)
	}

	// Step 1, from the repository's root, into a home of the test's own;
	// Go's paths stay the machine's (a new HOME would move its caches, and
	// its configuration and telemetry, under $XDG_CONFIG_HOME).
	home := t.TempDir()
	goenv, err := exec.Command("go", "env", "GOPATH", "GOCACHE", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	config, err := os.UserConfigDir()
	if err != nil {
		t.Fatal(err)
	}
	gp := strings.Fields(string(goenv))
	env := []string{"HOME=" + home, "GOPATH=" + gp[0], "GOCACHE=" + gp[1], "GOMODCACHE=" + gp[2], "XDG_CONFIG_HOME=" + config}
	root := shell{dir: "../..", env: env}
	out := strings.Split(strings.TrimSpace(root.run(t, "the tools block", rb["tools"]+"echo \"$TOOLS\"\n")), "\n")
	tools := out[len(out)-1]
	onlyTools(t, home, tools)
	defer onlyTools(t, home, tools) // after every block has run
	for _, tool := range []string{"etcdctl", "etcdutl"} {
		if v := release(t, filepath.Join(tools, tool), "version"); minor(v) != minor(version) {
			t.Fatalf("step 1's %s is %s, for a member of %s; want its major.minor", tool, v, version)
		}
	}
	// The members' etcd, by its usual name.
	member := t.TempDir()
	if err := os.Symlink(server, filepath.Join(member, "etcd")); err != nil {
		t.Fatal(err)
	}
	work := shell{dir: t.TempDir(), env: append(env, "TOOLS="+tools, "PATH="+member+":"+os.Getenv("PATH"))}

	// A member in use: the resource goes on past the snapshot.
	orig := otheretcd.Start(t, server, "3.7", filepath.Join(t.TempDir(), "orig"))
	origCli := otheretcd.Client(t, orig.Endpoint)
	store := fence.NewMemoryStore()
	if _, err := write(t, origCli, store); err != nil {
		t.Fatal(err)
	}
	t.Log(work.run(t, "the snapshot block", rb["snapshot"], "CLIENT="+orig.Endpoint))
	for range 20 {
		if _, err := write(t, origCli, store); err != nil {
			t.Fatal(err)
		}
	}
	rec, err := store.Get(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	highest := "HIGHEST=" + fmt.Sprint(int64(rec.Token))
	origCli.Close()
	orig.Stop()

	noBump := strings.Replace(rb["restore-one"], "--bump-revision 1000000000 --mark-compacted", "", 1)
	if noBump == rb["restore-one"] {
		t.Fatal("restore.md's restore-one block has no --bump-revision 1000000000 --mark-compacted to leave out for the control")
	}
	t.Run("one member", func(t *testing.T) {
		m := newMembers(t, 1)[0]
		work.run(t, "the restore-one block", rb["restore-one"], m.env()...)
		p := work.start(t, rb["start-one"], m.env()...)
		cli := otheretcd.Client(t, m.client)
		serving(t, cli, m.client, p)
		t.Log(work.run(t, "the check block", rb["check"], append(m.env(), highest)...))
		if tok, err := write(t, cli, store); err != nil {
			t.Fatalf("a holder of the restored member (token %d) against the resource's %s: %v", tok, highest, err)
		}
	})
	t.Run("one member, no bump (control)", func(t *testing.T) {
		m := newMembers(t, 1)[0]
		work.run(t, "the restore-one block without the bump", noBump, m.env()...)
		p := work.start(t, rb["start-one"], m.env()...)
		cli := otheretcd.Client(t, m.client)
		serving(t, cli, m.client, p)
		out, err := work.cmd(rb["check"], append(m.env(), highest)...).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("the check block after a restore without the bump: %v, want exit 1\n%s", err, out)
		}
		if tok, err := write(t, cli, store); !errors.Is(err, fence.ErrTokenRegressed) {
			t.Errorf("a holder (token %d) of a member restored without the bump: %v, want ErrTokenRegressed", tok, err)
		}
	})
	t.Run("three members", func(t *testing.T) {
		ms := newMembers(t, 3)
		var peers, eps []string
		for _, m := range ms {
			peers = append(peers, m.name+"="+m.peer)
			eps = append(eps, m.client)
		}
		cluster := []string{"CLUSTER=" + strings.Join(peers, ","), "TOKEN=etcd-restored-1"}
		procs := make([]*childproc.Proc, len(ms))
		for _, m := range ms {
			work.run(t, "the restore-member block of "+m.name, rb["restore-member"], append(cluster, m.env()...)...)
		}
		for i, m := range ms {
			procs[i] = work.start(t, rb["start-member"], append(cluster, m.env()...)...)
		}
		cli := otheretcd.Client(t, eps...)
		for i, m := range ms {
			serving(t, cli, m.client, procs[i])
		}
		for _, m := range ms {
			t.Log(work.run(t, "the check block on "+m.name, rb["check"], append(m.env(), highest)...))
		}
		if tok, err := write(t, cli, store); err != nil {
			t.Fatalf("a holder of the restored cluster (token %d) against the resource's %s: %v", tok, highest, err)
		}
		resp, err := cli.MemberList(t.Context())
		if err != nil || len(resp.Members) != 3 {
			t.Fatalf("members of the restored cluster: %v, %v", resp, err)
		}
	})
}
