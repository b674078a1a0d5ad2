package mysqltest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/fencelock/fencelock/internal/testkit/childproc"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// binaries are the programs a throwaway server needs.
type binaries struct{ installDB, server string }

// findBinaries prefers MariaDB's names, then MySQL's, in /usr/sbin,
// /usr/bin and PATH.
func findBinaries() (binaries, error) {
	installDB := lookFirst("mariadb-install-db", "mysql_install_db")
	server := lookFirst("mariadbd", "mysqld")
	if installDB == "" || server == "" {
		return binaries{}, ErrUnavailable
	}
	return binaries{installDB, server}, nil
}

func lookFirst(names ...string) string {
	for _, n := range names {
		for _, d := range []string{"/usr/sbin", "/usr/bin"} {
			p := filepath.Join(d, n)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				return p
			}
		}
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}

// startServer installs a data dir in a fresh temp dir and starts the
// server on it, retrying with another port when the one picked was taken
// in the meantime.
func startServer(ctx context.Context, bin binaries, grants bool) (*Server, error) {
	dir, err := testenv.MkdirTemp("mysqltest")
	if err != nil {
		return nil, fmt.Errorf("mysqltest: %w", err)
	}
	s := &Server{dir: dir, bin: bin, grants: grants}
	if err := s.installDB(ctx); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		err = s.start(ctx)
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

// userArgs is --user=root when we are root: mariadbd refuses to run as
// root without it.
func userArgs() []string {
	if os.Geteuid() == 0 {
		return []string{"--user=root"}
	}
	return nil
}

func (s *Server) command(ctx context.Context, path string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

func (s *Server) installDB(ctx context.Context) error {
	// --no-defaults first: the machine's my.cnf (a system service's
	// datadir, socket, port) must not reach the throwaway server.
	args := append([]string{"--no-defaults", "--datadir=" + s.dataDir(), "--skip-test-db",
		"--auth-root-authentication-method=normal"}, userArgs()...)
	cmd := s.command(ctx, s.bin.installDB, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mysqltest: %s: %w\n%s", filepath.Base(s.bin.installDB), err, out)
	}
	return nil
}

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }
func (s *Server) logPath() string { return filepath.Join(s.dir, "server.log") }

// errExitedEarly means the server exited before accepting connections.
var errExitedEarly = errors.New("mysqltest: server exited before accepting connections")

// start starts the server on a free loopback port and waits until it
// accepts connections.
func (s *Server) start(ctx context.Context) error {
	ports, err := childproc.FreePorts(1)
	if err != nil {
		return fmt.Errorf("mysqltest: %w", err)
	}
	port := ports[0]
	socket := filepath.Join(s.dir, "mysqld.sock")
	args := append([]string{"--no-defaults", "--datadir=" + s.dataDir(),
		"--socket=" + socket, "--pid-file=" + filepath.Join(s.dir, "mysqld.pid"),
		"--port=" + strconv.Itoa(port), "--bind-address=127.0.0.1",
		"--log-error=" + s.logPath(), "--innodb-flush-log-at-trx-commit=0", "--sync-binlog=0",
		"--innodb-buffer-pool-size=64M", "--max-allowed-packet=256M", "--max-connections=300",
		"--innodb-lock-wait-timeout=50", "--skip-name-resolve"}, userArgs()...)
	if !s.grants {
		args = append(args, "--skip-grant-tables")
	}
	// Not CommandContext's ctx: the server outlives the start.
	cmd := s.command(context.Background(), s.bin.server, args...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("mysqltest: starting %s: %w", filepath.Base(s.bin.server), err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(s.exited) }()
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "tcp", "127.0.0.1:"+strconv.Itoa(port)
	if s.grants {
		// root@localhost, the only root there is, over the socket.
		cfg.Net, cfg.Addr = "unix", socket
	}
	s.cfg = cfg
	if err := s.waitReady(ctx); err != nil {
		s.stop()
		return err
	}
	return nil
}

// waitReady polls until the server accepts connections, exits, or ctx
// ends.
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
			return fmt.Errorf("mysqltest: waiting for the server: %w; log:\n%s", ctx.Err(), s.logTail())
		case <-tick.C:
		}
	}
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.logPath())
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

// stop asks for a shutdown (SIGTERM), then kills, waiting for the server
// to exit after each.
func (s *Server) stop() {
	if s.cmd == nil {
		return
	}
	steps := []struct {
		sig  os.Signal
		wait time.Duration
	}{{syscall.SIGTERM, 30 * time.Second}, {syscall.SIGKILL, time.Minute}}
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
