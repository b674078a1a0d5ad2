package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Server is a PostgreSQL server for tests: a throwaway cluster this package
// started, or an existing server named by FENCELOCK_PG_DSN. Its methods are
// safe for concurrent use.
type Server struct {
	dsn string

	// Set for a throwaway cluster only.
	dir    string
	cred   *syscall.Credential
	bin    binaries
	cmd    *exec.Cmd
	exited chan struct{}

	mu      sync.Mutex      // guards the fields below
	dbs     map[string]bool // databases created and not yet dropped
	spares  []string        // databases created ahead, not yet given out
	drops   []string        // databases given back, not yet dropped
	working bool            // the worker (see work) is running
	closing bool            // Close has begun: no new work
	worker  sync.WaitGroup

	fileCopyOnce sync.Once
	fileCopy     bool // CREATE DATABASE can copy files (see strategy)
}

// spareDatabases is how many empty databases the worker keeps created
// ahead. A CREATE DATABASE takes about 150 ms here, a DROP about 40 ms:
// made and dropped on the side, they took 23 s of fence/postgres's 34 s
// under -short, one test after another.
const spareDatabases = 2

// external returns a Server for the existing server at dsn, once it answers.
func external(ctx context.Context, dsn string) (*Server, error) {
	s := &Server{dsn: dsn}
	if err := s.ping(ctx); err != nil {
		return nil, fmt.Errorf("pgtest: %s: %w", EnvDSN, err)
	}
	return s, nil
}

// DSN returns the connection string of the server's maintenance database.
func (s *Server) DSN() string { return s.dsn }

// Close drops the databases created by [Server.CreateDatabase] that are
// still there and, for a throwaway cluster, stops it and removes its files.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.worker.Wait()
	var errs []error
	if s.dir == "" {
		errs = append(errs, s.dropAll(ctx))
	}
	s.stopPostmaster()
	if s.dir != "" {
		errs = append(errs, os.RemoveAll(s.dir))
	}
	return errors.Join(errs...)
}

func (s *Server) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.dsn)
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// CreateDatabase creates a fresh, empty database and returns its connection
// string. The caller drops it with [Server.DropDatabase]; [Server.Close]
// drops any left on an existing server.
func (s *Server) CreateDatabase(ctx context.Context) (name, dsn string, err error) {
	s.mu.Lock()
	if n := len(s.spares); n > 0 {
		name, s.spares = s.spares[n-1], s.spares[:n-1]
	}
	s.startWork()
	s.mu.Unlock()
	if name != "" {
		return name, withDatabase(s.dsn, name), nil
	}
	return s.create(ctx)
}

// startWork starts the worker unless it runs or Close has begun; s.mu is
// held.
func (s *Server) startWork() {
	if s.working || s.closing {
		return
	}
	s.working = true
	s.worker.Add(1)
	go s.work()
}

// work drops the databases given back and keeps spareDatabases created
// ahead, one statement at a time, until there is nothing to do or Close
// has begun. A database it fails to make or drop is left to Close (which
// drops those of an existing server, and removes a throwaway cluster).
func (s *Server) work() {
	defer s.worker.Done()
	for {
		s.mu.Lock()
		switch {
		case s.closing || len(s.drops) == 0 && len(s.spares) >= spareDatabases:
			s.working = false
			s.mu.Unlock()
			return
		case len(s.drops) > 0:
			name := s.drops[0]
			s.drops = s.drops[1:]
			s.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), statementTimeout)
			err := s.DropDatabase(ctx, name)
			cancel()
			if err != nil {
				s.stopWork()
				return
			}
		default:
			s.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), statementTimeout)
			name, _, err := s.create(ctx)
			cancel()
			if err != nil {
				s.stopWork()
				return
			}
			s.mu.Lock()
			s.spares = append(s.spares, name)
			s.mu.Unlock()
		}
	}
}

// statementTimeout bounds each of the worker's statements.
const statementTimeout = time.Minute

func (s *Server) stopWork() {
	s.mu.Lock()
	s.working = false
	s.mu.Unlock()
}

// dropLater has the worker drop the database name.
func (s *Server) dropLater(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drops = append(s.drops, name)
	s.startWork()
}

// strategy is how CREATE DATABASE copies the template: by files in a
// cluster of ours (fsync off) where the server can (PostgreSQL 15 and
// later), which takes a third of the time of its default (writing the copy
// to the WAL); the default on an existing server, where a file copy's
// checkpoints may cost more.
func (s *Server) strategy(ctx context.Context) string {
	if s.dir == "" {
		return ""
	}
	s.fileCopyOnce.Do(func() {
		conn, err := pgx.Connect(ctx, s.dsn)
		if err != nil {
			return
		}
		defer conn.Close(context.WithoutCancel(ctx))
		var v int
		s.fileCopy = conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&v) == nil && v >= 150000
	})
	if s.fileCopy {
		return " STRATEGY FILE_COPY"
	}
	return ""
}

// create creates a fresh, empty database.
func (s *Server) create(ctx context.Context) (name, dsn string, err error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	name = "pgtest_" + hex.EncodeToString(b[:])
	// Recorded first: a create whose reply is lost may have landed, and
	// Close drops it (IF EXISTS) either way.
	s.mu.Lock()
	if s.dbs == nil {
		s.dbs = make(map[string]bool)
	}
	s.dbs[name] = true
	s.mu.Unlock()
	if err := s.admin(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+s.strategy(ctx)); err != nil {
		return "", "", fmt.Errorf("pgtest: create database: %w", err)
	}
	return name, withDatabase(s.dsn, name), nil
}

// DropDatabase drops a database made by [Server.CreateDatabase],
// disconnecting whoever is still connected to it.
func (s *Server) DropDatabase(ctx context.Context, name string) error {
	err := s.admin(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	if err != nil {
		return fmt.Errorf("pgtest: drop database: %w", err)
	}
	s.mu.Lock()
	delete(s.dbs, name)
	s.mu.Unlock()
	return nil
}

func (s *Server) dropAll(ctx context.Context) error {
	s.mu.Lock()
	var names []string
	for n := range s.dbs {
		names = append(names, n)
	}
	s.mu.Unlock()
	var errs []error
	for _, n := range names {
		errs = append(errs, s.DropDatabase(ctx, n))
	}
	return errors.Join(errs...)
}

func (s *Server) admin(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

// NewDatabase gives t a fresh database, dropped once t ends, and returns
// its connection string. The server's worker makes the next ones ahead and
// drops those given back, so that a test waits for neither.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	name, dsn, err := s.CreateDatabase(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.dropLater(name) })
	return dsn
}

// NewPool returns a pool on a fresh database of the package's server (see
// [New]), closed and dropped when t ends.
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	dsn := New(t).NewDatabase(t)
	pool, err := pgxpool.New(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// withDatabase returns dsn with its database replaced by name; dsn is a URL
// (postgres://...) or keyword/value pairs.
func withDatabase(dsn, name string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		if u, err := url.Parse(dsn); err == nil {
			u.Path = "/" + name
			return u.String()
		}
	}
	// In keyword/value form the last occurrence of a keyword wins.
	return dsn + " dbname=" + name
}
