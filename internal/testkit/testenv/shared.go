package testenv

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"
)

// Shared is the one server of a test-server package (pgtest, mysqltest)
// that a test package's tests share: its [Shared.Main] starts it before the
// tests and sets it here, and the package's New and Shared read it. The
// zero Shared has no server; S is the package's server type (a pointer).
type Shared[S io.Closer] struct {
	// Name names the server in messages ("pgtest").
	Name string
	// Start starts a server; an error matching Unavailable means there is
	// none on this machine.
	Start       func(ctx context.Context) (S, error)
	Timeout     time.Duration // bounds Start, in New
	Unavailable error
	HowToEnable string

	mu  sync.Mutex
	srv S
	err error // why there is no server, when Main found none
	set bool  // Main ran and set srv or err
}

// Get returns the server [Shared.Main] started, or the zero S outside of it
// (and when there is none).
func (s *Shared[S]) Get() S {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.srv
}

// New returns the server [Shared.Main] started, or, without Main, starts one
// for t and closes it when t ends. When there is no server it skips t, or
// fails it under CI=true ([NoServer]).
func (s *Shared[S]) New(t testing.TB) S {
	t.Helper()
	s.mu.Lock()
	srv, err, set := s.srv, s.err, s.set
	s.mu.Unlock()
	if set && err == nil {
		return srv
	}
	if !set {
		ctx, cancel := context.WithTimeout(context.Background(), s.Timeout)
		defer cancel()
		srv, err = s.Start(ctx)
		if err == nil {
			t.Cleanup(func() { _ = srv.Close() })
			return srv
		}
	}
	NoServer(t, err, s.Unavailable, s.HowToEnable)
	var none S
	return none
}

// Main wraps m: the server is started before the tests run and set here
// for them, as [Main] describes.
func (s *Shared[S]) Main(m Runner) Main {
	return Main{
		M: m, Name: s.Name, Unavailable: s.Unavailable, HowToEnable: s.HowToEnable,
		Start: func(ctx context.Context) (io.Closer, error) {
			srv, err := s.Start(ctx)
			if err != nil {
				return nil, err // not a typed nil
			}
			return srv, nil
		},
		Set: func(c io.Closer, err error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			var none S
			s.srv = none
			if c != nil {
				s.srv = c.(S)
			}
			s.err, s.set = err, c != nil || err != nil
		},
	}
}
