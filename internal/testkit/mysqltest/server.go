package mysqltest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Server is a MySQL-protocol server for tests: a throwaway MariaDB this
// package started, or an existing server named by FENCELOCK_MYSQL_DSN. Its
// methods are safe for concurrent use.
type Server struct {
	cfg *mysql.Config // no database selected

	// Set for a throwaway server only, before it starts.
	grants bool // the grant tables are in force
	dir    string
	bin    binaries
	cmd    *exec.Cmd
	exited chan struct{}

	mu  sync.Mutex
	dbs map[string]bool // databases created and not yet dropped
}

// external returns a Server for the existing server at dsn, once it answers.
func external(ctx context.Context, dsn string) (*Server, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("mysqltest: %s: %w", EnvDSN, err)
	}
	cfg.DBName = ""
	s := &Server{cfg: cfg}
	if err := s.ping(ctx); err != nil {
		return nil, fmt.Errorf("mysqltest: %s: %w", EnvDSN, err)
	}
	return s, nil
}

// Addr returns the server's TCP address (host:port), for a proxy in front
// of it.
func (s *Server) Addr() string { return s.cfg.Addr }

// Config returns a copy of the configuration of a connection to the server
// with database name selected ("" for none).
func (s *Server) Config(name string) *mysql.Config {
	c := s.cfg.Clone()
	c.DBName = name
	return c
}

// Close drops the databases created by [Server.CreateDatabase] that are
// still there and, for a throwaway server, stops it and removes its files.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	if s.dir == "" {
		errs = append(errs, s.dropAll(ctx))
	}
	s.stop()
	if s.dir != "" {
		errs = append(errs, os.RemoveAll(s.dir))
	}
	return errors.Join(errs...)
}

func (s *Server) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	db, err := s.open("")
	if err != nil {
		return err
	}
	defer db.Close()
	return db.PingContext(ctx)
}

func (s *Server) open(name string) (*sql.DB, error) {
	c, err := mysql.NewConnector(s.Config(name))
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(c), nil
}

// CreateDatabase creates a fresh, empty database and returns its name. The
// caller drops it with [Server.DropDatabase]; [Server.Close] drops any left
// on an existing server.
func (s *Server) CreateDatabase(ctx context.Context) (string, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "mysqltest_" + hex.EncodeToString(b[:]) // no character that needs quoting
	if err := s.admin(ctx, "CREATE DATABASE `"+name+"`"); err != nil {
		return "", fmt.Errorf("mysqltest: create database: %w", err)
	}
	s.mu.Lock()
	if s.dbs == nil {
		s.dbs = make(map[string]bool)
	}
	s.dbs[name] = true
	s.mu.Unlock()
	return name, nil
}

// DropDatabase drops a database made by [Server.CreateDatabase].
func (s *Server) DropDatabase(ctx context.Context, name string) error {
	if err := s.admin(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
		return fmt.Errorf("mysqltest: drop database: %w", err)
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

func (s *Server) admin(ctx context.Context, stmt string) error {
	db, err := s.open("")
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, stmt)
	return err
}

// NewDatabase creates a fresh database for t, drops it when t ends, and
// returns the configuration of a connection to it, for the caller to
// change (ClientFoundRows, Params) before opening it.
func (s *Server) NewDatabase(t testing.TB) *mysql.Config {
	t.Helper()
	name, err := s.CreateDatabase(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.DropDatabase(ctx, name); err != nil {
			t.Error(err)
		}
	})
	return s.Config(name)
}

// Open returns a *sql.DB for cfg, closed when t ends.
func Open(t testing.TB, cfg *mysql.Config) *sql.DB {
	t.Helper()
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(c)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// NewDB returns a *sql.DB on a fresh database of the package's server (see
// [New]), closed and dropped when t ends.
func NewDB(t testing.TB) *sql.DB {
	t.Helper()
	return Open(t, New(t).NewDatabase(t))
}
