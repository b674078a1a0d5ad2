package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fencelock/fencelock/internal/testkit/childproc"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// binaries are the PostgreSQL programs a throwaway cluster needs.
type binaries struct{ initdb, postgres string }

// findBinaries looks in /usr/lib/postgresql/*/bin (newest major version
// first), then on PATH.
func findBinaries() (binaries, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return majorOf(dirs[i]) > majorOf(dirs[j]) })
	for _, d := range dirs {
		b := binaries{filepath.Join(d, "initdb"), filepath.Join(d, "postgres")}
		if isExecutable(b.initdb) && isExecutable(b.postgres) {
			return b, nil
		}
	}
	initdb, err1 := exec.LookPath("initdb")
	postgres, err2 := exec.LookPath("postgres")
	if err1 != nil || err2 != nil {
		return binaries{}, ErrUnavailable
	}
	return binaries{initdb, postgres}, nil
}

func majorOf(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// startCluster initdbs a cluster in a fresh temp dir and starts it, retrying
// with another port when the one picked was taken in the meantime.
func startCluster(ctx context.Context, bin binaries) (*Server, error) {
	dir, cred, err := makeDir()
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, cred: cred, bin: bin}
	if err := s.initdb(ctx); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		err = s.startPostmaster(ctx)
		if err == nil || !errors.Is(err, errExitedEarly) || attempt == 3 {
			break
		}
	}
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// makeDir creates the cluster's temp dir, owned by the user the cluster
// runs as: the "postgres" user when we are root, ourselves otherwise.
func makeDir() (string, *syscall.Credential, error) {
	dir, err := testenv.MkdirTemp("pgtest")
	if err != nil {
		return "", nil, fmt.Errorf("pgtest: %w", err)
	}
	if os.Geteuid() != 0 {
		return dir, nil, nil
	}
	cred, err := postgresUser()
	if err == nil {
		err = os.Chown(dir, int(cred.Uid), int(cred.Gid))
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, fmt.Errorf("pgtest: running as root, PostgreSQL must run as the postgres user: %w", err)
	}
	return dir, cred, nil
}

func postgresUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, err
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// command returns a command that runs as the cluster's user, in its dir,
// and is sent SIGQUIT (immediate shutdown) if this process dies first.
func (s *Server) command(ctx context.Context, path string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGQUIT}
	return cmd
}

func (s *Server) initdb(ctx context.Context) error {
	cmd := s.command(ctx, s.bin.initdb, "-D", s.dataDir(), "-U", "postgres",
		"-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	return nil
}

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }
func (s *Server) logPath() string { return filepath.Join(s.dir, "postgres.log") }

// errExitedEarly means the postmaster exited before accepting connections.
var errExitedEarly = errors.New("pgtest: postgres exited before accepting connections")

// startPostmaster starts postgres on a free loopback port and waits until
// it accepts connections.
func (s *Server) startPostmaster(ctx context.Context) error {
	ports, err := childproc.FreePorts(1)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	port := ports[0]
	logf, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	defer logf.Close()
	// Not CommandContext's ctx: the server outlives the start.
	cmd := s.command(context.Background(), s.bin.postgres, "-D", s.dataDir(),
		"-p", strconv.Itoa(port), "-k", s.dir, "-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200", "-c", "shared_buffers=32MB", "-c", "deadlock_timeout=100ms")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: starting postgres: %w", err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(s.exited) }()
	s.dsn = fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=postgres sslmode=disable", port)
	if err := s.waitReady(ctx); err != nil {
		s.stopPostmaster()
		return err
	}
	return nil
}

// waitReady polls until the server accepts connections, the postmaster
// exits, or ctx ends.
func (s *Server) waitReady(ctx context.Context) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if s.ping(ctx) == nil {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("%w; log:\n%s", errExitedEarly, s.logTail())
		case <-ctx.Done():
			return fmt.Errorf("pgtest: waiting for postgres: %w; log:\n%s", ctx.Err(), s.logTail())
		case <-tick.C:
		}
	}
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.logPath())
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

// stopPostmaster asks for a fast shutdown (SIGINT), then an immediate one
// (SIGQUIT), then kills, waiting for the postmaster to exit after each.
func (s *Server) stopPostmaster() {
	if s.cmd == nil {
		return
	}
	steps := []struct {
		sig  os.Signal
		wait time.Duration
	}{{syscall.SIGINT, 20 * time.Second}, {syscall.SIGQUIT, 10 * time.Second}, {syscall.SIGKILL, time.Minute}}
	for _, st := range steps {
		_ = s.cmd.Process.Signal(st.sig)
		timer := time.NewTimer(st.wait)
		select {
		case <-s.exited:
			timer.Stop()
			s.cmd = nil
			return
		case <-timer.C:
		}
	}
}
