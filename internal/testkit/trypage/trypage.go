// Package trypage runs what a store's page under docs/ tells a reader to
// type in its "Try it on your machine" section: the shell line that starts
// the server, from a checkout, with its data in a scratch directory and on
// a free port, so that a test can run the page's client against it.
//
//	line := trypage.Line(t, "docs/redis.md", "redis-server")
//	srv := trypage.Start(t, trypage.Run{Line: line, Port: "6379", Ready: ping})
//	... the page's client, at 127.0.0.1:srv.Port ...
//
// A test of a page checks the server is installed first (the server's
// test helper says how to enable it), so that under CI=true a missing one
// fails the test rather than skipping it.
package trypage

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/testkit/childproc"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// Heading is the section's heading on every store's page.
const Heading = "## Try it on your machine"

// readyTimeout bounds a server's start, from the line's first command to
// Ready's first nil.
const readyTimeout = 90 * time.Second

// Lines returns the lines of the sh blocks in page's Try it section (from
// [Heading] to the next "## " heading), page being relative to the
// repository's root. Each block must be one line: a reader copies it
// whole.
func Lines(tb testing.TB, page string) []string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(Root(tb), page))
	if err != nil {
		tb.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n"+Heading+"\n")
	if !ok {
		tb.Fatalf("%s: no heading %q", page, Heading)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var lines []string
	for _, block := range strings.Split(section, "```sh\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		block = strings.TrimSpace(block)
		if block == "" || strings.Contains(block, "\n") {
			tb.Fatalf("%s: under %q, want every sh block of one line, got %q", page, Heading, block)
		}
		lines = append(lines, block)
	}
	return lines
}

// Line returns the one line of [Lines] that contains want.
func Line(tb testing.TB, page, want string) string {
	tb.Helper()
	var found []string
	for _, l := range Lines(tb, page) {
		if strings.Contains(l, want) {
			found = append(found, l)
		}
	}
	if len(found) != 1 {
		tb.Fatalf("%s: under %q, got %d sh lines with %q, want 1: %q", page, Heading, len(found), want, found)
	}
	return found[0]
}

// Root returns the repository's root: the nearest directory above the
// test's working directory (its package's) with a go.mod.
func Root(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("trypage: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Run says how to run a page's line.
type Run struct {
	// Line is the page's line, as [Line] returns it. Its last command
	// (after its last "&& ") is run with exec, so that the process a test
	// kills is the server itself; it must be a plain command.
	Line string
	// Port is the port the line names ("6379"), once: it is replaced by a
	// free one.
	Port string
	// Dir is the scratch directory the line names ("/tmp/vgw"), at least
	// once: every occurrence is replaced by the path of a directory that
	// does not exist yet, as on a reader's machine (the line makes it),
	// in one removed when the test ends. Empty for a line with none.
	Dir string
	// User, when the test runs as root, is the user the line runs as
	// (PostgreSQL refuses to run as root), the scratch directory (Dir
	// must be set) given to it, and its working directory that one.
	// Otherwise the line runs from the repository's root, as the page
	// says.
	User string
	// Ready returns nil once the server on 127.0.0.1:port answers.
	Ready func(ctx context.Context, port int) error
}

// Server is a server a page's line started. It is killed when the test
// ends.
type Server struct {
	Port int    // where it listens, on 127.0.0.1
	Dir  string // the scratch directory that replaced Run.Dir
	*childproc.Proc
}

// Start runs r.Line with bash and waits, up to 90 s, until r.Ready says
// the server answers. It fails tb if the server exits or does not answer.
func Start(tb testing.TB, r Run) *Server {
	tb.Helper()
	ports, err := childproc.FreePorts(1)
	if err != nil {
		tb.Fatal(err)
	}
	s := &Server{Port: ports[0]}
	line := replaceOnce(tb, r.Line, r.Port, strconv.Itoa(s.Port))
	cmd := exec.Command("bash", "-c", execLast(line))
	cmd.Dir = Root(tb)
	if r.User != "" && r.Dir == "" {
		tb.Fatal("trypage: Run.User needs Run.Dir")
	}
	if r.Dir != "" {
		s.Dir = scratch(tb, r, cmd)
		if !strings.Contains(line, r.Dir) {
			tb.Fatalf("trypage: the line %q names no %s", r.Line, r.Dir)
		}
		cmd.Args[2] = strings.ReplaceAll(cmd.Args[2], r.Dir, s.Dir)
	}
	if s.Proc, err = childproc.Start(cmd, nil); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Kill)
	ctx, cancel := context.WithTimeout(tb.Context(), readyTimeout)
	defer cancel()
	if err := s.AwaitReady(ctx, func(ctx context.Context) error { return r.Ready(ctx, s.Port) }); err != nil {
		tb.Fatalf("the page's line %q: %v", r.Line, err)
	}
	return s
}

// replaceOnce replaces old, which must occur once in s, with new.
func replaceOnce(tb testing.TB, s, old, new string) string {
	tb.Helper()
	if n := strings.Count(s, old); old == "" || n != 1 {
		tb.Fatalf("trypage: the line %q has %q %d times, want once", s, old, n)
	}
	return strings.Replace(s, old, new, 1)
}

// execLast puts exec before the line's last command.
func execLast(line string) string {
	if i := strings.LastIndex(line, "&& "); i >= 0 {
		return line[:i+3] + "exec " + line[i+3:]
	}
	return "exec " + line
}

// scratch returns the path of the scratch directory, in a new directory
// under testenv.DataDir (removed when tb ends), and under root with
// r.User gives that one to the user and sets cmd to run as it, from
// there.
func scratch(tb testing.TB, r Run, cmd *exec.Cmd) string {
	tb.Helper()
	dir, err := testenv.MkdirTemp("trypage")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	path := filepath.Join(dir, filepath.Base(r.Dir))
	if r.User == "" || os.Geteuid() != 0 {
		return path
	}
	u, err := user.Lookup(r.User)
	if err != nil {
		tb.Fatalf("trypage: running as root, the line must run as %s: %v", r.User, err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		tb.Fatalf("trypage: user %s: uid %q, gid %q", r.User, u.Uid, u.Gid)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		tb.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	cmd.Dir = dir
	return path
}
